"""copy-large, copy-small, compile and web-serve through the real command line: on a kernel and
a FUSE driver (`fsbench compare ext4 ntfs-3g`), and on a directory (`fsbench run --target`).

Afterwards nothing of theirs may remain: no mount or loop of the run, no nginx, no tmpfs copy
source. Other fsbench runs may share this machine, so "ours" is scoped: the run's own
directories, tmpfs areas of processes that no longer exist, nginx processes that outlive the
command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import alive, cmdline, fsbench, fsbench_released, need_drivers, wait_until

WORKLOADS = "copy-large,copy-small,compile,web-serve"
# A tenth of each workload's amounts (copied bytes, compiled modules, cold bytes served): what
# is checked here is that each runs, is measured and is cleaned up, not how long it takes.
SCALE = "0.1"
VARIANTS = {
    "copy-large": {"in", "out"},
    "copy-small": {"in", "out"},
    "compile": {"configure", "make", "install"},
    "web-serve": {"4k-warm", "64k-warm", "1m-warm", "16m-warm", "64m-warm", "1m-cold", "64m-cold"},
}


def _need_tools() -> None:
    for tool in ("cc", "make", "wrk"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx not installed (apt-get install nginx-light)")


def _nginx_pids() -> set[int]:
    return {
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and any("fsbench-nginx-" in a for a in cmdline(int(p.name)))
    }


def _dead_areas() -> list[str]:
    """tmpfs copy sources whose process is gone: leaked."""
    return [
        str(p)
        for p in Path("/dev/shm").glob("fsbench-src-*")
        if not p.name.removeprefix("fsbench-src-").isdigit()
        or not alive(int(p.name.removeprefix("fsbench-src-")))
    ]


def _assert_nothing_running(nginx_before: set[int]) -> None:
    # Another session's sample may have an nginx up for a moment; ours would stay.
    assert wait_until(lambda: not (_nginx_pids() - nginx_before), 15), "nginx left running"
    assert _dead_areas() == [], "tmpfs copy source left behind"


@pytest.mark.root
@pytest.mark.slow
def test_macro_workloads_on_ext4_and_ntfs3g(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4", "ntfs-3g")
    _need_tools()
    nginx_before = _nginx_pids()
    out = tmp_path / "out"
    doc = fsbench_released(
        state_dir, out,
        "compare", "ext4", "ntfs-3g", "--workloads", WORKLOADS, "--size", "256M",
        "--scale", SCALE, "--repeat", "1", "--warmup", "0", "--min-sample-time", "0",
        "--db", str(tmp_path / "db"),
    ).doc  # fmt: skip
    assert doc["status"] == "complete"
    got = {(r["subject"], r["workload"], r["params"]["variant"]): r for r in doc["results"]}
    want = {(s, w, v) for s in ("ext4", "ntfs-3g") for w, vs in VARIANTS.items() for v in vs}
    assert set(got) == want
    for key, r in got.items():
        if r["status"] == "unsupported":
            # Big files do not fit a 256 MiB image's budget (split between the workloads):
            # said so, not failed; small files always fit.
            assert key[1] == "web-serve" and key[2].startswith(("16m-", "64m-")), key
            assert r["error"] == f"image too small for {key[2][:2]} MiB files"
            continue
        assert r["status"] == "ok", (key, r["error"])
        assert r["samples"] and all(v > 0 for v in r["samples"]), key
        if r["params"]["cache"] == "cold":
            assert r["cache"] == "cold-verified", (key, r["flags"])
    for w in ("copy-large", "copy-small"):
        for v in ("in", "out"):
            methods = {
                s["extra"]["copy_method"]
                for subj in ("ext4", "ntfs-3g")
                for s in got[(subj, w, v)]["sample_details"]
            }
            assert len(methods) == 1, (w, v, methods)  # one method for every subject
            assert not any(
                f.startswith("copy-method-differs") for f in got[("ntfs-3g", w, v)]["flags"]
            )
    # The compiler's CPU is the application's; nginx and wrk's too.
    for subj in ("ext4", "ntfs-3g"):
        assert got[(subj, "compile", "make")]["cpu"]["app_user_s"] > 0
        assert got[(subj, "web-serve", "1m-warm")]["cpu"]["app_sys_s"] > 0
    _assert_nothing_running(nginx_before)


@pytest.mark.slow
def test_macro_workloads_on_a_directory(tmp_path: Path) -> None:
    _need_tools()
    nginx_before = _nginx_pids()
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "out"
    res = fsbench(
        "run",
        "--target",
        str(target),
        "--workloads",
        "copy-small,compile/configure,web-serve/64k-warm,web-serve/1m-cold",
        "--scale",
        SCALE,
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--min-sample-time",
        "0",
        "--out",
        str(out),
        "--db",
        str(tmp_path / "db"),
        timeout=180,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    for r in doc["results"]:
        assert r["status"] == "ok", (r["workload"], r["params"]["variant"], r["error"])
    assert len(doc["results"]) == 5
    assert list(target.iterdir()) == []  # the scratch directory is gone
    _assert_nothing_running(nginx_before)
