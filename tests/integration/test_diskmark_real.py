"""A reduced diskmark suite for real on ext4: three of KDiskMark's tests on a
128 MiB RAM image, two passes each. Every result records its depth and engine, IOPS and
p50/p99/p99.9; the QD32 read reaches a device depth above 1 (the kernel's block layer queues
what libaio submits); the terminal shows IOPS, p99 and the grid, the HTML the grid and a
latency CDF per random test. (`bench/diskmark_vs_fio.py` sets all eight against plain fio.)
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, MiB, fsbench_released, need_drivers

from fsbench.records.probes.depth import device_depth
from fsbench.records.schema import Result

TESTS = ("rnd4k-q32t1-read", "rnd4k-q1t1-write", "seq1m-q8t1-read")
DEPTH = {"rnd4k-q32t1-read": 32, "rnd4k-q1t1-write": 1, "seq1m-q8t1-read": 8}


@pytest.mark.root
def test_reduced_diskmark_on_ext4(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4")
    out = tmp_path / "out"
    ran = fsbench_released(
        state_dir, out,
        "compare", "ext4", "--size", "128M", "--repeat", "2", "--warmup", "0",
        "--workloads", ",".join(f"diskmark/{t}" for t in TESTS),
        "--db", str(tmp_path / "results.db"),
    )  # fmt: skip
    results = {r["params"]["variant"]: r for r in ran.doc["results"]}
    assert set(results) == set(TESTS)
    for variant, r in results.items():
        assert r["status"] == "ok", (variant, r["error"])
        p = r["params"]
        assert (p["iodepth"], p["ioengine"], p["direct"]) == (DEPTH[variant], "libaio", True)
        assert p["refill_buffers"] is True  # KDiskMark's fresh data per write
        assert r["cache"] == "direct", (variant, r["flags"])  # ext4 honours O_DIRECT
        lat = r["latency"]
        assert lat["iops"] > 0 and 0 < lat["p50_us"] <= lat["p99_us"] <= lat["p99.9_us"]
        assert len(r["samples"]) == 2
        for s in r["sample_details"]:
            assert "iterations" not in s["extra"]  # one sample is one pass
            assert len(s["extra"]["lat_pct_us"]) == 17
            # fio's total latency, submit to completion (--lat_percentiles=1), not its clat.
            assert s["extra"]["lat_basis"] == "submit-to-completion"
    # At QD32 the device sees many requests at once; at QD1 about one.
    q32 = device_depth(Result.model_validate(results["rnd4k-q32t1-read"]))
    q1 = device_depth(Result.model_validate(results["rnd4k-q1t1-write"]))
    assert q32 is not None and q1 is not None and q32 > 2 * q1, (q32, q1)

    term = ran.stdout
    assert "IOPS" in term and "p99 µs" in term
    assert "p99: fio's latency, submit to completion" in term
    assert "diskmark (KDiskMark's tests)" in term and "RND4K Q32T1 read" in term
    html = (out / "report.html").read_text()
    assert 'id="latency"' in html and "SEQ1M Q8T1 read" in html
    assert 'id="latency-cdf-diskmark-rnd4k-q32t1-read"' in html
    assert 'id="latency-cdf-diskmark-rnd4k-q1t1-write"' in html
    assert 'id="latency-cdf-diskmark-seq1m-q8t1-read"' not in html  # sequential: no CDF


@pytest.mark.root
def test_diskmark_mix_and_kdiskmarks_choices_on_ext4(tmp_path: Path, state_dir: Path) -> None:
    """KDiskMark's MIX (Read 70%/Write 30%) and its Test size and Measure time, for real: a
    32 MiB test file and 1 s passes on a 128 MiB RAM image."""
    need_drivers("ext4")
    out = tmp_path / "out"
    ran = fsbench_released(
        state_dir, out,
        "compare", "ext4", "--size", "128M", "--repeat", "2", "--warmup", "0",
        "--workloads", "diskmark/rnd4k-q1t1-mix,diskmark/seq1m-q1t1-read",
        "--diskmark-size", "32M", "--diskmark-runtime", "1",
        "--db", str(tmp_path / "results.db"),
    )  # fmt: skip
    schema = json.loads((REPO / "docs" / "results.schema.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(ran.doc)
    results = {r["params"]["variant"]: r for r in ran.doc["results"]}
    assert set(results) == {"rnd4k-q1t1-mix", "seq1m-q1t1-read"}
    for variant, r in results.items():
        assert r["status"] == "ok", (variant, r["error"])
        p = r["params"]
        assert (p["runtime_s"], p["file_size"]) == (1, 32 * MiB), variant
        for s in r["sample_details"]:
            # A pass stops at the Measure time (fio's own runtime, the final fsync after it).
            assert s["seconds"] <= 1.5, (variant, s["seconds"])
    mix = results["rnd4k-q1t1-mix"]
    assert (mix["params"]["rw"], mix["params"]["rwmixread"]) == ("randrw", 70)
    assert mix["cache"] == "direct", mix["flags"]
    for s in mix["sample_details"]:
        m = s["extra"]["mix"]
        r, w = m["read"]["mib_s"], m["write"]["mib_s"]
        assert r > 0 and w > 0
        # About 70 % of the bytes were reads (4 KiB each way), and the figure is KDiskMark's.
        assert 0.6 < r / (r + w) < 0.8, (r, w)
        assert s["value"] == pytest.approx((r * 70 + w * 30) / 100)
    assert "RND4K Q1T1 mix" in ran.stdout
