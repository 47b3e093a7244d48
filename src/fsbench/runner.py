"""The schedule: subjects x workloads x repeats, interleaved (A B C, A B C, ...) so drift hits
all alike; the warm-up pass before the first round; adaptive rounds, the time budget and why
each result stopped.

Measurement only: the runner asks fsbench.sampler for each sample, hands it to the store as
soon as it exists and never formats output; aggregate.py turns the samples into a Result.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol, TypeVar

from fsbench import stats, verdict
from fsbench.aggregate import aggregate
from fsbench.baseline import baseline_result
from fsbench.errors import FsbenchError
from fsbench.phases import PhaseClock
from fsbench.probes import trace as ktrace
from fsbench.probes.procfs import ProcFS
from fsbench.sampler import RunTarget, Sampler
from fsbench.schema import Result, Run, Sample, Schedule, StopReason, Subject
from fsbench.verdict import Family
from fsbench.workloads.base import Unsupported, Workload, WorkloadFailed, hook


class SampleSink(Protocol):
    def save_subject(self, run_id: str, subject: Subject) -> None: ...
    def save_sample(self, run_id: str, result: Result, sample: Sample) -> None: ...
    def save_result(self, run_id: str, result: Result) -> None: ...


T = TypeVar("T")


@dataclass
class Runner:
    run: Run
    targets: list[RunTarget]
    workloads: list[Workload]
    repeat: int = 3
    sink: SampleSink | None = None
    on_step: Callable[[str], None] = lambda _msg: None
    on_sample: Callable[[], None] = lambda: None
    procfs: ProcFS = field(default_factory=ProcFS)
    results: dict[tuple[str, str], Result] = field(default_factory=dict)
    # Adaptive repeats: after `repeat` rounds, go on while some result's 95 % CI half-width
    # is above the target, up to max_repeat rounds or the time budget.
    adaptive: bool = False
    max_repeat: int = 10
    time_budget_s: float | None = None
    # time.monotonic() the budget counts from (the command's start); None: execute's start.
    budget_origin: float | None = None
    target_rel_halfwidth: float = 0.05
    # With adaptive: a subject stops getting samples once its answer is settled (its ratio to
    # the baseline is significant, or within ±SETTLED_BAND of 1: ratio_settled); the rounds
    # left go to the subjects whose answer is still open. The baseline goes on while any
    # other is open.
    settle: bool = False
    # The seed of every round's subject order (None: the order as given, every round).
    order_seed: int | None = None
    # The looks and comparisons the verdicts' error rate is spread over (fsbench.verdict);
    # set by execute, the looks of an adaptive run fixed after its first round (_fix_looks).
    family: Family = field(default_factory=Family)
    _orders: list[list[str]] = field(default_factory=list, init=False, repr=False)
    _last_look: int | None = field(default=None, init=False, repr=False)
    # (subject, workload) pairs that get no more samples (filled by _workloads_for_round).
    settled: set[tuple[str, str]] = field(default_factory=set)
    # Progress: the number of samples still expected (the bar's total grows or shrinks).
    on_remaining: Callable[[int], None] = lambda _n: None
    # Progress: seconds of measuring left (None until the first round has costed each sample).
    on_eta: Callable[[float | None], None] = lambda _s: None
    # Wall seconds of each (subject, workload)'s last sample with its preparation (not the
    # first sample's warm-up and traced run): what its next one will cost (the budget check
    # and the ETA use it).
    _cost: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)
    _t0: float = field(default=0.0, init=False, repr=False)
    _rep: int = field(default=0, init=False, repr=False)
    # What one sample needs (fsbench.sampler.Sampler, built from these).
    # A sample lasts at least this long (iterations are added until it does).
    min_sample_s: float = 1.0
    # Discarded iterations before the first sample of each subject and workload.
    warmup: int = 1
    # Discard the first iteration of a sample that takes several (Sampler.iterations).
    rewarm: bool = True
    # The run's kernel trace probes (bpftrace for each traced run), None: not traced.
    tracer: ktrace.Tracer | None = None
    # Where the measuring time goes (Schedule.phases).
    clock: PhaseClock = field(default_factory=PhaseClock)
    _sampler: Sampler = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._sampler = Sampler(
            procfs=self.procfs,
            clock=self.clock,
            tracer=self.tracer,
            min_sample_s=self.min_sample_s,
            warmup=self.warmup,
            rewarm=self.rewarm,
            space_share=self.space_share,
        )

    def execute(self) -> Run:
        for rt in self.targets:
            if not any(s.id == rt.subject.id for s in self.run.subjects):
                self.run.subjects.append(rt.subject)
        self._t0 = time.monotonic()
        self.family = Family(looks=1, comparisons=self._comparisons())
        self._warm_up_pass()
        rep = 0
        while True:
            todo = self._workloads_for_round(rep)
            if not todo:
                break
            if self.adaptive and rep >= self.repeat and not self._round_fits(todo):
                self._stop_open("budget")
                break
            self._rep = rep
            self._round(todo, rep)
            if rep == 0 and self.adaptive:
                self._fix_looks()
            rep += 1
        spent = time.monotonic() - self._t0
        self.run.schedule = Schedule(
            adaptive=self.adaptive,
            repeat=self.repeat,
            max_repeat=self.max_repeat if self.adaptive else None,
            time_budget_s=self.time_budget_s if self.adaptive else None,
            spent_s=round(spent, 1),
            phases=self.clock.report(spent),
            verdict={
                "method": "welch-log",
                "looks": self.family.looks,
                "comparisons": self.family.comparisons,
                "alpha": self.family.alpha,
                "confidence": self.family.confidence,
            },
            order_seed=self.order_seed,
            orders=self._orders,
        )
        self.finish()
        return self.run

    def _comparisons(self) -> int:
        """The family the verdicts' error rate is spread over: every pair of subjects per
        workload, not only each against the baseline, since the answer line compares each
        subject with the fastest, a subject the data picks (at least 1, so a lone subject has
        a valid family)."""
        subjects = sum(1 for rt in self.targets if rt.subject.status == "ok")
        return max(1, subjects * (subjects - 1) // 2 * len(self.workloads))

    def _fix_looks(self) -> None:
        """Fix the number of looks after the first round, from what its samples cost and the
        time budget (never from what they measured): each round from the minimum to
        --max-repeat is a look at which a verdict may be drawn, and a round costs at least one
        comparison's pair of samples (a subject and its baseline), so no more rounds than
        that bound can fit. Fewer looks, narrower intervals; the runner never looks more
        often than it counted (_looks_left)."""
        rounds = self.max_repeat
        base = next((rt.subject.id for rt in self.targets if rt.subject.status == "ok"), None)
        pairs = [
            c + self._cost.get((base, wid), 0.0)
            for (sid, wid), c in self._cost.items()
            if sid != base
        ] or list(self._cost.values())
        cheapest = min(pairs, default=0.0)
        if self.time_budget_s is not None and cheapest > 0:
            spare = max(0.0, self.time_budget_s - self._elapsed())
            rounds = min(rounds, 1 + int(spare // cheapest))
        self._last_look = max(rounds, self.repeat)
        self.family = replace(self.family, looks=self._last_look - self.repeat + 1)

    def _round_fits(self, todo: list[Workload]) -> bool:
        """Another round ends within the time budget, judged by what its samples cost last
        time (so the budget is a bound on the measuring time, not a point past which the
        last round started)."""
        if self.time_budget_s is None:
            return True
        return self._elapsed() + self._round_cost(todo) <= self.time_budget_s

    def _elapsed(self) -> float:
        """Seconds of the time budget used."""
        origin = self._t0 if self.budget_origin is None else min(self.budget_origin, self._t0)
        return time.monotonic() - origin

    def _round_cost(self, todo: list[Workload]) -> float:
        wids = {workload_id(wl) for wl in todo}
        return sum(
            c for (sid, wid), c in self._cost.items() if wid in wids and self._open(sid, wid)
        )

    def _open(self, sid: str, wid: str) -> bool:
        res = self.results.get((sid, wid))
        return (sid, wid) not in self.settled and (res is None or res.status == "ok")

    def _eta_s(self) -> float | None:
        """Seconds of measuring left: the minimum rounds still to do, and for adaptive runs
        the open answers' rounds up to --max-repeat, bounded by the time budget."""
        if self._rep == 0:
            return None  # the first round is where each sample's cost is learnt
        every = sum(self._cost.values())
        open_ = sum(c for (sid, wid), c in self._cost.items() if self._open(sid, wid))
        rep = self._rep + 1  # rounds begun
        left = every * max(0, self.repeat - rep)
        if self.adaptive:
            left += open_ * max(0, self.max_repeat - max(rep, self.repeat))
            if self.time_budget_s is not None:
                left = min(left, max(0.0, self.time_budget_s - self._elapsed()))
        return left

    def _samples_left(self) -> int:
        """Samples still expected, for the progress bar: the minimum rounds for every pair,
        then the open pairs' rounds that fit the budget (at their last cost)."""
        pairs = len(self.targets) * len(self.workloads)
        done_min = sum(min(len(r.samples), self.repeat) for r in self.results.values())
        done_min += sum(1 for r in self.results.values() if r.status != "ok") * self.repeat
        left = max(0, pairs * self.repeat - done_min)
        if not self.adaptive or left:
            return left
        open_ = [k for k in self._cost if self._open(*k)]
        rounds = max(0, self.max_repeat - self._rep - 1)
        cost = sum(self._cost[k] for k in open_)
        if self.time_budget_s is not None and cost > 0:
            spare = self.time_budget_s - self._elapsed()
            rounds = min(rounds, max(0, int(spare // cost)))
        return len(open_) * rounds

    def _workloads_for_round(self, rep: int) -> list[Workload]:
        if rep < self.repeat:
            return self.workloads
        if not self.adaptive:
            self._stop_open("repeat")
            return []
        # Settle what the rounds so far decided first, so a stop for another reason does not
        # hide that an answer was reached.
        todo = self._open_workloads() if self.settle else self._wide_workloads()
        if not todo:
            self._stop_open("settled")
            return []
        if rep >= self.max_repeat:
            self._stop_open("max-repeat")
            return []
        if self._last_look is not None and rep >= self._last_look:
            self._stop_open("budget")  # the looks counted from the budget are spent
            return []
        return todo

    def _wide_workloads(self) -> list[Workload]:
        """Without settling: a workload gets another round, for every subject (keeping the
        interleaving), while any subject's interval is wider than the target."""
        todo = []
        for wl in self.workloads:
            wid = workload_id(wl)
            mine = [r for (_, w), r in self.results.items() if w == wid]
            if any(self._unsettled(r) for r in mine):
                todo.append(wl)
            else:
                self.settled.update((r.subject, wid) for r in mine)
        return todo

    def _open_workloads(self) -> list[Workload]:
        """Workloads with a subject whose answer is still open; settled pairs go to
        self.settled, so _one skips them."""
        order = [rt.subject.id for rt in self.targets]
        todo = []
        for wl in self.workloads:
            wid = workload_id(wl)
            mine = [
                self.results[(rt.subject.id, wid)]
                for rt in self.targets
                if rt.subject.status == "ok" and (rt.subject.id, wid) in self.results
            ]
            mine = [r for r in mine if r.status == "ok" and r.samples]
            base = baseline_result(mine, order)  # the renderers' rule: compared with it
            if base is None:
                continue
            others = [r for r in mine if r is not base]
            open_ = [r for r in others if not ratio_settled(base, r, self.family)]
            if not others and self._unsettled(base):
                open_ = [base]  # alone: its own interval decides
            for r in others:
                if r not in open_:
                    self.settled.add((r.subject, wid))
                    r.stopped = "settled"
            if open_:
                todo.append(wl)
            else:
                self.settled.add((base.subject, wid))
                base.stopped = "settled"
        return todo

    def _stop_open(self, reason: StopReason) -> None:
        """Why the results still getting samples got no more."""
        for (sid, wid), res in self.results.items():
            if res.status == "ok" and res.samples and res.stopped is None:
                res.stopped = "settled" if (sid, wid) in self.settled else reason

    def _unsettled(self, res: Result) -> bool:
        if res.status != "ok" or not res.samples:
            return False
        return stats.needs_more_samples(
            stats.summarize(res.samples), self.target_rel_halfwidth, self.repeat
        )

    def _round_order(self, rep: int) -> list[RunTarget]:
        """This round's subject order: shuffled with a seeded generator per round (recorded),
        so whatever slows the n-th subject of a round (in an A/A test the last read 20-28 %
        slower cold, and drew false verdicts) hits every subject alike, as noise."""
        targets = list(self.targets)
        if self.order_seed is not None:
            random.Random(f"{self.order_seed}:{rep}").shuffle(targets)
        self._orders.append([rt.subject.id for rt in targets])
        return targets

    def _round(self, workloads: list[Workload], rep: int) -> None:
        for rt in self._round_order(rep):
            if rt.subject.status != "ok":
                continue
            for wl in workloads:
                if rt.subject.status != "ok":
                    break  # failed during this turn: its first cause stays the reported one
                self._one(rt, wl, rep)
            self._release(rt)

    def _release(self, rt: RunTarget) -> None:
        if rt.release is not None:
            # One device shared by subjects: give it back between turns, failed or not.
            try:
                rt.release()
            except FsbenchError as e:
                if rt.subject.status == "ok":
                    self._fail_subject(rt, f"releasing the device: {e}")

    def _warm_up_pass(self) -> None:
        """Every subject's warm-ups in turn (Sampler.warm_up), before the first round; the
        last of each is the traced run, under the one bpftrace of the pass (TraceSession). A
        round interleaves the subjects anyway, so a sample never follows its own warm-up
        directly; the warm-up is for first touches (page cache, daemon heaps, the image's
        memory), which stay."""
        if not any(self._sampler.warmups(wl) > 0 for wl in self.workloads):
            return  # no warm-up, no traced run: each result says why (_result)
        with self._sampler.trace.warm_up_pass():
            for rt in self.targets:
                if rt.subject.status != "ok":
                    continue
                for wl in self.workloads:
                    if rt.subject.status != "ok":
                        break
                    res = self._result(rt, wl)
                    self.on_step(f"{rt.subject.id} · {workload_id(wl)} · warm-up")
                    self._guarded(rt, wl, res, partial(self._sampler.warm_up, rt, wl, res))
                self._release(rt)

    def close_workloads(self) -> None:
        """Give workloads their clean-up (scratch areas outside the target), once."""
        for wl in self.workloads:
            close = hook(wl, "close")
            if callable(close):
                close()

    def space_share(self, wl: Workload) -> float:
        """The part of the file budget this workload may fill: the budget is split between the
        workloads whose files stay on the target (fio jobs of one fileset share theirs)."""
        groups = {space_group(w) for w in self.workloads} - {None}
        group = space_group(wl)
        return 1.0 if group is None or not groups else 1.0 / len(groups)

    def finish(self) -> None:
        """Aggregate every result from its samples (also used after an interrupt)."""
        self.close_workloads()
        by_id = {workload_id(w): w for w in self.workloads}
        fam = {"looks": self.family.looks, "comparisons": self.family.comparisons}
        fam["alpha"] = self.family.alpha
        for res in self.results.values():
            res.verdict_family = dict(fam)
            wl = by_id.get(res.workload_id or res.workload)
            aggregate(
                res, bool(hook(wl, "is_write")), hook(wl, "summarize_samples") if wl else None
            )
            if self.sink:
                self.sink.save_result(self.run.run_id, res)
        self.run.results = list(self.results.values())

    def _result(self, rt: RunTarget, wl: Workload) -> Result:
        key = (rt.subject.id, workload_id(wl))
        if key not in self.results:
            self.results[key] = Result(
                subject=rt.subject.id,
                workload=wl.name,
                workload_id=workload_id(wl),
                variant=hook(wl, "variant"),
                params={},
                metric=wl.metric,
                unit=wl.unit,
                higher_is_better=wl.higher_is_better,
            )
            self._sampler.untraced(self.results[key], wl)
        return self.results[key]

    def _one(self, rt: RunTarget, wl: Workload, rep: int) -> None:
        known = self.results.get((rt.subject.id, workload_id(wl)))
        if known is not None and known.status != "ok":
            return  # failed or unsupported once: the same error again teaches nothing
        if (rt.subject.id, workload_id(wl)) in self.settled:
            return  # its answer is settled: the time goes to the open ones
        of = "" if self.adaptive else f"/{self.repeat}"
        self.on_eta(self._eta_s())
        self.on_step(f"{rt.subject.id} · {workload_id(wl)} · sample {rep + 1}{of}")
        res = known or self._result(rt, wl)
        began = time.monotonic()
        its = self._guarded(rt, wl, res, lambda: self._sampler.iterations(rt, wl, res))
        if its is None:
            return
        sample = self._sampler.sample(its, wl)
        res.samples.append(sample.value)
        res.sample_details.append(sample)
        if self.sink:
            self.sink.save_sample(self.run.run_id, res, sample)
        self._cost[(rt.subject.id, workload_id(wl))] = time.monotonic() - began
        self.on_sample()
        self.on_remaining(self._samples_left())

    def _guarded(self, rt: RunTarget, wl: Workload, res: Result, step: Callable[[], T]) -> T | None:
        """Run a step of this subject and workload; what it cannot do is recorded on the
        result (unsupported, failed), and a lab failure fails the subject alone. None: it did
        not complete."""
        try:
            return step()
        except Unsupported as e:
            res.status, res.error = "unsupported", str(e)
        except (WorkloadFailed, OSError) as e:
            # OSError: the file system refused (ENOSPC, EIO, EROFS) outside fio's own reporting.
            msg = str(e) if isinstance(e, WorkloadFailed) else f"{e.strerror or e}"
            res.status, res.error = "failed", msg
            broken = rt.health() if rt.health else None
            if broken:
                # Not the workload's fault: the driver died under it. The subject fails alone.
                self._fail_subject(rt, f"{broken} during {workload_id(wl)}: {e}")
        except FsbenchError as e:
            # The lab failed under this subject (remount, daemon gone): it fails alone.
            res.status, res.error = "failed", str(e)
            self._fail_subject(rt, f"during {workload_id(wl)}: {e}")
        finally:
            self._sampler.unplace()  # also when the run failed: no pin outlives it
        self.on_sample()
        return None

    def _fail_subject(self, rt: RunTarget, why: str) -> None:
        rt.subject.status, rt.subject.error = "failed", why
        if rt.discard is not None:
            try:
                rt.discard()
            except FsbenchError as e:
                rt.subject.error += f" (teardown: {e})"
        if self.sink:
            self.sink.save_subject(self.run.run_id, rt.subject)


def ratio_settled(base: Result, res: Result, family: Family | None = None) -> bool:
    """The comparison's verdict is decided (▲, ▼ or ≈): the one procedure of fsbench.verdict,
    whose interval the table prints, at the run's family of looks and comparisons."""
    return verdict.verdict(base.samples, res.samples, family).decided


def workload_id(wl: Workload) -> str:
    return str(hook(wl, "id"))


def space_group(wl: Workload) -> str | None:
    """Which files a workload keeps on the target (None: too few to count)."""
    group = hook(wl, "space_group")
    return None if group is None else str(group)
