"""The schedule: subjects x workloads x repeats, interleaved (A B C, A B C, ...) so drift hits
all alike; the warm-up pass before the first round; adaptive rounds, the time budget and why
each result stopped.

Measurement only: the runner asks fsbench.schedule.sampler for each sample, hands it to the store as
soon as it exists and never formats output; aggregate.py turns the samples into a Result.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

from fsbench.errors import FsbenchError, Unsupported, WorkloadFailed
from fsbench.probes import trace as ktrace
from fsbench.probes.procfs import ProcFS
from fsbench.records.notecodes import words
from fsbench.records.schema import Result, Run, Sample, Schedule, StopReason, Subject
from fsbench.schedule.closing import closing_notes
from fsbench.schedule.dimensions.placement import FREE, default_note, placement_of, split_note
from fsbench.schedule.mounted import Mounted
from fsbench.schedule.phases import PhaseClock
from fsbench.schedule.sampler import Sampler
from fsbench.schedule.stalled import Stalled
from fsbench.stats import decide
from fsbench.stats.aggregate import aggregate
from fsbench.stats.verdict import NO_PRIOR, SETTLE_BAND, Family, Prior, table_family
from fsbench.workloads.base import Workload


class SampleSink(Protocol):
    def save_subject(self, run_id: str, subject: Subject) -> None: ...
    def save_sample(self, run_id: str, result: Result, sample: Sample) -> None: ...
    def save_result(self, run_id: str, result: Result) -> None: ...


T = TypeVar("T")


@dataclass
class Runner:
    run: Run
    targets: Sequence[Mounted]
    workloads: list[Workload]
    repeat: int = 3
    sink: SampleSink | None = None
    on_step: Callable[[str], None] = lambda _msg: None
    on_sample: Callable[[], None] = lambda: None
    procfs: ProcFS = field(default_factory=ProcFS)
    results: dict[tuple[str, str], Result] = field(default_factory=dict)
    # Adaptive: one look after the minimum rounds (_interim, fsbench.stats.decide); a subject
    # in no open comparison (with the baseline, the fastest) stops, the others get what their
    # variances plan, to max_repeat or the budget.
    adaptive: bool = False
    max_repeat: int = 10
    time_budget_s: float | None = None
    # time.monotonic() the budget counts from (the command's start); None: execute's start.
    budget_origin: float | None = None
    # The seed of every round's subject order (None: the order as given, every round).
    order_seed: int | None = None
    # The equivalence band of ≈ (--equivalence).
    band: float = SETTLE_BAND
    # The looks the error rate is spread over: 2 if a round fits after the interim look, else 1.
    looks: int = 1
    # (subject, workload) pairs that get no more samples (filled by _workloads_for_round).
    settled: set[tuple[str, str]] = field(default_factory=set)
    # The variance priors (by driver kind) fitted at the interim look, from the first rounds'
    # equal samples; the final look moderates with these, so a cell stopped there is judged
    # at the end as it was when it stopped (None: not fixed yet, fitted at the end).
    frozen_priors: dict[str, Prior] | None = None
    # (subject, workload) -> the samples its open comparisons plan (decide.planned_n).
    planned: dict[tuple[str, str], int] = field(default_factory=dict)
    _orders: list[list[str]] = field(default_factory=list, init=False, repr=False)
    # Progress: the number of samples still expected (the bar's total grows or shrinks). Both
    # walk every cell at every sample: None (nobody listens, as in the simulations of
    # tests/unit/simulate_verdicts.py) leaves them uncomputed.
    on_remaining: Callable[[int], None] | None = None
    # Progress: seconds of measuring left (None until the first round has costed each sample).
    on_eta: Callable[[float | None], None] | None = None
    # Progress: a sample finished (its result, its sample appended) or failed (status, error).
    on_result: Callable[[Result], None] = lambda _r: None
    # Wall seconds of each (subject, workload)'s last sample with its preparation (not the
    # first sample's warm-up and traced run): what its next one will cost (the budget check
    # and the ETA use it).
    _cost: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)
    _t0: float = field(default=0.0, init=False, repr=False)
    _rep: int = field(default=0, init=False, repr=False)
    # Rounds that sampled every cell still going (not the rounds that measured a stalled
    # round again): what --repeat and --max-repeat count.
    _rounds: int = field(default=0, init=False, repr=False)
    _interim_done: bool = field(default=False, init=False, repr=False)
    _looked: decide.Looked = field(default_factory=dict, init=False, repr=False)  # _interim's
    # Rounds that moved every subject of a table alike, set aside and measured again.
    stalled: Stalled = field(default_factory=Stalled)
    _redo: bool = field(default=False, init=False, repr=False)  # this round re-measures
    setups: Callable[[int, set[str]], dict[str, str]] | None = None  # targets.Rotation, rounds 2..
    # What one sample needs (Sampler, built from these): a sample lasts at least min_sample_s.
    min_sample_s: float = 1.0
    warmup: int = 1  # discarded iterations before each cell's first sample
    rewarm: bool = True  # discard a several-iteration sample's first (Sampler.iterations)
    tracer: ktrace.Tracer | None = None  # the run's kernel trace probes; None: not traced
    # The clock the budget and sample costs are read from (a simulation gives its own).
    now: Callable[[], float] = lambda: time.monotonic()
    # Where the measuring time goes (Schedule.phases).
    clock: PhaseClock = field(default_factory=PhaseClock)
    # The steps before the first round (the images, the noise floor): Schedule.setup.
    setup: PhaseClock = field(default_factory=PhaseClock)
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
        note = default_note(self.workloads)
        if note and self.run.environment is not None:
            self.run.environment.notes.append(note)
        self._t0 = self.now()
        self._warm_up_pass()
        rep = 0
        while True:
            # A cell that can no longer be sampled (its subject failed) owes nothing.
            self.stalled.owed = {k for k in self.stalled.owed if self._samplable(k)}
            self._redo = bool(self.stalled.owed)
            todo = self._workloads_for_round()
            if not todo:
                break
            if self.adaptive and self._rounds >= self.repeat and not self._round_fits(todo):
                self._stop_open("budget")
                break
            self._rep = rep
            self._round(todo, rep)
            self._rounds += not self._redo
            if self._looked:  # every round past the interim look: the plan estimated again
                self._replan()
            tables = self._tables()
            for wl in todo:
                wid = workload_id(wl)
                self.stalled.look(wid, tables.get(wid, {}).values(), partial(self._fits, wid))
            rep += 1
        spent, largest = self.now() - self._t0, self.finish()
        self.run.schedule = Schedule(
            adaptive=self.adaptive,
            repeat=self.repeat,
            max_repeat=self.max_repeat if self.adaptive else None,
            time_budget_s=self.time_budget_s if self.adaptive else None,
            spent_s=round(spent, 1),
            phases=self.clock.report(spent),
            first_sample_s=self.clock.since("run", self.budget_origin),
            setup={k: round(v, 1) for k, v in self.setup.spent.items()},
            data_s=self._data_s(),
            verdict=decide.schedule_record(largest),
            order_seed=self.order_seed,
            orders=self._orders,
        )
        return self.run

    def _data_s(self) -> float:
        """The data time of every kept sample, beside the phases (the time anatomy)."""
        details = (d for r in self.results.values() for d in r.sample_details)
        return round(sum(d.seconds or 0.0 for d in details), 2)

    def family_for(self, subjects: int, columns: int = 1) -> Family:
        """The family of a table of ``subjects`` with ``columns`` marked columns
        (fsbench.stats.verdict.table_family) at this run's looks and band."""
        return table_family(subjects, looks=self.looks, band=self.band, columns=columns)

    def _tables(self) -> dict[str, dict[str, Result]]:
        """Per workload, the results its table compares, by subject in run order."""
        order = {rt.subject.id: i for i, rt in enumerate(self.targets)}
        out = decide.tables(self.results.values())
        return {
            wid: {r.subject: r for r in sorted(rs, key=lambda r: order.get(r.subject, 99))}
            for wid, rs in out.items()
        }

    def _kinds(self) -> dict[str, str]:
        return {rt.subject.id: rt.subject.kind for rt in self.targets}

    def _freeze_priors(self) -> dict[str, Prior]:
        """Each driver kind's variance prior, fitted over the run's cells now (the interim
        look) and kept for the final one (frozen_priors); returned per subject."""
        kind = self._kinds()
        self.frozen_priors = decide.priors_by_kind(
            (kind.get(r.subject, "?"), r.samples) for r in self.results.values() if r.status == "ok"
        )
        return {sid: self.frozen_priors.get(k, NO_PRIOR) for sid, k in kind.items()}

    def _interim(self) -> None:
        """The one look before the end (adaptive, after the minimum rounds). The looks from costs
        and the budget alone: 2 if a further round fits, else 1. Then per table (decide.look) a
        subject in no open comparison stops; the others get what their variances plan."""
        spare = None
        if self.time_budget_s is not None:
            spare = self.time_budget_s - self._elapsed()
        cheapest = min(self._cost.values(), default=0.0)
        room = self.max_repeat > self.repeat and (spare is None or cheapest <= spare)
        self.looks = 2 if room else 1
        priors = self._freeze_priors()
        order = [rt.subject.id for rt in self.targets]
        tables = self._tables()
        for wl in self.workloads:
            wid = workload_id(wl)
            per = tables[wid]
            samples = {sid: r.samples for sid, r in per.items()}
            fam = self.family_for(len(per), decide.columns(list(per.values())))
            tl = decide.look(samples, order, wl.higher_is_better, fam, priors)
            going = tl.open_subjects()
            if len(per) == 1:  # alone: its own interval decides, else all the rounds allowed
                going = {sid for sid in per if not decide.precise(samples[sid], priors[sid])}
                self.planned.update({(sid, wid): self.max_repeat for sid in going})
            for sid, r in per.items():
                if sid not in going:
                    self.settled.add((sid, wid))
                    r.stopped = "settled"
            self._looked[wid] = (tl, fam, priors)
        self._replan()

    def _replan(self) -> None:
        """The plan of every cell the interim look left going, from the variances now."""
        samples = {w: {s: r.samples for s, r in per.items()} for w, per in self._tables().items()}
        self.planned.update(decide.replan(self._looked, samples, self.max_repeat, self.planned))

    def _samplable(self, key: tuple[str, str]) -> bool:
        res, ok = (
            self.results.get(key),
            {t.subject.id for t in self.targets if t.subject.status == "ok"},
        )
        return res is not None and res.status == "ok" and key[0] in ok

    def _fits(self, wid: str, cells: list[Result]) -> bool:
        """A sample more of each of these cells ends within the time budget."""
        if not self.adaptive or self.time_budget_s is None:
            return True
        cost = sum(self._cost.get((r.subject, wid), 0.0) for r in cells)
        return self._elapsed() + cost <= self.time_budget_s

    def _round_fits(self, todo: list[Workload]) -> bool:
        """Another round ends within the time budget at what its samples cost last time (the
        budget bounds the measuring time; it is not a point past which a last round starts)."""
        if self.time_budget_s is None:
            return True
        return self._elapsed() + self._round_cost(todo) <= self.time_budget_s

    def _elapsed(self) -> float:
        """Seconds of the time budget used."""
        origin = self._t0 if self.budget_origin is None else min(self.budget_origin, self._t0)
        return self.now() - origin

    def _round_cost(self, todo: list[Workload]) -> float:
        wids = {workload_id(wl) for wl in todo}
        return sum(
            c for (sid, wid), c in self._cost.items() if wid in wids and self._open(sid, wid)
        )

    def _open(self, sid: str, wid: str) -> bool:
        """Still wants samples: not settled, not failed, and short of its planned n."""
        res = self.results.get((sid, wid))
        if res is not None and res.status != "ok":
            return False
        if (sid, wid) in self.stalled.owed:
            return True
        if (sid, wid) in self.settled:
            return False
        plan = self.planned.get((sid, wid))
        return plan is None or res is None or len(res.samples) < plan

    def _eta_s(self) -> float | None:
        """Seconds of measuring left: the minimum rounds still to do, and for adaptive runs
        the open answers' rounds up to --max-repeat, bounded by the time budget."""
        if self._rep == 0:
            return None  # the first round is where each sample's cost is learnt
        every = sum(self._cost.values())
        open_ = sum(c for (sid, wid), c in self._cost.items() if self._open(sid, wid))
        rep = self._rounds + 1  # rounds begun
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
        done = {k: len(self.results[k].samples) for k in open_ if k in self.results}
        want = {k: self.planned.get(k, self.max_repeat) - done.get(k, 0) for k in open_}
        left = sum(max(0, w) for w in want.values())
        cost = sum(self._cost[k] for k in open_)
        if self.time_budget_s is not None and cost > 0 and open_:
            spare = self.time_budget_s - self._elapsed()
            left = min(left, len(open_) * max(0, int(spare // cost)))
        return left

    def _workloads_for_round(self) -> list[Workload]:
        if self._redo:  # a round set aside (fsbench.schedule.stalled), measured again
            owed = {wid for _, wid in self.stalled.owed}
            return [wl for wl in self.workloads if workload_id(wl) in owed]
        rep = self._rounds
        if rep < self.repeat:
            return self.workloads
        if not self.adaptive:
            self._stop_open("repeat")
            return []
        if not self._interim_done:
            self._interim_done = True
            self._interim()
        todo = [wl for wl in self.workloads if self._open_cells(workload_id(wl))]
        if not todo:
            self._stop_open("planned")
            return []
        if rep >= self.max_repeat:
            self._stop_open("max-repeat")
            return []
        if self.looks == 1:
            self._stop_open("budget")  # the interim look was counted as the last
            return []
        return todo

    def _open_cells(self, wid: str) -> list[str]:
        return [sid for (sid, w) in self.results if w == wid and self._open(sid, wid)]

    def _stop_open(self, reason: StopReason) -> None:
        """Why the results still getting samples got no more: a plan cut at --max-repeat
        stopped there, not where the variance planned."""
        for (sid, wid), res in self.results.items():
            if res.status == "ok" and res.samples and res.stopped is None:
                why = reason
                if (sid, wid) in self.settled:
                    why = "settled"
                elif reason == "planned" and len(res.samples) >= self.max_repeat:
                    why = "max-repeat"
                res.stopped = why

    def _round_order(self, rep: int) -> list[Mounted]:
        """This round's subject order: shuffled with a seeded generator per round (recorded),
        so whatever slows the n-th subject of a round (in an A/A test the last read 20-28 %
        slower cold, and drew false verdicts) hits every subject alike, as noise."""
        targets = list(self.targets)
        if self.order_seed is not None:
            random.Random(f"{self.order_seed}:{rep}").shuffle(targets)
        self._orders.append([rt.subject.id for rt in targets])
        return targets

    def _round(self, workloads: list[Workload], rep: int) -> None:
        if rep and self.setups is not None:
            keys = [(rt.subject.id, workload_id(wl)) for rt in self.targets for wl in workloads]
            going = {k[0] for k in keys if self._wants(k)}
            with self.clock.phase("setup"):
                failed = self.setups(rep, going)
            for rt in self.targets:
                if rt.subject.id in failed and rt.subject.status == "ok":
                    self._fail_subject(rt, failed[rt.subject.id])
        for rt in self._round_order(rep):
            if rt.subject.status != "ok":
                continue
            for wl in workloads:
                if rt.subject.status != "ok":
                    break  # failed during this turn: its first cause stays the reported one
                self._one(rt, wl)
            self._release(rt)

    def _release(self, rt: Mounted) -> None:
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
            close = wl.close
            if callable(close):
                close()

    def space_share(self, wl: Workload) -> float:
        """The part of the file budget this workload may fill: the budget is split between the
        workloads whose files stay on the target (fio jobs of one fileset share theirs)."""
        groups = {w.space_group for w in self.workloads} - {None}
        group = wl.space_group
        return 1.0 if group is None or not groups else 1.0 / len(groups)

    def finish(self) -> Family:
        """Aggregate every result from its samples, each stamped with its table's verdict
        family (also used after an interrupt); returns the largest table's family."""
        self.close_workloads()
        self.stalled.restore(self.results)  # interrupted before a round was measured again
        by_id = {workload_id(w): w for w in self.workloads}
        largest = decide.stamp(
            list(self.results.values()), self._kinds(), self.looks, self.band, self.frozen_priors
        )
        for res in self.results.values():
            wl = by_id.get(res.workload_id or res.workload)
            aggregate(res, bool(wl and wl.is_write), wl.summarize_samples if wl else None)
            if wl is not None and placement_of(wl) == FREE:
                seen = [s.extra.get("pinned") for s in res.sample_details]
                if note := split_note(res.samples, seen, res.unit):
                    res.notes.append(note)
                    res.warnings.append(words(note))
        self.stalled.note(self._tables())
        ran = max(self._elapsed(), self.time_budget_s or 0.0)  # a budget no shorter than this one
        closing_notes(self.results, [t.subject.id for t in self.targets], self._cost, ran)
        if self.sink:
            for res in self.results.values():
                self.sink.save_result(self.run.run_id, res)
        self.run.results = list(self.results.values())
        return largest

    def _result(self, rt: Mounted, wl: Workload) -> Result:
        key = (rt.subject.id, workload_id(wl))
        if key not in self.results:
            self.results[key] = Result(
                subject=rt.subject.id,
                workload=wl.name,
                workload_id=workload_id(wl),
                variant=wl.variant,
                params={},
                metric=wl.metric,
                unit=wl.unit,
                higher_is_better=wl.higher_is_better,
            )
            self._sampler.untraced(self.results[key], wl)
        return self.results[key]

    def _wants(self, key: tuple[str, str]) -> bool:
        """This round samples the cell: never once failed or unsupported (the same error again
        teaches nothing); in a round measured again the cells set aside; then the open ones."""
        known = self.results.get(key)
        if known is not None and known.status != "ok":
            return False
        if self._redo:
            return key in self.stalled.owed
        return self._rounds < self.repeat or self._open(*key)

    def _one(self, rt: Mounted, wl: Workload) -> None:
        key = (rt.subject.id, workload_id(wl))
        if not self._wants(key):
            return
        res = self.results.get(key) or self._result(rt, wl)
        of = "" if self.adaptive else f"/{self.repeat}"
        again = " (again: a round set aside)" if self._redo else ""
        if self.on_eta is not None:
            self.on_eta(self._eta_s())
        self.on_step(f"{key[0]} · {key[1]} · sample {len(res.samples) + 1}{of}{again}")
        began = self.now()
        its = self._guarded(rt, wl, res, lambda: self._sampler.iterations(rt, wl, res))
        if its is None:
            return
        sample = self._sampler.sample(its, wl)
        res.samples.append(sample.value)
        res.sample_details.append(sample)
        if self.sink:
            self.sink.save_sample(self.run.run_id, res, sample)
        self._cost[key] = self.now() - began
        self.stalled.owed.discard(key)
        self.on_sample()
        self.on_result(res)
        if self.on_remaining is not None:
            self.on_remaining(self._samples_left())

    def _guarded(self, rt: Mounted, wl: Workload, res: Result, step: Callable[[], T]) -> T | None:
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
            broken = rt.health()
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
        self.on_result(res)
        return None

    def _fail_subject(self, rt: Mounted, why: str) -> None:
        rt.subject.status, rt.subject.error = "failed", why
        try:
            rt.discard()
        except FsbenchError as e:
            rt.subject.error += f" (teardown: {e})"
        if self.sink:
            self.sink.save_subject(self.run.run_id, rt.subject)


def workload_id(wl: Workload) -> str:
    return str(wl.id)
