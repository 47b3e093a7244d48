"""The Iozone matrix for real: ext4 against ntfs-3g on a 256 MiB RAM image, one sample each,
over a small grid of the matrix (files 1 and 4 MiB, records 8 and 128 KiB: every operation,
strided reads included; the cell sizes are not the point here). Every one of the seven
operations gives a result for both subjects, reads are verifiably cold, and the stored run
feeds `report`, `diff` and `export`. (`bench/matrix_vs_iozone.py` times the whole
iozone-quick suite against Iozone itself.)
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import fsbench, fsbench_released, need_drivers

from fsbench.workloads import iozone

OPS = {"write", "rewrite", "read", "reread", "rand-read", "rand-write", "stride-read"}
KiB, MiB = 1024, 1024**2
CELLS = iozone.matrix_jobs([1 * MiB, 4 * MiB], [8 * KiB, 128 * KiB])


@pytest.mark.root
@pytest.mark.slow
def test_iozone_quick_ext4_vs_ntfs3g(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4", "ntfs-3g")
    out, db = tmp_path / "out", tmp_path / "db"
    doc = fsbench_released(
        state_dir, out,
        "compare", "ext4", "ntfs-3g", "--size", "256M",
        "--workloads", ",".join(j.id for j in CELLS), "--repeat", "1", "--warmup", "0",
        "--db", str(db / "results.db"),
    ).doc  # fmt: skip

    matrix = [r for r in doc["results"] if r["workload"] == "iozone"]
    assert len(matrix) == len(doc["results"]) == 2 * len(CELLS)
    for subject in ("ext4", "ntfs-3g"):
        mine = [r for r in matrix if r["subject"] == subject]
        assert {r["params"]["op"] for r in mine} == OPS, subject
        for r in mine:
            key = (subject, r["params"]["variant"])
            assert r["status"] == "ok", (key, r["error"])
            assert r["median"] and r["median"] > 0, key
            p = r["params"]
            assert p["record_size"] <= p["file_size"], key
            assert r["work_per_sample"]["bytes"] > 0, key
            if p["cache"] == "cold":
                assert r["cache"] == "cold-verified", (key, r["flags"])
            if p["op"] == "reread":
                assert r["cache"] == "warm", (key, r["flags"])
            # The native executor's own counts: an fsync per file for the writing ops.
            (sample,) = r["sample_details"]
            assert p["engine"] == "native" and sample["ops"] * p["record_size"] == sample["bytes"]
            want = p["files"] * p["passes"]
            assert sample["extra"]["opens"] == want, key
            assert sample["extra"]["fsyncs"] == (want if p["fsync"] == "close" else 0), key
    # The FUSE daemon's CPU is seen on ntfs-3g writes, and never on ext4.
    writes = {r["subject"]: r for r in matrix if r["params"]["variant"] == "write-4m-128k"}
    assert writes["ntfs-3g"]["cpu"]["driver_s"] > 0
    assert writes["ext4"]["cpu"]["driver_s"] == 0

    # The stored run: a report with all seven op plots, a diff against itself, a CSV.
    page = tmp_path / "report.html"
    res = fsbench("report", str(out), "--html", str(page), "--db", str(db / "results.db"))
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    for op in OPS:
        assert f'id="matrix-{op}"' in html
    assert html.count("<svg") >= len(OPS) + 2  # + strided-vs-record, ratio heatmap, costs
    for subject in ("ext4", "ntfs-3g"):
        assert f">{subject}</text>" in html or f"{subject}</" in html

    res = fsbench("diff", doc["run_id"], str(out), "--json", "--db", str(db / "results.db"))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert len(d["results"]) == len(doc["results"]) and not d["environment_differences"]

    res = fsbench("export", doc["run_id"], "--format", "csv", "--db", str(db / "results.db"))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == len(doc["results"])
    assert {r["op"] for r in rows} == OPS
