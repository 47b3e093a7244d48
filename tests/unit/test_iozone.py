"""The Iozone matrix as data: ranges, valid cells, parameters, the record orders, the fio form
used under --clients, suites in the registry; and one small real run of the native executor
per kind of operation on a temporary directory."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from pathlib import Path

import pytest

from fsbench.errors import Unsupported, UsageError
from fsbench.registry import MATRIX_WORKLOADS, SUITES, WORKLOADS, resolve_workloads
from fsbench.workloads import iozone
from fsbench.workloads.base import Target

KiB, MiB, GiB = 1024, 1024**2, 1024**3


def _target(tmp_path: Path, size: int = 409 * MiB) -> Target:
    return Target("t", str(tmp_path / "work"), "directory", size)


# -- the grid ---------------------------------------------------------------------------------
def test_full_matrix_covers_the_seed_ranges() -> None:
    jobs = iozone.FULL_JOBS
    files = sorted({j.file_size for j in jobs})
    records = sorted({j.record_size for j in jobs})
    assert files[0] == 64 * KiB and files[-1] == 2 * GiB
    assert records[0] == 8 * KiB and records[-1] == 128 * MiB
    # ×4 steps (plus the seed's 2 GiB end point after 1 GiB)
    assert all(b / a in (2, 4) for a, b in itertools.pairwise(files))
    assert all(b / a == 4 for a, b in itertools.pairwise(records))
    assert (
        {j.op for j in jobs}
        == set(iozone.OPS)
        == {
            "write",
            "rewrite",
            "read",
            "reread",
            "rand-read",
            "rand-write",
            "stride-read",
        }
    )


def test_every_cell_has_record_at_most_file_and_strides_are_real() -> None:
    for j in iozone.FULL_JOBS:
        assert j.record_size <= j.file_size, j.id
        if j.op == "stride-read":
            assert j.file_size // j.record_size >= 2 * iozone.STRIDE_RECORDS, j.id
    # Every (file, record) pair with record ≤ file has all six non-strided ops.
    cells = {(j.file_size, j.record_size) for j in iozone.FULL_JOBS}
    for fs, rs in cells:
        ops = {j.op for j in iozone.FULL_JOBS if (j.file_size, j.record_size) == (fs, rs)}
        assert set(iozone.OPS) - {"stride-read"} <= ops


def test_ids_and_variants_encode_op_file_and_record() -> None:
    ids = [j.id for j in iozone.FULL_JOBS]
    assert len(ids) == len(set(ids))
    job = iozone.make_job("write", 64 * KiB, 8 * KiB)
    assert (
        job.name == "iozone" and job.variant == "write-64k-8k" and job.id == "iozone/write-64k-8k"
    )
    assert iozone.make_job("stride-read", 2 * GiB, 128 * MiB).variant == "stride-read-2g-128m"
    for j in iozone.FULL_JOBS:
        assert re.fullmatch(r"[a-z-]+-\d+[kmg]-\d+[kmg]", j.variant), j.variant


def test_quick_matrix_is_a_small_subset_of_the_full_one() -> None:
    quick = iozone.QUICK_JOBS
    # Iozone's own quick range (-n 64k -g 16m), in the full matrix' ×4 steps.
    assert sorted({j.file_size for j in quick}) == [64 * KiB * 4**i for i in range(5)]
    assert len({j.record_size for j in quick}) == 3
    assert {j.op for j in quick} == set(iozone.OPS)
    assert {j.id for j in quick} <= {j.id for j in iozone.FULL_JOBS}
    assert len(quick) <= 80


def test_budget_cuts_cells_that_do_not_fit() -> None:
    jobs = iozone.matrix_jobs(iozone.FULL_FILE_SIZES, iozone.FULL_RECORD_SIZES, budget=300 * MiB)
    assert max(j.file_size for j in jobs) == 256 * MiB


# -- parameters and command lines ----------------------------------------------------------------
def test_params_state_op_file_and_record(tmp_path: Path) -> None:
    t = _target(tmp_path)
    p = iozone.make_job("rand-read", 1 * MiB, 8 * KiB).params(t)
    assert p["op"] == "rand-read" and p["file_size"] == MiB and p["record_size"] == 8 * KiB
    assert p["variant"] == "rand-read-1m-8k"
    assert p["rw"] == "randread" and p["cache"] == "cold" and p["block_size"] == "8k"
    # Small files are repeated over several files per sample; each file read once.
    assert p["files"] == iozone.SAMPLE_BYTES // MiB and p["passes"] == 1
    rr = iozone.make_job("reread", 1 * MiB, 8 * KiB).params(t)
    assert rr["files"] == 1 and rr["passes"] == iozone.REREAD_SAMPLE_BYTES // MiB
    assert iozone.make_job("stride-read", 1 * MiB, 8 * KiB).params(t)["stride_records"] == 8
    assert iozone.make_job("write", 1 * MiB, 8 * KiB).params(t)["fsync"] == "close"


def test_files_per_sample_respect_the_budget(tmp_path: Path) -> None:
    job = iozone.make_job("write", 1 * MiB, 128 * KiB)
    assert job.files_for(_target(tmp_path, 409 * MiB)) == iozone.SAMPLE_BYTES // MiB
    assert job.files_for(_target(tmp_path, 3 * MiB)) == 3
    assert iozone.make_job("write", 16 * MiB, 128 * KiB).files_for(_target(tmp_path)) == 1


def test_fio_form_for_clients_mode(tmp_path: Path) -> None:
    """Under --clients a cell runs as the FioJob it composes: the one argv builder of fio.py."""
    t = _target(tmp_path)

    def argv(op: str) -> list[str]:
        return iozone.make_job(op, 1 * MiB, 8 * KiB).fio_job().argv(t)

    w = argv("write")
    assert "--rw=write" in w and "--fsync_on_close=1" in w and "--bs=8k" in w
    n = iozone.SAMPLE_BYTES // MiB
    assert f"--nrfiles={n}" in w and "--filesize=1048576" in w and f"--size={n * MiB}" in w
    assert "--openfiles=1" in w and "--name=iozone-1m" in w
    assert "--fsync_on_close=1" in argv("rewrite") and "--fsync_on_close=1" not in argv("read")
    # Composed, not inherited: a cell is no FioJob and re-lists none of its options.
    from fsbench.workloads.fio import FioJob

    assert not issubclass(iozone.IozoneJob, FioJob)
    assert isinstance(iozone.make_job("write", 1 * MiB, 8 * KiB).fio_job(), FioJob)
    assert "--rw=randwrite" in argv("rand-write")
    # Untimed helpers (layout) take no fsync_on_close: they sync at the end.
    assert "--fsync_on_close=1" not in iozone.make_job("write", MiB, 8 * KiB).fio_job().argv(
        t, rw="write", end_fsync=True
    )
    st = iozone.make_job("stride-read", 1 * MiB, 8 * KiB).fio_job()
    assert st.unsupported and "stride-read" in st.unsupported
    with pytest.raises(Unsupported, match="client mode"):
        st.prepare(t)
    assert iozone.make_job("read", MiB, 8 * KiB).fio_job().unsupported is None


def test_record_orders_visit_every_record_once() -> None:
    native = iozone._native()
    assert native.order("stride", 16, 8) == [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]
    assert native.order("seq", 5) == [0, 1, 2, 3, 4]
    for n in (1, 2, 17, 1000):
        for kind in ("seq", "random", "stride"):
            assert sorted(native.order(kind, n, 8)) == list(range(n)), (kind, n)
    rnd = native.order("random", 1000)
    assert rnd != list(range(1000))  # really shuffled
    assert rnd == native.order("random", 1000)  # the same order for every subject and sample
    assert native.order("random", 1000, seed=2) != rnd


def test_a_file_larger_than_the_budget_is_unsupported(tmp_path: Path) -> None:
    job = iozone.make_job("write", 2 * GiB, 1 * MiB)
    with pytest.raises(Unsupported, match=r"file size 2 GiB exceeds the image budget 409 MiB"):
        job.prepare(_target(tmp_path))
    assert not (tmp_path / "work").exists()  # refused before touching anything


# -- suites -----------------------------------------------------------------------------------
def test_suites_are_registered_and_resolve() -> None:
    for name in ("iozone", "iozone-quick", "seeds"):
        assert SUITES[name]["description"]
    full = resolve_workloads(None, "iozone")
    assert len(full) == len(iozone.FULL_JOBS)
    quick = resolve_workloads(None, "iozone-quick")
    assert [w.id for w in quick] == [j.id for j in iozone.QUICK_JOBS]  # type: ignore[attr-defined]
    # A matrix cell by id, and the matrix stays out of `fsbench list workloads`.
    (one,) = resolve_workloads("iozone/read-64m-2m", None)
    assert one.params(Target("x", "/x", "fake", GiB))["op"] == "read"
    assert not any(w.name == "iozone" for w in WORKLOADS.values())
    assert "iozone/read-64m-2m" in MATRIX_WORKLOADS


def test_seeds_suite_names_each_seed_workload() -> None:
    names = SUITES["seeds"]["workloads"]
    for n in (
        "tree-hash/cold",
        "seq-write/fsync",
        "seq-read/cold",
        "copy-large",
        "copy-small",
        "iozone-quick",
        "compile",
        "web-serve",
        "rand-read/8k-direct",
        "metadata/chmod-flat",
    ):
        assert n in names
    pool = {**WORKLOADS, **MATRIX_WORKLOADS}
    known = [
        n for n in names if n == "iozone-quick" or any(n in (i, w.name) for i, w in pool.items())
    ]
    # Names registered by now resolve; the rest (written elsewhere) resolve once registered.
    resolved = resolve_workloads(",".join(known), None)
    assert len(resolved) >= len(iozone.QUICK_JOBS)
    missing = [n for n in names if n not in known]
    if missing:
        with pytest.raises(UsageError, match=re.escape(missing[0])):
            resolve_workloads(None, "seeds")


# -- the native executor, tiny ---------------------------------------------------------------
@pytest.mark.parametrize("op", iozone.OPS)
def test_each_op_runs_on_a_directory(tmp_path: Path, op: str) -> None:
    t = _target(tmp_path, 64 * MiB)
    job = dataclasses.replace(
        iozone.make_job(op, 256 * KiB, 16 * KiB), sample_bytes=1 * MiB
    )  # 4 files of 256 KiB (reread: one file, 4 passes)
    job.prepare(t)
    m = job.run(t)
    assert m.bytes == 1 * MiB and m.ops == 64, (op, m)
    assert m.value > 0 and m.seconds > 0
    assert m.value == pytest.approx(m.bytes / MiB / m.seconds)
    files = 1 if op == "reread" else 4
    # Every file opened once per pass; fsync at close only for the writing ops.
    assert m.extra["opens"] == 4
    assert m.extra["fsyncs"] == (files if iozone.OP_SPECS[op].fsync else 0)
    lat = m.extra["lat_us"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= m.extra["lat_max_us"]
    assert m.extra["iops"] == pytest.approx(64 / m.seconds)
    names = sorted(os.listdir(t.workdir))
    assert names == [f"iozone-256k.0.{i}" for i in range(files)]
    assert all(os.path.getsize(os.path.join(t.workdir, n)) == 256 * KiB for n in names)


def test_switching_file_size_drops_the_previous_fileset(tmp_path: Path) -> None:
    t = _target(tmp_path, 64 * MiB)
    a = dataclasses.replace(iozone.make_job("rewrite", 256 * KiB, 64 * KiB), sample_bytes=MiB)
    b = dataclasses.replace(iozone.make_job("rewrite", 1 * MiB, 64 * KiB), sample_bytes=MiB)
    a.prepare(t)
    b.prepare(t)
    assert all(n.startswith("iozone-1m.") for n in os.listdir(t.workdir))


def test_clients_mode_runs_the_cells_fio_form() -> None:
    """--clients keeps the matrix on fio: each cell becomes the FioJob it composes."""
    from fsbench.schedule.dimensions.clients import Client, ClientsJob, apply_clients
    from fsbench.workloads.fio import FioJob

    cells = [iozone.make_job("rewrite", MiB, 8 * KiB), iozone.make_job("stride-read", MiB, 8 * KiB)]
    out = apply_clients(list(cells), [Client("10.0.0.2")], None)
    assert [type(w) for w in out] == [ClientsJob, ClientsJob]
    jobs = [w.job for w in out if isinstance(w, ClientsJob)]
    assert all(isinstance(j, FioJob) for j in jobs)
    assert [j.id for j in jobs] == [c.id for c in cells]
    assert jobs[0].fsync_on_close and jobs[0].unsupported is None
    assert jobs[1].unsupported  # said per cell when it runs, not silently dropped


def test_numjobs_applies_to_matrix_cells() -> None:
    ws = resolve_workloads("iozone/read-1m-8k", None, numjobs=[1, 2])
    assert [w.id for w in ws] == ["iozone/read-1m-8k", "iozone/read-1m-8k-j2"]  # type: ignore[attr-defined]
    assert all(isinstance(w, iozone.IozoneJob) for w in ws)
