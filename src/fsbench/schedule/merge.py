"""A sample from what was measured: its iterations merged into one (amounts and probe deltas
add up, rates over the whole sample, the workload's extras by its own rules or the common
ones), the cache state the counters prove, and the `schema.Sample` record. Pure over the
measurements; the sampler (sampler.py) measures, aggregate.py turns samples into a Result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from fsbench.probes.sample import ProbeDelta
from fsbench.records.schema import Device, Sample
from fsbench.stats.aggregate import MAX_ITERATIONS, SHORT, SHORT_CAPPED, SHORT_OWN, median_of
from fsbench.workloads.base import Measurement, Workload

GiB = 1024**3


@dataclass
class Iteration:
    """One prepare + cache + timed run, between two probe snapshots; a sample is one or more."""

    m: Measurement
    delta: ProbeDelta
    growth: int | None = None  # the device's page-cache residency grew by (O_DIRECT check)
    cache: str = "warm"  # the cache state prepared (CacheState.asked), verified by build_sample
    cache_flags: list[str] = field(default_factory=list)


def short_sample_flags(seconds: float, iterations: int, wl: Workload, asked: float) -> list[str]:
    """Why a sample lasted less than --min-sample-time (`asked`), if it did."""
    if seconds >= asked:
        return []
    # The code says why (aggregate reads it): the iteration cap, the workload's own minimum.
    figures = f"{seconds:.2f} s, under --min-sample-time {asked:g} s"
    own = wl.min_sample_s
    if seconds <= 0:
        return [f"{SHORT}: {figures}: the workload reported no time"]
    if iterations >= MAX_ITERATIONS:
        return [
            f"{SHORT_CAPPED}: {figures}: stopped at {MAX_ITERATIONS} iterations (the cap); more "
            "work per iteration (--size or --scale) makes it longer"
        ]
    if own is not None and float(own) < asked:
        return [
            f"{SHORT_OWN}: {figures}: the workload's own minimum is {float(own):g} s (one pass "
            "of its work a sample)"
        ]
    return [f"{SHORT}: {figures}: ended early"]


def merge_iterations(runs: list[Iteration], wl: Workload) -> Iteration:
    """One sample from its iterations: amounts and probe deltas add up; a rate is total work
    over total time, any other value the mean; the cache state is the last iteration's."""
    if len(runs) == 1:
        return runs[0]
    ms = [r.m for r in runs]
    seconds = sum(m.seconds for m in ms)
    if wl.unit.endswith("/s") and seconds > 0:
        value = sum(m.value * m.seconds for m in ms) / seconds
    else:
        value = sum(m.value for m in ms) / len(ms)
    m = Measurement(
        value=value,
        seconds=seconds,
        bytes=sum(x.bytes for x in ms),
        ops=sum(x.ops for x in ms),
        app_user_s=sum(x.app_user_s for x in ms),
        app_sys_s=sum(x.app_sys_s for x in ms),
        app_ctx=sum(x.app_ctx for x in ms),
        # Each iteration's own value: a stall inside one sample (one slow iteration of five)
        # tells a different story from a sample slow throughout.
        extra={
            **merge_extras(ms, seconds, wl.merge_extra),
            "iterations": len(ms),
            "iteration_values": [round(x.value, 3) for x in ms],
        },
        flags=list(dict.fromkeys(f for x in ms for f in x.flags)),
    )
    ds = [r.delta for r in runs]
    d = ProbeDelta()
    for f in fields(ProbeDelta):
        vals = [getattr(x, f.name) for x in ds]
        if isinstance(vals[0], int | float):
            setattr(d, f.name, sum(vals))
    d.device = Device(
        **{
            k: sum(getattr(x.device, k) for x in ds)
            for k in ("read_bytes", "write_bytes", "read_ios", "write_ios")
        }
    )
    d.kthreads_by_name = {}
    for x in ds:
        for k, v in x.kthreads_by_name.items():
            d.kthreads_by_name[k] = d.kthreads_by_name.get(k, 0.0) + v
    d.figures = {}
    for x in ds:
        for k, v in x.figures.items():
            d.figures[k] = d.figures.get(k, 0.0) + v
    d.meminfo_before, d.meminfo_after = ds[0].meminfo_before, ds[-1].meminfo_after
    d.flags = list(dict.fromkeys(f for x in ds for f in x.flags))
    growths = [r.growth for r in runs]
    growth = None if any(g is None for g in growths) else sum(g for g in growths if g is not None)
    return Iteration(m, d, growth, runs[-1].cache, runs[-1].cache_flags)


def merge_extras(
    ms: list[Measurement], seconds: float, rules: dict[str, str | Callable] | None = None
) -> dict[str, Any]:
    """The extras of a sample's iterations merged by the workload's rules (hook merge_extra: a
    name of base.MERGE_RULES or a function of the iterations' values); anything else is the
    last iteration's and named in `last_iteration_only`, so no figure claims more than it is."""
    rules = rules or {}
    out: dict[str, Any] = dict(ms[-1].extra)
    merged: dict[str, str] = {}
    last_only: list[str] = []
    for key in ms[-1].extra:
        how = rules.get(key)
        vals = [m.extra.get(key) for m in ms]
        if how is None or any(v is None for v in vals):
            if any(m.extra.get(key) != ms[-1].extra.get(key) for m in ms):
                last_only.append(key)
            continue
        if how == "sum":
            out[key] = sum(vals)
        elif how == "max":
            out[key] = max(vals)
        elif how == "mean":
            out[key] = sum(vals) / len(vals)
        elif how == "rate:ops":
            out[key] = sum(m.ops for m in ms) / seconds if seconds > 0 else None
        elif how == "rate:cpu":
            cpu = sum(m.app_user_s + m.app_sys_s for m in ms)
            out[key] = round(cpu / seconds, 4) if seconds > 0 else None
        elif callable(how):
            out[key] = how(vals)
        elif how == "median":
            if all(isinstance(v, dict) for v in vals):
                out[key] = {
                    k: median_of([v[k] for v in vals if k in v]) for k in vals[-1] if k in vals[0]
                }
            else:
                out[key] = median_of(vals)
            merged[key] = "median over iterations"
    if merged:
        out["merged"] = merged
    if last_only:
        out["last_iteration_only"] = sorted(last_only)
    return out


