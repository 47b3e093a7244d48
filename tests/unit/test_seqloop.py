"""seq-read/cold and seq-write as dd does them (a native read() or write() loop), and their
params say so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsbench import _iocell
from fsbench.errors import WorkloadFailed
from fsbench.registry import WORKLOADS
from fsbench.schedule.dimensions.clients import fio_form
from fsbench.workloads.base import Target
from fsbench.workloads.fio import FioJob, IoParams
from fsbench.workloads.seqloop import READ_LOOP, WRITE_LOOP, SeqLoop, parse_bs

MiB = 1024 * 1024


def _target(tmp_path: Path, size: int = 3 * MiB, read_only: bool = False) -> Target:
    return Target("s", str(tmp_path / "w"), "kernel", size, read_only=read_only)


def test_seq_read_cold_params_name_the_read_loop(tmp_path: Path) -> None:
    wl = WORKLOADS["seq-read/cold"]
    assert isinstance(wl, SeqLoop)
    p = wl.params(_target(tmp_path))
    assert (p["reader"], p["engine"], p["ioengine"]) == (READ_LOOP, "native", "sync")
    # Everything else is its fio job's: the same record and file sizes, the same cache state.
    assert p["block_size"] == "1M" and p["cache"] == "cold" and wl.cache == "cold"
    assert p["file_size"] == 3 * MiB


def test_an_existing_file_on_a_read_only_volume_is_read_by_fio(tmp_path: Path) -> None:
    f = tmp_path / "big"
    f.write_bytes(b"x" * (MiB + 5))
    t = Target("s", str(tmp_path), "kernel", 3 * MiB, read_only=True, existing_file=str(f))
    p = WORKLOADS["seq-read/cold"].params(t)
    assert p["reader"] == "fio psync" and p["engine"] == "fio"


def test_the_loop_reads_every_byte_of_every_job_file(tmp_path: Path) -> None:
    wl = WORKLOADS["seq-read/cold"].with_numjobs(2)
    assert isinstance(wl, SeqLoop) and wl.id == "seq-read/cold-j2"
    t = _target(tmp_path, size=4 * MiB)
    os.makedirs(t.workdir)
    for j in range(2):  # laid out as fio names them (prepare lets fio write them)
        (Path(t.workdir) / f"seq.{j}.0").write_bytes(os.urandom(2 * MiB))
    m = wl.run(t)
    assert m.bytes == 4 * MiB and m.ops == 4
    assert m.value == pytest.approx(m.bytes / MiB / m.seconds)


def test_a_short_file_fails_with_the_call_that_found_it(tmp_path: Path) -> None:
    wl = WORKLOADS["seq-read/cold"]
    t = _target(tmp_path, size=2 * MiB)
    os.makedirs(t.workdir)
    (Path(t.workdir) / "seq.0.0").write_bytes(b"\0" * MiB)
    with pytest.raises(WorkloadFailed, match=r"read \(file ends early\) seq.0.0"):
        wl.run(t)


def test_clients_mode_runs_its_fio_form() -> None:
    wl = WORKLOADS["seq-read/cold"]
    form = fio_form(wl)
    assert isinstance(form, FioJob) and form.id == wl.id and form.rw == "read"
    assert wl.app_comms is None  # the trace's application is fsbench's own thread


def test_native_read_refuses_a_non_sequential_order(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"\0" * MiB)
    with pytest.raises(ValueError, match="sequential"):
        _iocell.run([[str(f)]], False, "random", MiB, 4096, syscall="read")
    with pytest.raises(ValueError, match="unknown syscall"):
        _iocell.run([[str(f)]], False, "seq", MiB, 4096, syscall="mmap")


@pytest.mark.parametrize(("text", "n"), [("1M", MiB), ("4k", 4096), ("8192", 8192)])
def test_parse_bs(text: str, n: int) -> None:
    assert parse_bs(text) == n


def test_jobs_keep_the_loop_and_a_depth_or_engine_is_fio() -> None:
    wl = WORKLOADS["seq-read/cold"]
    assert isinstance(wl.with_io(IoParams(numjobs=2)), SeqLoop)
    deep = wl.with_io(IoParams(iodepth=4))
    assert isinstance(deep, FioJob) and deep.iodepth == 4 and deep.ioengine == "libaio"


def test_seq_write_params_name_the_write_loop(tmp_path: Path) -> None:
    for name in ("seq-write/fsync", "seq-write/buffered"):
        wl = WORKLOADS[name]
        assert isinstance(wl, SeqLoop) and wl.is_write and wl.app_comms is None
        p = wl.params(_target(tmp_path))
        assert (p["writer"], p["engine"], p["ioengine"]) == (WRITE_LOOP, "native", "sync")
        assert "reader" not in p and p["new_file"] is True and p["block_size"] == "1M"
    assert WORKLOADS["seq-write/fsync"].params(_target(tmp_path))["fsync"] == "end"


@pytest.mark.parametrize(("name", "fsyncs"), [("seq-write/fsync", 2), ("seq-write/buffered", 0)])
def test_the_loop_writes_a_new_file_per_job_and_syncs_as_asked(
    tmp_path: Path, name: str, fsyncs: int
) -> None:
    wl = WORKLOADS[name].with_numjobs(2)
    assert isinstance(wl, SeqLoop)
    t = _target(tmp_path, size=4 * MiB)
    os.makedirs(t.workdir)
    stale = Path(t.workdir) / "seq.0.0"
    stale.write_bytes(b"old" * MiB)  # a larger file from before: prepare removes it
    wl.prepare(t)
    assert not stale.exists()
    m = wl.run(t)
    assert m.bytes == 4 * MiB and m.ops == 4 and m.extra["fsyncs"] == fsyncs
    assert m.value == pytest.approx(m.bytes / MiB / m.seconds)
    for j in range(2):
        data = (Path(t.workdir) / f"seq.{j}.0").read_bytes()
        assert len(data) == 2 * MiB and data.count(0) < len(data) // 2  # not zeros


def test_a_write_into_a_missing_directory_fails_with_its_call(tmp_path: Path) -> None:
    wl = WORKLOADS["seq-write/fsync"]
    with pytest.raises(WorkloadFailed, match=r"open seq.0.0: No such file"):
        wl.run(_target(tmp_path, size=2 * MiB))  # no prepare: the directory is not there


def test_native_write_at_the_file_position(tmp_path: Path) -> None:
    f = tmp_path / "w"
    r = _iocell.run([[str(f)]], True, "seq", 2 * MiB, MiB, create=True, syscall="write")
    assert r["errno"] == 0 and r["bytes"] == 2 * MiB and f.stat().st_size == 2 * MiB
    with pytest.raises(ValueError, match="syscall write moves records in sequential order"):
        _iocell.run([[str(f)]], True, "random", MiB, 4096, syscall="write")
