"""Latency and IOPS as results of their own: fio's latency percentiles and IOPS of every
sample, their medians on the result, and a result's latency as a *metric view* judged by
fsbench.stats.verdict exactly as its throughput is.

A fio result carries one judged metric, its rate (`Result.samples`). Its p50/p99/p99.9 are in
every sample's extra (`lat_us`), fio's total latency, submission to completion (`lat_ns`;
`lat_basis` LAT_TOTAL), or in runs stored before it and job files that do not ask for it, fio's
completion latency (`clat_ns`, which with libaio on a buffered subject times only the reaping:
workloads/fiojson.py); `words` names which a set of results holds. A second judged metric
needs no second result row: `view(res, "p99")` is the same result with the p99 of each sample
as its samples, unit µs, lower better. Anything that judges a result (summary.compare, the
tables' ratio cells, verdict.judge) judges the view the same way, at the family the run
recorded on the result.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from fsbench.records.schema import Result, Sample

PERCENTILES = ("p50", "p99", "p99.9")
# A workload is latency-bound when each I/O is small and random: there IOPS and the p99 say
# more than MiB/s (the terminal tables add them).
LATENCY_BOUND_MAX_BS = 8 * 1024
_SIZE = re.compile(r"^(\d+)([kKmMgG]?)$")
# What a sample's `lat_basis` says its lat_us are (no basis: a run stored before it, clat).
LAT_TOTAL = "submit-to-completion"  # fio's lat_ns
LAT_COMPLETION = "completion"  # fio's clat_ns
# fio's latency histogram keeps 64 buckets per power of two (FIO_IO_U_PLAT_BITS 6): a
# percentile it reports is a bucket's value, exact to 1/64 of itself at worst.
FIO_RESOLUTION = 1 / 64
WORDS = {LAT_TOTAL: "latency, submit to completion", LAT_COMPLETION: "completion latency (clat)"}


def basis(res: Result) -> str:
    """LAT_TOTAL when every sample's latency is fio's total latency; else LAT_COMPLETION."""
    got = {s.extra.get("lat_basis", LAT_COMPLETION) for s in res.sample_details}
    return LAT_TOTAL if got == {LAT_TOTAL} else LAT_COMPLETION


def words(results: list[Result]) -> str:
    """What the latency figures of these results are, in the reports' words."""
    kinds = {basis(r) for r in results if r.sample_details}
    if kinds == {LAT_COMPLETION}:
        return WORDS[LAT_COMPLETION]
    if kinds == {LAT_TOTAL} or not kinds:
        return WORDS[LAT_TOTAL]
    return "latency, submit to completion (completion only, clat, for runs stored before it)"


def summary(samples: list[Sample]) -> dict[str, float] | None:
    """Median IOPS and median p50/p99/p99.9 (µs) over the samples; None without fio figures."""
    lats = [s.extra.get("lat_us") for s in samples]
    if not samples or not all(isinstance(v, dict) and v for v in lats):
        return None
    out: dict[str, float] = {}
    iops = [float(s.extra["iops"]) for s in samples if s.extra.get("iops")]
    if iops:
        out["iops"] = round(statistics.median(iops), 1)
    for k in PERCENTILES:
        vals = [float(v[k]) for v in lats if isinstance(v, dict) and k in v]
        if len(vals) == len(samples):
            out[f"{k}_us"] = round(statistics.median(vals), 3)
    return out


def centre(res: Result, key: str = "p99") -> float | None:
    """The geometric mean of the samples' `key` (µs, or iops): the centre a comparison of
    `view(res, key)` divides (fsbench.stats.verdict's ratio of geometric means), so the figure
    printed beside a p99 ratio is the one divided. None when a sample lacks it."""
    vals = per_sample(res, key)
    if not vals or any(v <= 0 for v in vals):
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def printed(res: Result) -> dict[str, float]:
    """The latency figures the outputs print: `figures`, with the p99 at its centre (the
    geometric mean its ratio divides) instead of the median over the samples."""
    out = dict(figures(res))
    p99 = centre(res, "p99")
    if p99 is not None:
        out["p99_us"] = round(p99, 3)
    return out


def figures(res: Result) -> dict[str, float]:
    """The result's latency summary; for a run stored before it was recorded, made from the
    samples (their extras always held fio's figures)."""
    return res.latency or summary(res.sample_details) or {}


def per_sample(res: Result, key: str) -> list[float] | None:
    """Each sample's `key` (p50, p99, p99.9 in µs, or iops); None when any sample lacks it."""
    out = []
    for s in res.sample_details:
        v = s.extra.get("iops") if key == "iops" else (s.extra.get("lat_us") or {}).get(key)
        if not isinstance(v, int | float):
            return None
        out.append(float(v))
    return out or None


def view(res: Result, key: str = "p99") -> Result | None:
    """The result with `key` as its judged metric: p50/p99/p99.9 latency (µs, lower is better;
    `basis` says which fio timed) or iops (higher is better). None when its samples do not all
    carry it."""
    vals = per_sample(res, key)
    if vals is None or res.status != "ok":
        return None
    lower = key != "iops"
    med = statistics.median(vals)
    return res.model_copy(
        update={
            "samples": vals,
            "metric": f"{key} {WORDS[basis(res)]}" if lower else "IOPS",
            "unit": "µs" if lower else "IOPS",
            "higher_is_better": not lower,
            "median": med,
            "ci95": None,
            # The run's variance prior was fitted to rates, not latencies: a latency borrows
            # nothing (its own variance, its own degrees of freedom), in the same family as
            # the rate (the table's columns share it). A percentile is a bucket of fio's
            # histogram: judged at that resolution.
            "verdict_family": {
                k: v for k, v in (res.verdict_family or {}).items() if k not in ("d0", "s0sq")
            }
            | ({"resolution": FIO_RESOLUTION} if lower else {}),
        }
    )


def block_bytes(bs: object) -> int | None:
    """fio's block size ("4k", "1M", 8192) in bytes; None when it is not one size."""
    m = _SIZE.match(str(bs).strip())
    if not m:
        return None
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[m.group(2).lower()]
    return int(m.group(1)) * mult


def latency_bound(res: Result) -> bool:
    """Random I/O in records of at most 8 KiB, with fio's latency in its samples."""
    p: dict[str, Any] = res.params
    bs = block_bytes(p.get("block_size", ""))
    random = str(p.get("rw", "")).startswith("rand")
    return random and bs is not None and bs <= LATENCY_BOUND_MAX_BS and bool(figures(res))
