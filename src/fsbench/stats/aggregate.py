"""A result from its samples: statistics of the rates, the medians of CPU, device and context
switches (CPU parts from the median sample so they add up), amplification, flags collapsed
one line per kind, and the warning on samples too short to trust. Pure over the records, so
it sits beside the schema; the runner calls it after every sample.
"""

from __future__ import annotations

import statistics as _st
from collections.abc import Callable
from typing import Any

from fsbench.records import notecodes
from fsbench.records.notecodes import Note
from fsbench.records.schema import CPU, Device, Result, Sample
from fsbench.stats import describe, latency
from fsbench.stats.verdict import prior_of

GiB = 1024**3

# A sample stops growing at this many iterations, even below --min-sample-time (the sample
# then says so: short_sample_flags): a workload whose iteration takes milliseconds would
# otherwise run thousands, each with its cache preparation and probes.
MAX_ITERATIONS = 20
# Samples whose median lasts less get a "too short to trust" warning. The design's figure
# (BRIEF, "Size each sample to last long enough": ≥ ~1 s; bonnie++ gives up under ~0.5 s, and
# compile/install at 0.1 s spread ±111 %): timer resolution is not the limit, everything a
# sample pays once (process start, open, the final fsync, a writeback flush) is.
TOO_SHORT_S = 1.0
# A sample shorter than --min-sample-time is flagged with one of these codes: ended early, at
# the iteration cap, or at the workload's own lower minimum (one pass of its work a sample).
SHORT, SHORT_CAPPED, SHORT_OWN = "short-sample", "short-sample-capped", "short-sample-own"


def median_of(xs: list[float]) -> float:
    """The median; 0.0 for no values (a figure no sample had)."""
    return float(_st.median(xs)) if xs else 0.0


def median_parts(samples: list[dict[str, float]]) -> dict[str, float]:
    """The parts (app, driver, kernel threads) of the median sample by their sum, so they add
    up to the median total shown beside them; per-part medians need not (each may come from
    another sample). With an even count, the mean of the middle two samples' parts."""
    order = sorted(samples, key=lambda p: sum(p.values()))
    n = len(order)
    mid = order[(n - 1) // 2 : n // 2 + 1]
    keys = list(dict.fromkeys(k for p in samples for k in p))
    return {k: sum(p.get(k, 0.0) for p in mid) / len(mid) for k in keys}


def _costs(res: Result, det: list[Sample], is_write: bool) -> float:
    """CPU, device, context switches and amplification as medians over the samples; returns
    the median bytes a sample moved."""
    cpu_fields = [
        "app_user_s",
        "app_sys_s",
        "driver_s",
        "kernel_threads_s",
        "system_busy_s",
        "system_iowait_s",
    ]
    cpu = CPU(**{f: median_of([getattr(x.cpu, f) for x in det]) for f in cpu_fields})
    per = [x.cpu.per_gib for x in det if x.cpu.per_gib_s is not None and x.cpu.per_gib]
    if per:
        cpu.per_gib = median_parts(per)
        cpu.per_gib_s = sum(cpu.per_gib.values())
    per_kop = [x.cpu.per_kop_ms for x in det if x.cpu.per_kop_ms]
    if per_kop:
        cpu.per_kop_ms = median_parts(per_kop)
    res.cpu = cpu
    res.device = Device(
        **{
            f: int(median_of([getattr(x.device, f) for x in det]))
            for f in ("read_bytes", "write_bytes", "read_ios", "write_ios")
        }
    )
    res.ctx_switches = median_of([x.ctx_switches for x in det])
    own = [x.subject_ctx_switches for x in det if x.subject_ctx_switches is not None]
    res.subject_ctx_switches = median_of(own) if own else None
    moved = median_of([x.bytes for x in det])
    if moved:
        res.ctx_switches_per_gib = res.ctx_switches / (moved / GiB)
        if res.subject_ctx_switches is not None:
            res.subject_ctx_switches_per_gib = res.subject_ctx_switches / (moved / GiB)
        if is_write:
            res.write_amplification = res.device.write_bytes / moved
        else:
            res.read_amplification = res.device.read_bytes / moved
    return moved


def _too_short(det: list[Sample], seconds: float, moved: float, ops: int) -> Note | None:
    """The note for samples too short to trust, or None. A workload that asks for less
    than the run's minimum (matrix cells) says why in its short-sample flag; any other sample
    under TOO_SHORT_S is too short to trust."""
    codes = [{notecodes.flag_note(f).code for f in x.flags} for x in det]
    by_design = all(SHORT_OWN in c for c in codes)
    if seconds >= TOO_SHORT_S or by_design:
        return None
    capped = any(SHORT_CAPPED in c for c in codes)
    grow = (
        "--min-sample-time"
        if not capped
        else "--scale"
        if not moved and ops
        else "--size or --scale"
    )
    return Note(code="too-short", params={"seconds": seconds, "need_s": TOO_SHORT_S, "grow": grow})


def aggregate(
    res: Result,
    is_write: bool = False,
    summarize: Callable[[list[Sample]], dict[str, Any]] | None = None,
) -> None:
    """Statistics over the samples; CPU, device and ctx as medians of the per-sample values
    (CPU per GiB and per kop: the median sample's parts, so they add up: median_parts).
    `is_write`: the workload's declared direction, which picks write or read amplification
    (copy-large writes though its name does not say so)."""
    if not res.samples:
        return
    s = describe.summarize(res.samples, prior=prior_of(res))
    res.center, res.median, res.ci95, res.cv = s.center, s.median, s.ci95, s.cv
    res.outliers = list(s.outliers)
    warned = list(s.notes)
    det = res.sample_details
    moved = _costs(res, det, is_write)
    res.latency = latency.summary(det)
    for key, value in (summarize(det) if summarize else {}).items():
        setattr(res, key, value)  # fields the workload fills itself (hook summarize_samples)
    caches = [x.cache for x in det]
    res.cache = max(set(caches), key=caches.count)  # type: ignore[assignment]
    flagged = []
    if len(set(caches)) > 1:
        flagged.append(Note(code="mixed-cache", params={"states": sorted(set(caches))}))
    flagged += notecodes.collapse([x.flags for x in det])
    # How much work one sample was (not a param: params are the result's identity).
    seconds = round(median_of([x.seconds for x in det]), 4)
    ops = int(median_of([x.ops for x in det]))
    res.work_per_sample = {
        "bytes": int(moved),
        "ops": ops,
        "seconds": seconds,
    }
    short = _too_short(det, seconds, moved, ops)
    warned += [short] if short else []
    # The notes as data, and in words for readers of the JSON; notes added before (none in a
    # run; a test's) are kept after these.
    new = [*warned, *flagged]
    res.notes = [*new, *(n for n in res.notes if n not in new)]
    res.flags = sorted(set(res.flags) | {notecodes.words(n) for n in flagged})
    res.warnings = [notecodes.words(n) for n in warned]
