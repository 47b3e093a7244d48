"""fio's JSON becomes a measurement, or an error that says why: never a silent 0."""

from __future__ import annotations

import json

import pytest

from fsbench.workloads.base import WorkloadFailed
from fsbench.workloads.fio import FIO_JOBS, parse_fio_json


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
