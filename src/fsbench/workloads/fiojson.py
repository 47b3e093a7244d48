"""fio's JSON document, read: one direction's bytes, time, I/Os, IOPS and latency.

The latency fsbench reports is fio's *total* latency (`lat_ns`: submission to completion),
whose percentiles fio gives only when asked (`LAT_ARGS`, on every fio run fsbench builds).
fio's completion latency (`clat_ns`) starts at submission only for a synchronous engine: with
libaio on a subject that does not honour O_DIRECT (ntfs-3g), the I/O is done inside
io_submit and clat times only the reaping (p99 0.6 µs). So clat is read only where lat has no
percentiles (a user's job file, runs stored before), and every figure says which it is
(`lat_basis`): `LAT_TOTAL` or `LAT_COMPLETION`; a sample without it is an older run's clat.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fsbench.errors import WorkloadFailed
from fsbench.stats.latency import LAT_COMPLETION, LAT_TOTAL

LAT_ARGS = ("--lat_percentiles=1",)
PICK = {"p50": "50.000000", "p99": "99.000000", "p99.9": "99.900000"}


def fio_json(stdout: str) -> dict:
    # fio may print warnings before the document; the JSON starts at the first '{'.
    start = stdout.find("{")
    if start < 0:
        raise ValueError("no JSON in fio output")
    return json.loads(stdout[start:])


def parse_fio_json(stdout: str, direction: str) -> dict[str, Any]:
    """bytes, seconds, IOPS and latency percentiles of the (grouped) job, from fio's JSON."""
    try:
        doc = fio_json(stdout)
        job = doc["jobs"][0]
        part = job[direction]
    except (ValueError, KeyError, IndexError) as e:
        raise WorkloadFailed(f"could not read fio's JSON output ({e})") from e
    if job.get("error"):
        raise WorkloadFailed(f"fio job error {job['error']}: {os.strerror(job['error'])}")
    if int(part.get("io_bytes", 0)) > 0 and float(part.get("runtime", 0)) <= 0:
        # fio rounds to whole milliseconds: a job that moved data in "0 ms" cannot give a rate,
        # and a sample of value 0 would read as the slowest result of all.
        raise WorkloadFailed(
            f"fio reported {part['io_bytes']} B in 0 ms: too little work to time; raise --scale"
        )
    return {**part_figures(part), "fio_version": doc.get("fio version")}


def latency_of(part: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """fio's latency entry for one direction and its basis: the total latency when fio gave
    its percentiles, else the completion latency's; (entry, None) when neither has any."""
    for key, basis in (("lat_ns", LAT_TOTAL), ("clat_ns", LAT_COMPLETION)):
        lat = part.get(key) or {}
        if lat.get("percentile"):
            return lat, basis
    return part.get("lat_ns") or part.get("clat_ns") or {}, None


def latency_figures(part: dict[str, Any]) -> dict[str, Any]:
    """p50/p99/p99.9 and the mean (µs) of one direction, with their basis when known."""
    lat, basis = latency_of(part)
    pct = lat.get("percentile") or {}
    return {
        "lat_us": {k: pct[v] / 1000.0 for k, v in PICK.items() if v in pct},
        "lat_mean_us": float(lat.get("mean", 0.0)) / 1000.0,
        **({"lat_basis": basis} if basis else {}),
    }


def part_figures(part: dict[str, Any]) -> dict[str, Any]:
    """One direction ("read" or "write") of a job's, or a client's, entry in fio's JSON:
    bytes, seconds, I/Os, IOPS and the latency (module doc: submission to completion)."""
    lat, _ = latency_of(part)
    pct = lat.get("percentile") or {}
    return {
        "bytes": int(part.get("io_bytes", 0)),
        "seconds": float(part.get("runtime", 0)) / 1000.0,  # includes the final fsync when asked
        "ios": int(part.get("total_ios", 0)),
        "iops": float(part.get("iops", 0.0)),
        **latency_figures(part),
        # fio's whole percentile list (1 ... 99.99): the points of the report's latency CDF.
        "lat_pct_us": {f"{float(k):g}": v / 1000.0 for k, v in pct.items()},
    }
