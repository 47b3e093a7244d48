"""fio's JSON becomes a measurement, or an error that says why: never a silent 0."""

from __future__ import annotations

import json

import pytest

from fsbench.errors import WorkloadFailed
from fsbench.workloads.base import ChildResult
from fsbench.workloads.fio import FIO_JOBS, fio_measurement, parse_fio_json


def fio_json(io_bytes: int, runtime_ms: int, error: int = 0) -> str:
    part = {
        "io_bytes": io_bytes,
        "runtime": runtime_ms,
        "total_ios": io_bytes // 4096,
        "iops": 1000.0,
        "clat_ns": {"mean": 2000.0, "percentile": {"50.000000": 1500, "99.000000": 9000}},
    }
    job = {"jobname": "x", "error": error, "read": part, "write": {}}
    # fio prints notes before its JSON on some versions: the parser must skip them.
    return "note: something\n" + json.dumps({"fio version": "fio-3.33", "jobs": [job]})


def test_parse_reads_bytes_time_and_percentiles() -> None:
    got = parse_fio_json(fio_json(8 * 1024 * 1024, 250), "read")
    assert got["bytes"] == 8 * 1024 * 1024
    assert got["seconds"] == pytest.approx(0.25)
    assert got["lat_us"] == {"p50": 1.5, "p99": 9.0}
    assert got["fio_version"] == "fio-3.33"


def test_zero_milliseconds_with_data_is_an_error_not_a_zero_sample() -> None:
    with pytest.raises(WorkloadFailed, match="0 ms"):
        parse_fio_json(fio_json(4096, 0), "read")


def test_fio_job_error_is_reported_with_errno_text() -> None:
    with pytest.raises(WorkloadFailed, match="No space left"):
        parse_fio_json(fio_json(4096, 10, error=28), "read")


def test_buffered_random_writes_say_they_have_no_fsync() -> None:
    buffered = [j for j in FIO_JOBS if j.name == "rand-write" and not j.direct]
    assert buffered
    for job in buffered:
        assert "without fsync" in job.description


def _prepare_argvs(job_id: str, tmp_path, monkeypatch) -> list[list[str]]:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    import fsbench.workloads.fio as fio
    from fsbench.workloads.base import Target

    calls: list[list[str]] = []

    def child(argv: list[str], **_kw):  # type: ignore[no-untyped-def]
        calls.append(argv)
        (tmp_path / "seq.0.0").write_bytes(b"\0" * (1 << 20))
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(fio, "measured_child", child)
    job = next(j for j in FIO_JOBS if j.id == job_id)
    job.prepare(Target("s", str(tmp_path), "kernel", 1 << 20))
    return calls


def test_reread_and_seq_read_warm_are_different_experiments(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """reread reads a file just read; seq-read/warm reads a file just written (Iozone's read
    follows its write): the same fio job under two names would measure one thing twice."""
    warm = _prepare_argvs("seq-read/warm", tmp_path, monkeypatch)
    assert len(warm) == 1 and "--rw=write" in warm[0]
    reread = _prepare_argvs("reread/warm", tmp_path, monkeypatch)
    assert "--rw=read" in reread[-1]
    assert not any("--rw=write" in argv for argv in reread)  # the file was laid out already
    by_id = {j.id: j for j in FIO_JOBS}
    assert by_id["reread/warm"].read_only_ok
    assert not by_id["seq-read/warm"].read_only_ok  # warming it means writing it


def test_a_phase_timed_at_zero_seconds_fails_instead_of_dividing() -> None:
    """fio.py and the user's job files (fiofile.py) share one measurement: 8 MiB in 250 ms is
    32 MiB/s with the child's rusage, and a run fio timed at 0 s has no rate."""
    child = ChildResult(0, "", "", 0.3, 0.1, 0.05, 7)
    m = fio_measurement(parse_fio_json(fio_json(8 * 1024 * 1024, 250), "read"), child)
    assert (m.value, m.bytes, m.app_user_s, m.app_ctx) == (32.0, 8 * 1024 * 1024, 0.1, 7)
    assert m.extra["lat_us"] == {"p50": 1.5, "p99": 9.0}
    # fiofile's phase_figures does not check the time itself: the shared helper does.
    zero = {"bytes": 8 * 1024 * 1024, "seconds": 0.0, "ios": 2048}
    with pytest.raises(WorkloadFailed, match=r"at 0\.0 s"):
        fio_measurement(zero, child)
