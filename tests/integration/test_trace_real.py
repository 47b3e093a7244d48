"""Kernel trace probes from real `fsbench compare` runs: the FUSE WRITE request size ntfs-3g
really sends (4 KiB on a 1 GiB volume, larger with big_writes on a volume of 4 GiB or more),
and the run's bpftrace gone afterwards."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import fsbench_released, need_drivers

from fsbench.probes import trace as ktrace

pytestmark = pytest.mark.root


def _bpftrace_pids() -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == "bpftrace":
                    out.add(int(d.name))
            except OSError:
                continue
    return out


# The kernel's probes; libfuse's USDT probe needs a daemon fsbench built (test_fuse_floor_real).
KERNEL_PROBES = [p.name for p in ktrace.PROBES if not p.usdt]


def _compare(
    tmp_path: Path, state_dir: Path, subject: str, size: str, scale: str, *extra: str
) -> dict:
    every = ktrace.availability(wanted=KERNEL_PROBES)
    if any(every[n] != "ok" for n in KERNEL_PROBES):
        pytest.skip(f"trace probes unavailable here: {every}")
    need_drivers(subject.split(":")[0])
    out = tmp_path / "out"
    before = _bpftrace_pids()
    doc = fsbench_released(
        state_dir, out,
        "compare", subject, "--size", size, "--scale", scale,
        # The trace is the warm-up's (the last one): the one timed sample is a single pass.
        "--workloads", "seq-write/fsync", "--repeat", "1", "--warmup", "1",
        "--min-sample-time", "0",
        "--db", str(tmp_path / "results.db"), *extra,
    ).doc  # fmt: skip
    # The run's own bpftrace is gone (others' may be running: only new ones count).
    assert not (_bpftrace_pids() - before - {os.getpid()})
    return doc


def _write_sizes(doc: dict, sched: bool) -> tuple[dict[str, int], dict]:
    probes = doc["environment"]["trace_probes"]
    others = [n for n in KERNEL_PROBES if n != "sched"]
    assert {n: probes[n] for n in others} == dict.fromkeys(others, "ok")
    # ntfs-3g embeds its own FUSE library: libfuse's USDT probe has no daemon to attach to.
    assert probes["libfuse"].startswith("no daemon built with libfuse's USDT probes")
    assert probes["sched"] == ("ok" if sched else "off (not in --trace-probes)")
    (res,) = doc["results"]
    assert res["status"] == "ok", res.get("error")
    # No timed sample carries the probes: the trace is the one untimed traced run's, with its
    # own rate beside it.
    assert all(s["trace"] is None for s in res["sample_details"])
    trace = res["trace"]
    assert trace["value"] > 0 and trace["work"]["seconds"] > 0
    fuse = trace["fuse"]
    hist = {int(k): v for k, v in fuse["size_hist"]["WRITE"].items()}
    # Every byte fio wrote in the traced run went through a FUSE WRITE request.
    assert fuse["bytes"]["WRITE"] >= 0.99 * trace["work"]["bytes"] > 0
    assert fuse["latency_us"]["WRITE"]["p50"] > 0 and fuse["latency_us"]["WRITE"]["total"] > 0
    if sched:
        assert trace["sched"]["wakeups"]["driver"] > 0
    else:
        assert "sched" not in trace
    assert sum(trace["block"]["requests"].values()) > 0
    return hist, trace


@pytest.mark.root
def test_ntfs3g_writes_4k_requests_on_a_small_volume(tmp_path: Path, state_dir: Path) -> None:
    doc = _compare(tmp_path, state_dir, "ntfs-3g", "1G", "0.05")  # every probe: the default
    hist, trace = _write_sizes(doc, sched=True)
    dominant = max(hist, key=lambda k: hist[k])
    assert dominant == 4096, hist
    assert hist[4096] >= 0.9 * sum(hist.values())
    print("ntfs-3g 1G WRITE sizes:", hist, "latency", trace["fuse"]["latency_us"]["WRITE"])


@pytest.mark.root
def test_ntfs3g_big_writes_sends_larger_requests_on_4_25g(tmp_path: Path, state_dir: Path) -> None:
    no_sched = ",".join(n for n in ktrace.PROBE_NAMES if n != "sched")
    # 4.25 GiB, as tune makes it for big_writes (ntfs-3g takes it on a volume of 4 GiB or more;
    # mkfs keeps a little), on a loop device over a sparse file: the request sizes are the
    # driver's whatever the backing, and a RAM image of that size is first filled (~13 s here).
    image = tmp_path / "volume.img"
    with open(image, "wb") as f:
        f.truncate(4352 * 1024 * 1024)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    try:
        doc = _compare(tmp_path, state_dir, "ntfs-3g:big_writes", "4352M", "0.01",
                       "--trace-probes", no_sched, "--backing", f"device:{dev}")  # fmt: skip
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
    hist, trace = _write_sizes(doc, sched=False)
    dominant = max(hist, key=lambda k: hist[k])
    # 128 KiB on this kernel (fuse max_write with big_writes): log2 bucket [128 KiB, 256 KiB).
    assert dominant == 131072, hist
    print("ntfs-3g:big_writes 4.25G WRITE sizes:", hist, trace["fuse"]["latency_us"]["WRITE"])