def verify_cache(
    cache: str, m: Measurement, d: ProbeDelta, is_write: bool, device_growth: int | None = None
) -> tuple[str, list[str]]:
    """Turn the cache state asked for into the one the counters prove."""
    if not m.bytes:
        if cache == "cold" and m.ops:
            # An ops workload (stat of cold inodes) reads metadata blocks, not a byte count.
            if d.device.read_bytes > 0:
                return "cold-verified", []
            return "cold-unverified", ["cold-not-verified: the device was not read at all"]
        return ("cold-unverified" if cache == "cold" else cache), []
    dev_read, dev_written = d.device.read_bytes, d.device.write_bytes
    # The device's own cache when known; else the machine's (noisier: other work moves it).
    cached_growth = (
        device_growth
        if device_growth is not None
        else d.meminfo_after.get("Cached", 0) - d.meminfo_before.get("Cached", 0)
    )
    if cache == "cold":
        # Cold is a claim to check: the device must have delivered (nearly) what was read.
        if dev_read >= 0.9 * m.bytes:
            return "cold-verified", []
        return "cold-unverified", [f"cold-not-verified: device read {dev_read} B of {m.bytes} B"]
    if cache == "warm":
        if dev_read <= 0.1 * m.bytes:
            return "warm", []
        return "warm", [f"warm-not-verified: device read {dev_read} B of {m.bytes} B"]
    if cache == "direct":
        # O_DIRECT bypasses the page cache: the device sees every byte and the cache does not
        # grow. A FUSE daemon that reads its device through the page cache fails the second.
        reached = (dev_written if is_write else dev_read) >= 0.9 * m.bytes
        seen = f"{'wrote' if is_write else 'read'} {dev_written if is_write else dev_read} B"
        mix = m.extra.get("mix")
        if isinstance(mix, dict):
            # A mixed pass (KDiskMark's MIX): each direction's bytes reach the device.
            r, w = mix["read"]["bytes"], mix["write"]["bytes"]
            reached = dev_read >= 0.9 * r and dev_written >= 0.9 * w
            seen = f"read {dev_read} B of {r} B and wrote {dev_written} B of {w} B"
        if cached_growth > 0.5 * m.bytes or not reached:
            return "direct-not-honored", [
                f"direct-not-honored: {'device' if device_growth is not None else 'page'} "
                f"cache grew {cached_growth} B, device {seen} for {m.bytes} B of O_DIRECT I/O"
            ]
        return "direct", []
    return cache, []


def build_sample(
    m: Measurement,
    d: ProbeDelta,
    wl: Workload,
    cache: str,
    cache_flags: list[str],
    device_growth: int | None = None,
) -> Sample:
    is_write = bool(wl.is_write)
    cache, verdict = verify_cache(cache, m, d, is_write, device_growth)
    flags = [*m.flags, *cache_flags, *verdict, *d.flags]
    cpu = d.to_cpu(app_user_s=m.app_user_s, app_sys_s=m.app_sys_s)
    gib = m.bytes / GiB if m.bytes else 0.0
    parts = {
        "app": cpu.app_user_s + cpu.app_sys_s,
        "driver": cpu.driver_s,
        "kernel_threads": cpu.kernel_threads_s,
    }
    if gib > 0:
        cpu.per_gib = {k: v / gib for k, v in parts.items()}
        cpu.per_gib_s = sum(parts.values()) / gib
    elif m.ops:
        # Metadata moves no bytes: its cost is per operation (CPU ms per 1000 ops).
        kops = m.ops / 1000
        cpu.per_kop_ms = {k: 1000 * v / kops for k, v in parts.items()}
    ctx = d.system_ctx
    extra = {**m.extra, **d.figures}  # a counter probe's own amounts, by "<probe>.<key>"
    extra["daemon_ctx"] = d.daemon_ctx
    extra["app_ctx"] = m.app_ctx
    extra["kthreads_by_name"] = d.kthreads_by_name
    extra["kworker_s"] = d.kworker_s
    extra["dirty_after"] = d.meminfo_after.get("Dirty")
    extra["cached_delta"] = d.meminfo_after.get("Cached", 0) - d.meminfo_before.get("Cached", 0)
    return Sample(
        value=m.value,
        seconds=m.seconds,
        bytes=m.bytes,
        ops=m.ops,
        cache=cache,  # type: ignore[arg-type]
        cpu=cpu,
        ctx_switches=ctx,
        subject_ctx_switches=m.app_ctx + d.daemon_ctx,
        device=d.device,
        extra=extra,
        flags=flags,
        trace=d.trace,
    )
