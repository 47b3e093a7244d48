"""The native cell executor (fsbench._iocell) on a temporary directory, no root: what it counts
per operation, its jobs on threads, and its failures surfacing as WorkloadFailed."""

from __future__ import annotations

import dataclasses
import errno
import os
from pathlib import Path

import pytest

from fsbench.errors import WorkloadFailed
from fsbench.workloads import iozone
from fsbench.workloads.base import Target

KiB, MiB = 1024, 1024**2


def _target(tmp_path: Path, size: int = 64 * MiB) -> Target:
    return Target("t", str(tmp_path / "work"), "directory", size)


def _files(tmp_path: Path, n: int, prefix: str = "f") -> list[str]:
    return [str(tmp_path / f"{prefix}{i}") for i in range(n)]


def test_write_then_read_counts_bytes_ops_opens_and_fsyncs(tmp_path: Path) -> None:
    run = iozone._native().run
    files = _files(tmp_path, 3)
    w = run([files], True, "seq", 64 * KiB, 8 * KiB, fsync=True, create=True)
    assert (w["bytes"], w["ops"], w["opens"], w["fsyncs"], w["errno"]) == (
        3 * 64 * KiB,
        24,
        3,
        3,
        0,
    )
    assert all(os.path.getsize(f) == 64 * KiB for f in files)
    # What was written is not zeros (no driver may take a shortcut on them).
    assert Path(files[0]).read_bytes().count(0) < 64 * KiB // 16
    r = run([files], False, "random", 64 * KiB, 8 * KiB, passes=2)
    assert (r["bytes"], r["ops"], r["opens"], r["fsyncs"]) == (6 * 64 * KiB, 48, 6, 0)
    assert r["ns"] > 0 and 0 < r["p50_ns"] <= r["p99_ns"] <= r["p999_ns"] <= r["max_ns"]
    assert r["p50_ns"] <= r["max_ns"] and r["mean_ns"] * r["ops"] <= r["ns"]


def test_jobs_run_on_their_own_files_together(tmp_path: Path) -> None:
    run = iozone._native().run
    a, b = _files(tmp_path, 2, "a"), _files(tmp_path, 2, "b")
    w = run([a, b], True, "seq", 128 * KiB, 16 * KiB, fsync=True, create=True)
    assert (w["bytes"], w["ops"], w["opens"], w["fsyncs"]) == (4 * 128 * KiB, 32, 4, 4)
    assert all(os.path.getsize(f) == 128 * KiB for f in a + b)
    job = dataclasses.replace(iozone.make_job("rand-read", 256 * KiB, 16 * KiB), numjobs=2)
    t = _target(tmp_path)
    job = dataclasses.replace(job, sample_bytes=512 * KiB)
    job.prepare(t)
    m = job.run(t)
    assert m.bytes == 2 * 512 * KiB and m.ops == 64 and job.id.endswith("-j2")
    assert sorted(os.listdir(t.workdir)) == [f"iozone-256k.{j}.{f}" for j in (0, 1) for f in (0, 1)]


def test_the_stride_order_reads_each_record_once(tmp_path: Path) -> None:
    run = iozone._native().run
    (f,) = _files(tmp_path, 1)
    run([[f]], True, "seq", 256 * KiB, 4 * KiB, create=True)
    r = run([[f]], False, "stride", 256 * KiB, 4 * KiB, stride=8)
    assert r["ops"] == 64 and r["bytes"] == 256 * KiB and r["records"] == 64


def test_enospc_surfaces_as_workload_failed(tmp_path: Path) -> None:
    r = iozone._native().run([["/dev/full"]], True, "seq", 64 * KiB, 8 * KiB)
    assert r["errno"] == errno.ENOSPC and r["func"] == "pwrite" and r["bytes"] == 0
    t = _target(tmp_path)
    os.makedirs(t.workdir)
    os.symlink("/dev/full", os.path.join(t.workdir, "iozone-64k.0.0"))
    job = dataclasses.replace(iozone.make_job("rewrite", 64 * KiB, 8 * KiB), sample_bytes=64 * KiB)
    with pytest.raises(WorkloadFailed, match=r"pwrite iozone-64k\.0\.0: No space left on device"):
        job.run(t)
    with pytest.raises(WorkloadFailed, match=r"laying out files for iozone/rewrite-64k-8k: "):
        job.prepare(t)


def test_a_file_ending_early_is_an_io_error(tmp_path: Path) -> None:
    t = _target(tmp_path)
    job = dataclasses.replace(iozone.make_job("read", 64 * KiB, 8 * KiB), sample_bytes=128 * KiB)
    job.prepare(t)
    os.truncate(os.path.join(t.workdir, "iozone-64k.0.1"), 20 * KiB)
    with pytest.raises(WorkloadFailed, match=r"ends early\) iozone-64k\.0\.1: Input/output error"):
        job.run(t)


def test_a_missing_file_and_bad_geometry(tmp_path: Path) -> None:
    run = iozone._native().run
    r = run([[str(tmp_path / "nope")]], False, "seq", 64 * KiB, 8 * KiB)
    assert r["errno"] == errno.ENOENT and r["func"] == "open" and r["opens"] == 0
    with pytest.raises(ValueError, match="whole number of records"):
        run([[str(tmp_path / "x")]], False, "seq", 64 * KiB, 48 * KiB)
    with pytest.raises(ValueError, match="unknown order"):
        run([[str(tmp_path / "x")]], False, "zigzag", 64 * KiB, 8 * KiB)
    with pytest.raises(ValueError, match="non-empty"):
        run([], False, "seq", 64 * KiB, 8 * KiB)
