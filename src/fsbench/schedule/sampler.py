"""The measurement of one sample: bring the target and its caches into the workload's state,
pin the placement, read the probes just before and just after the timed run (never inside
it); samplemerge.py makes one `schema.Sample` of a sample's iterations. The schedule that asks
for samples is runner.py; their aggregation into a `Result` is aggregate.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from fsbench.errors import Unsupported
from fsbench.probes import trace as ktrace
from fsbench.probes.pagecache import resident_bytes
from fsbench.probes.procfs import ProcFS, kthread_patterns_for
from fsbench.probes.sample import ProbeDelta, ProbeSpec, diff, take_snapshot
from fsbench.records.schema import Result, Sample
from fsbench.schedule.dimensions.placement import Pinned, asked, pin, placement_of
from fsbench.schedule.merge import (
    Iteration,
    build_sample,
    merge_iterations,
    short_sample_flags,
    verify_cache,
)
from fsbench.schedule.mounted import Mounted
from fsbench.schedule.phases import PhaseClock
from fsbench.stats.aggregate import MAX_ITERATIONS
from fsbench.workloads.base import Measurement, Target, Workload, unmet_need, watched

GiB = 1024**3
MiB = 1024**2


@dataclass
class CacheState:
    """The cache state a workload asked for, as prepared, and why it could not be (flags);
    verify_cache turns it into the state the counters prove."""

    asked: str
    flags: list[str] = field(default_factory=list)
    # A cold cache's method, for the sample's extra (lab/cold.py): {"cold_method": "evict"}
    # (its files and the device's buffers) or "full" (sync, drop_caches, FUSE remount) and why.
    record: dict[str, str] = field(default_factory=dict)


@dataclass
class Iterations:
    """A sample's iterations, before they are merged, and the value of a discarded first one
    (`rewarm`, kept in the sample's extra)."""

    kept: list[Iteration]
    rewarm: float | None = None


@dataclass
class TraceSession:
    """The one owner of bpftrace's lifetime while measuring: launched as the warm-up pass
    begins (its compile, ~1.2 s here, overlaps the pass's first steps), attached right before
    each traced run (the last warm-up run of each subject and workload), killed as the pass
    ends, and reaped before the next timed run (its exit, ~1 s: the probes' detach, overlaps
    that sample's preparation), so no timed run has a probe attached. One bpftrace for the
    pass: one per traced run cost ~2.2 s each, 12 % of the default comparison. The pipeline
    stops it once more at the end whatever happened, and the lab's release after a crash."""

    tracer: ktrace.Tracer | None
    clock: PhaseClock

    @property
    def wanted(self) -> bool:
        """Some probe is still available: a traced run is worth its time."""
        return self.tracer is not None and self.tracer.wanted

    @contextmanager
    def warm_up_pass(self) -> Iterator[None]:
        """bpftrace launched for the pass, killed when it ends (reaped by `detach`)."""
        tracer = self.tracer if self.wanted else None
        if tracer is not None:
            with self.clock.phase("bpftrace"):
                tracer.launch()
        try:
            yield
        finally:
            if tracer is not None:
                tracer.kill()

    def launch(self) -> None:
        """Before a traced run's preparation: nothing when the pass launched it already."""
        if self.tracer is not None:
            with self.clock.phase("bpftrace"):
                self.tracer.launch()

    def attach(self) -> None:
        """Right before the traced run's snapshot: wait until its probes are attached."""
        if self.tracer is not None:
            with self.clock.phase("bpftrace"):
                self.tracer.ready()

    def detach(self) -> None:
        """Right before a timed run's snapshot: the killed bpftrace gone, its probes
        detached."""
        if self.tracer is not None:
            with self.clock.phase("bpftrace"):
                self.tracer.reap()

    def reap(self) -> None:
        """After a sample, failed or not: nothing of bpftrace outlives it."""
        if self.tracer is not None:
            self.tracer.reap()

    def untraced(self, why: str) -> dict[str, Any] | None:
        """A result's trace record saying why it has no traced run (None: not traced anyway)."""
        if self.tracer is None or not self.tracer.wanted:
            return None
        return ktrace.untraced(self.tracer.status, why)


@dataclass
class Sampler:
    """What one sample needs: the target mounted and sized, the workload prepared, the
    caches in its state, the placement pinned, the probes read around the timed run (the
    kernel trace only around the traced warm-up run), and the iterations that make a sample
    long enough. The schedule (runner.py) decides which sample comes next."""

    procfs: ProcFS = field(default_factory=ProcFS)
    clock: PhaseClock = field(default_factory=PhaseClock)
    tracer: ktrace.Tracer | None = None
    # A sample lasts at least this long (iterations are added until it does).
    min_sample_s: float = 1.0
    # Discarded iterations before the first sample of each subject and workload.
    warmup: int = 1
    # Discard the first iteration of a sample that takes several (iterations).
    rewarm: bool = True
    # The part of the file budget a workload may fill (Runner.space_share).
    space_share: Callable[[Workload], float] = lambda _wl: 1.0
    trace: TraceSession = field(init=False, repr=False)
    # (subject, workload) -> why its evicted cold read failed the counter check: the full
    # method for it from then on (the failed iteration is measured again).
    cold_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    # The CPU masks a placement changed for the timed run under way (restored after it).
    _pinned: Pinned | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.trace = TraceSession(self.tracer, self.clock)

    def warmups(self, wl: Workload) -> int:
        own = wl.warmup
        return self.warmup if own is None else int(own)

    def min_time(self, wl: Workload) -> float:
        own = wl.min_sample_s
        return self.min_sample_s if own is None else float(own)

    def untraced(self, res: Result, wl: Workload) -> None:
        """No warm-up, no traced run: an extra one would cost as much as a sample (it doubled
        a --repeat 1 run) and ~2 s of bpftrace per matrix cell, so the result says why."""
        if self.warmups(wl) == 0:
            res.trace = self.trace.untraced(NO_WARMUP_TO_TRACE) or res.trace

    def warm_up(self, rt: Mounted, wl: Workload, res: Result) -> None:
        """The one warm-up path: iterations, discarded, since the first run touches memory
        (page cache, daemon heaps) for the first time, which is slow and erratic on VMs. The
        last of them is the traced run, with the kernel probes attached, which the explanation
        is drawn from (its own rate is kept, so a slow first touch or the probes' cost shows
        against the timed median)."""
        count = self.warmups(wl)
        traced = self.trace.wanted and count > 0
        with self.clock.phase("warm-up", whole=True):
            seen = [self._iteration(rt, wl, res).m.value for _ in range(count - traced)]
            if count and wl.is_write and wl.higher_is_better:
                seen = self._until_steady(rt, wl, res, seen)
        res.warmup_values = [round(v, 3) for v in seen]
        if not traced:
            return
        self.trace.launch()
        it = self._iteration(rt, wl, res, traced=True)
        if it.delta.trace is not None:
            it.delta.trace["value"] = it.m.value
            res.trace = it.delta.trace

    def _until_steady(
        self, rt: Mounted, wl: Workload, res: Result, seen: list[float]
    ) -> list[float]:
        """A writing workload's untraced warm-ups go on while each runs faster than the one
        before by more than WARM_AGREE (at most WARM_MAX): its first writes allocate what later
        ones reuse (the file system's blocks, the device's page cache, memory the hypervisor
        has not backed yet). With one warm-up, seed 002's big_writes wrote 348 then 1,178 and
        984 MiB/s (ntfs-3g 233, 295, 303) and the ten-fold gain was "not separated" at
        --repeat 3; in the default comparison every subject's first write ran at 0.1-0.3x its
        second. One-sided: a run slower than the one before is noise, not a first touch."""
        while len(seen) < WARM_MAX and not _steady(seen):
            seen.append(self._iteration(rt, wl, res).m.value)
        return seen

    def iterations(self, rt: Mounted, wl: Workload, res: Result) -> Iterations:
        """A sample is as many prepare+run iterations as it takes to last long enough to
        measure (a 0.1 s read says little); the result records how much work that was.

        When it takes several, the first is discarded (`rewarm`): it runs right after the
        other subjects' turns (a FUSE daemon remounted for a cold read, the page cache full of
        their data), a cost of fsbench's interleaving, not of the driver. Its value stays in
        the sample's extra; a single-iteration sample is long enough for that cost to be
        small, and keeps it. Cold and O_DIRECT samples start every iteration from dropped
        caches, so their first is like the rest and nothing is discarded: it would cost a
        cache drop and a remount each (docs/internals.md#measurements)."""
        got = Iterations([])
        discard = self.rewarm and wl.cache not in ("cold", "direct")
        try:
            while True:
                it = self._iteration(rt, wl, res)
                short = 0 < it.m.seconds < self.min_time(wl)
                if discard and got.rewarm is None and not got.kept and short:
                    got.rewarm = it.m.value
                    continue
                got.kept.append(it)
                spent = sum(r.m.seconds for r in got.kept)
                if spent >= self.min_time(wl) or len(got.kept) >= MAX_ITERATIONS or spent <= 0:
                    return got
        finally:
            self.trace.reap()  # killed after the traced runs; this sample may have failed

    def sample(self, its: Iterations, wl: Workload) -> Sample:
        """The sample of its iterations, its cache state verified."""
        it = merge_iterations(its.kept, wl)
        if its.rewarm is not None:
            it.m.extra["rewarm_value"] = round(its.rewarm, 3)  # the discarded first iteration's
        sample = build_sample(it.m, it.delta, wl, it.cache, it.cache_flags, it.growth)
        sample.flags += short_sample_flags(it.m.seconds, len(its.kept), wl, self.min_sample_s)
        return sample

    def _iteration(self, rt: Mounted, wl: Workload, res: Result, traced: bool = False) -> Iteration:
        """prepare, bring the cache to its state, and run once between two probe snapshots."""
        ph = self.clock.phase
        with ph("mount"):
            target = sized(rt.ensure(), self.space_share(wl))
        if not res.params:
            # Parameters from the live target (read-only volumes name the file read).
            res.params = wl.params(target)
        why = unmet_need(wl, target)  # what it declares it needs, before it sets anything up
        if why:
            raise Unsupported(why)
        with ph("prepare"), watched(rt.health):
            wl.prepare(target)
        key = (target.subject_id, str(wl.id))
        with ph("cache"):
            cache = prepare_cache(rt, wl, self.cold_failed.get(key))
            target = sized(rt.ensure(), self.space_share(wl))  # a FUSE remount: a new daemon
        self._place(wl, target)  # after the remount: its daemon is the one to pin
        spec = ProbeSpec(
            daemon_pid=target.daemon_pid,
            block_device=target.block_device,
            kthread_patterns=kthread_patterns_for(target.block_device, target.fs or None),
        )
        # The traced run's bpftrace attached; a timed run's killed one gone (probes detached).
        (self.trace.attach if traced else self.trace.detach)()
        tracer = self.trace.tracer if traced else None
        direct = cache.asked == "direct"
        with ph("probes"):
            resident0 = device_cache(target) if direct else None
            keys = trace_keys(target, wl) if tracer else None
            before = take_snapshot(self.procfs, spec)
            if tracer:
                tracer.begin()
        with ph("traced run" if traced else "run"), watched(rt.health):
            m = wl.run(target)
        with ph("probes"):
            maps = tracer.end() if tracer else None
            after = take_snapshot(self.procfs, spec)
            self.unplace(m)
            resident1 = device_cache(target) if direct else None
        growth = None if resident0 is None or resident1 is None else resident1 - resident0
        delta = diff(before, after)
        why = eviction_failed(cache, m, delta)
        if why is not None:
            self.cold_failed[key] = why
            if not traced:  # measured again, cold by the full method (a traced run is not)
                return self._iteration(rt, wl, res)
        m.extra.update(cache.record)
        if tracer and keys is not None:
            work = {"bytes": m.bytes, "ops": m.ops, "seconds": m.seconds}
            delta.trace = ktrace.to_trace(maps or {}, keys, tracer.status, work)
        return Iteration(m, delta, growth, cache.asked, cache.flags)

    def _place(self, wl: Workload, target: Target) -> None:
        """Pin the application (this thread) and the daemon for the workload's placement."""
        self.unplace()
        self._pinned = pin(placement_of(wl), target, quiet=not asked(wl))

    def unplace(self, m: Measurement | None = None) -> None:
        """Put every CPU mask back; a measurement gets what was pinned and what was not."""
        pinned, self._pinned = self._pinned, None
        if pinned is None:
            return
        pinned.restore()
        if m is not None:
            m.extra["pinned"] = pinned.record()
            m.flags.extend(f for f in pinned.flags if f not in m.flags)


# A writing workload's warm-up is steady when its last run was not faster than the one before
# by more than this share, and runs at most WARM_MAX untraced iterations to get there.
WARM_AGREE = 0.15
WARM_MAX = 4


def _steady(values: list[float]) -> bool:
    """Values are rates (higher is faster) or, for a lower-is-better workload, the sampler
    never asks: only writing workloads warm up until steady, and their values are rates."""
    if len(values) < 2 or min(values[-2:]) <= 0:
        return False
    return values[-1] <= values[-2] * (1.0 + WARM_AGREE)


def sized(target: Target, share: float) -> Target:
    """The target with its share of the file budget (whole MiB, at least one)."""
    if share >= 1.0:
        return target
    return replace(target, size=max(MiB, int(target.size * share) // MiB * MiB))


def prepare_cache(rt: Mounted, wl: Workload, failed: str | None = None) -> CacheState:
    """Bring the caches into the state the workload asks for; the sample verifies it. A cold
    read is made cold by eviction where the subject can (cheap), unless that failed the check
    before for this subject and workload (`failed`); else by the full method."""
    if wl.cache in ("cold", "direct"):
        # Direct I/O starts cold too, so page-cache growth during it is visible; O_DIRECT's
        # check is of the device's cache growing: it starts from none at all.
        why = (failed or rt.evict()) if wl.cache == "cold" else "O_DIRECT"
        if why is None:
            return CacheState("cold", record={"cold_method": "evict"})
        impossible = rt.make_cold()
        if impossible:
            return CacheState(wl.cache, [f"cannot-drop-caches: {impossible}"])
        if wl.cache != "cold":
            return CacheState(wl.cache)
        return CacheState("cold", record={"cold_method": "full", "cold_method_why": why})
    # Writeback left by the previous workload or subject must not land inside this sample.
    os.sync()
    return CacheState("warm" if wl.cache == "warm" else "n/a")


def eviction_failed(cache: CacheState, m: Measurement, delta: ProbeDelta) -> str | None:
    """Why an evicted cold read was not cold by the device's counter (None: it was, or no
    eviction made it)."""
    if cache.record.get("cold_method") != "evict":
        return None
    state, flags = verify_cache("cold", m, delta, False)
    if state == "cold-verified":
        return None
    return "eviction failed the cold check (" + "; ".join(flags or [state]) + ")"


def trace_keys(target: Target, wl: Workload) -> ktrace.SubjectKeys:
    """The subject's keys in the trace maps, read now (a FUSE remount changes them)."""
    comms = wl.app_comms or (own_comm(),)
    return ktrace.subject_keys(
        target.mountpoint or target.workdir,
        target.block_device,
        target.kind == "fuse",
        comms,
        target.daemon_pid,
    )


NO_WARMUP_TO_TRACE = (
    "not traced: the traced run is the last warm-up run, and this workload had none "
    "(--warmup 0, or a matrix cell)"
)


# Residency is read with mincore, one byte per page: bound the vector for huge real devices.
_MAX_RESIDENCY_DEVICE = 64 * GiB


def device_cache(target: Target) -> int | None:
    """Bytes of the target's block device in the page cache (None: cannot tell)."""
    if not target.block_device:
        return None
    path = f"/dev/{target.block_device}"
    try:
        if ProcFS().block_bytes(target.block_device) > _MAX_RESIDENCY_DEVICE:
            return None
    except (OSError, ValueError):
        return None
    return resident_bytes(path)


def own_comm() -> str:
    """fsbench's own task name, the application of in-process workloads."""
    try:
        return ProcFS().read("proc/self/comm").strip()
    except OSError:
        return "python3"
