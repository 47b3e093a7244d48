"""`fsbench tune`: explain the gap, measure the remedies it points at, then the winners together.

Three steps, each an ordinary lab run through `pipeline.execute` (identical images per run,
interleaved rounds, the run's verdicts), each stored like any `compare`:

1. explain: the subject beside the reference (`--against`, or the fastest of the kernel drivers
   for its format and ext4); the explanation's factors and their shares of the gap per workload.
2. candidates: the remedies those factors point at (tune/choose.py), measured against the
   untuned subject in the same run; a remedy that needs a bigger volume gets a run on images of
   that size (the untuned subject beside it on the same size), a placement candidate puts
   `same` beside `free`, a driver this kernel lacks a VM with a kernel that has it, the
   untuned subject beside it in the same VM (tune/invm.py).
   Every candidate × workload is one comparison of the tune's one family (outcome.family):
   a change wins when it is ▲ on a workload and ▼ on none under it.
3. confirmation: every winner, and the winners together when two or more combine, measured
   again on fresh samples beside the untuned subject (tune/confirm.py): the gain printed and
   recommended on is that run's, the selecting run's beside it.

The last run carries the tune record (tunerecord.py); its results.json and report.html are
written again with it, and a copy goes to the tune's own output directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsbench import pipeline
from fsbench.errors import EXIT_FAILED, EXIT_OK, EnvironmentProblem, UsageError
from fsbench.fuse import transports
from fsbench.lab.drivers import DRIVERS, availability
from fsbench.lab.subject import SubjectSpec, parse_subject
from fsbench.pipeline import write_report_safely, write_results
from fsbench.records.schema import Run
from fsbench.records.store import Store
from fsbench.records.tunerecord import TuneGap, TuneRecord, TuneSkip, attach
from fsbench.schedule.dimensions.placement import PLACEMENTS, allowed_cpus
from fsbench.schedule.plan import Plan, plan_from_options
from fsbench.tune import invm
from fsbench.tune.budget import Costs, Group, costs_of, fit_budget, plan_groups
from fsbench.tune.choose import Candidate, Skipped, choose, lab_change, why_not
from fsbench.tune.confirm import confirm
from fsbench.tune.outcome import (
    UNTUNED,
    change,
    describe,
    family,
    family_words,
    gaps,
    placed,
    result_of,
    workloads_of,
)
from fsbench.tune.remedies import REMEDIES, Remedy, applies_to, resized, vm_kernel
from fsbench.tune.subjects import candidate_spec, merge, one_daemon, transport_driver

# Kept under their former names (tests and callers read them here).
_merge, _one_daemon = merge, one_daemon
__all__ = ["Candidate", "Request", "Tuner", "candidate_spec", "problem", "references"]

GiB = 1024**3


@dataclass
class Request:
    subject: str
    against: str  # a subject, or "fastest"
    options: dict[str, Any]  # compare's options, checked (fsbench.cli.options.parse)
    argv: list[str]
    budget_s: float
    allow_unsafe: bool
    out_dir: Path


@dataclass
class Clock:
    budget_s: float
    began: float = field(default_factory=time.monotonic)

    def used(self) -> float:
        return time.monotonic() - self.began

    def left(self) -> float:
        return max(0.0, self.budget_s - self.used())


def references(spec: SubjectSpec, against: str) -> list[SubjectSpec]:
    """The subject(s) the gap is measured to: the one named, or for `fastest` the available
    kernel drivers of the subject's format and ext4 (the fastest of them per workload)."""
    if against != "fastest":
        ref = parse_subject(against)
        if ref.id == spec.id:
            raise UsageError(f"--against {against}: the subject itself; name another")
        return [ref]
    names = [
        d.name
        for d in DRIVERS.values()
        if d.kind == "kernel"
        and d.in_default
        and d.fs == spec.driver.fs
        and availability(d).available
        and d.name != spec.driver.name
    ]
    # None but the subject itself (ext4: the only kernel driver of its format here): Linux's
    # other usual file system, so the explain run has a reference (it measured ext4 alone).
    if not names:
        names = ["ext4"] if spec.driver.name != "ext4" else ["xfs"]
    return [parse_subject(n) for n in names]


def knob_problem(r: Remedy, sysfs: str = "/sys") -> str | None:
    """A setting this kernel does not offer (a scheduler it lacks)."""
    for k in r.knobs():
        if k.name == "scheduler":
            offered = [p.read_text() for p in Path(sysfs, "block").glob("loop*/queue/scheduler")]
            if offered and k.value not in offered[0].replace("[", " ").replace("]", " ").split():
                return f"this kernel's loop devices offer no {k.value} scheduler"
    return None


def problem(spec: SubjectSpec, backing: str = "ram") -> Callable[[Remedy], str | None]:
    """Why this machine cannot measure a remedy for `spec` (None: it can)."""

    def why(r: Remedy) -> str | None:
        if r.kind in ("mkfs-option", "block-device") and backing == "device":
            return "needs an image of its own: not on --backing device:"
        if r.kind == "block-device":
            return knob_problem(r)
        if r.kind == "placement":
            need = PLACEMENTS[r.change].min_cpus
            return f"needs {need} CPUs" if len(allowed_cpus()) < need else None
        if r.kind == "transport":
            d = DRIVERS[transport_driver(spec, r)]
            av = availability(d)
            if not av.available:
                return f"{d.name} is not available here: {av.reason}"
            return transports.subject_problem(candidate_spec(spec, r)) or None
        if r.kind == "kernel-driver":
            return _driver_problem(r, backing)
        return None

    return why


def _driver_problem(r: Remedy, backing: str) -> str | None:
    """A driver this host's kernel lacks is measured in a VM with a kernel that has it; why
    not here, if it cannot be."""
    if not vm_kernel(r):
        return None  # this kernel has it: measured here, like any other driver
    if not r.kernel:
        return f"this kernel has no {r.change} and the remedy names no kernel that has it"
    return invm.vm_problem(backing)


class Tuner:
    """One `fsbench tune`: its phases, its clock and what they found."""

    def __init__(self, req: Request, on_step: Callable[[str], None]) -> None:
        self.req = req
        self.spec = parse_subject(req.subject)
        self.refs = references(self.spec, req.against)
        self.clock = Clock(req.budget_s)
        self.on_step = on_step
        self.phase = ""
        self.base_size = int(req.options["size"])
        self.record = TuneRecord(
            subject=self.spec.id,
            against=req.against,
            allow_unsafe=req.allow_unsafe,
            budget_s=req.budget_s,
        )
        self.last: Run | None = None
        self.measured: list[tuple[Group, Run]] = []  # each candidates run and its group
        self.costs = Costs(overhead_s=30.0, per_cell_s=30.0)  # until the explain run says
        self.code = EXIT_OK
        self.k = 1  # the comparisons of the tune's one family (candidates × workloads)

    def _backing(self) -> str:
        b = self.req.options.get("backing")
        return str(getattr(b, "kind", "ram"))

    def step(self, msg: str) -> None:
        left = round(self.clock.left())
        self.on_step(f"tune {self.phase} · {msg} · budget {left // 60}:{left % 60:02d} left")

    def plan(self, name: str, specs: list[SubjectSpec], size: int, placements: list[str],
             share: float, workloads: list[str] | None = None,
             vm: dict[str, Any] | None = None) -> Plan:  # fmt: skip
        """One step's plan: compare's checked options with this step's subjects, image size,
        placements, workloads (an io-size run's own), output directory and share of the
        budget left; `vm`: a VM run's plan fields instead of the host's subjects (invm)."""
        from fsbench.schedule.dimensions.placement import parse_placements

        o = dict(self.req.options)
        if workloads:
            o["workloads"], o["suite"] = ",".join(workloads), None
        o["out"] = self.req.out_dir / name
        o["placement"] = parse_placements(",".join(placements))
        o["time_budget"] = max(1.0, self.clock.left() * share)
        fields = vm or {"subjects": specs, "explicit": True}
        return plan_from_options(
            o, self.req.argv, o["time_budget"], backing=o["backing"], size=size,
            tune=not o["no_tune"], integrity=not o["no_integrity"], **fields,
        )  # fmt: skip

    def measure(self, name: str, specs: list[SubjectSpec], size: int, placements: list[str],
                share: float, workloads: list[str] | None = None,
                vm: dict[str, Any] | None = None) -> Run:  # fmt: skip
        """One lab run through the pipeline, with its share of the budget left."""
        self.phase = name
        plan = self.plan(name, specs, size, placements, share, workloads, vm)
        # Through the module: a test that replaces pipeline.execute replaces it here too
        # (an imported name kept the real one, and tune's fuzz cases mounted real labs).
        run, code = pipeline.execute(plan, on_step=self.step)
        self.record.runs[name] = run.run_id
        self.last = run
        if code == 130:
            raise KeyboardInterrupt
        if code != EXIT_OK:
            self.code = EXIT_FAILED
        return run

    def preview(self) -> dict[str, Any]:
        """`--dry-run`: the explain step's plan and every remedy for the driver with what would
        become of it; nothing is created or measured (the candidates depend on what the
        explanation will find)."""
        from fsbench.schedule.dryrun import describe

        plan = self.plan("explain", [self.spec, *self.refs], self.base_size, [UNTUNED], 0.3)
        remedies = []
        for r in REMEDIES.values():
            if not applies_to(r, self.spec.driver.name):
                continue
            why = why_not(r, self.req.allow_unsafe, problem(self.spec, self._backing()))
            size, made = lab_change(r, self.base_size, self.spec.id)
            lab = f"; the lab makes {size / GiB:g} GiB images for it" if size else (
                f"; the lab: {made}" if made else "")  # fmt: skip
            remedies.append({
                "name": r.name, "change": r.change, "kind": r.kind, "safety": r.safety,
                "addresses": list(r.factors),
                "would": f"skipped: {why}" if why else "a candidate when the explanation names "
                f"one of: {', '.join(r.factors)}{lab}",
            })  # fmt: skip
        return {"budget_s": self.req.budget_s, "explain": describe(plan), "remedies": remedies}

    def run(self) -> tuple[Run, TuneRecord, int]:
        av = availability(self.spec.driver)
        if not av.available:
            raise EnvironmentProblem(
                f"driver {self.spec.driver.name} is not available: {av.reason}"
            )
        # As compare measures them (its default placement), so tune's ntfs-3g is compare's.
        self.record.untuned_placement = UNTUNED
        self.record.measured_as = measured_as(self.spec.id, False)
        explain = self.measure("explain", [self.spec, *self.refs], self.base_size, [UNTUNED], 0.3)
        found = gaps(explain, self.spec.id, [r.id for r in self.refs])
        self.record.workloads = workloads_of(explain)
        self.record.gaps = [g for g, _ in found]
        if not found:
            self.record.notes.append("no workload measured both the subject and a reference")
            return self.finish()
        if not any(g.factors for _, g in found):
            self.record.notes.append(
                "the explanation has no factors (tracing unavailable?): every applicable "
                "remedy is a candidate, in the table's order"
            )
        cands, skipped = choose(
            self.spec.driver.name, [g for _, g in found], self.base_size,
            self.req.allow_unsafe, problem(self.spec, self._backing()),
        )  # fmt: skip
        groups, no_room = plan_groups(cands, self.base_size)
        n_wl = max(1, len(self.record.workloads))
        self.costs = costs_of(explain, self.spec.id, self.clock.used(), self.base_size)
        groups, no_time = fit_budget(groups, self.clock.left(), self.costs, n_wl)
        self._skip([*skipped, *no_room, *no_time])
        if any(c.remedy.kind == "placement" for g in groups for c in g.cands):
            self.record.measured_as = measured_as(self.spec.id, True)
        self.k = comparisons(groups, n_wl)
        fam = family(self.k)
        self.record.confidence = fam.confidence
        self.record.families.append(
            family_words(f"selection ({sum(len(g.cands) for g in groups)} changes × "
                         f"{n_wl} workload(s))", fam)
        )  # fmt: skip
        gap_of = {x.workload: x for x, _ in found}
        for i, g in enumerate(groups):
            # The plan was made on estimates: a later group that no longer fits is skipped.
            if (i or g.kernel) and self.costs.run([g], n_wl) > self.clock.left():
                why = f"the budget left ({self.clock.left():.0f} s) no longer covers its run"
                self._skip([Skipped(c.remedy, why + "; raise --time-budget") for c in g.cands])
                continue
            share = 0.5 if i + 1 < len(groups) else 0.7  # the combination keeps the rest
            self._measure_group(f"candidates-{i + 1}", g, gap_of, share)
        try:
            confirm(self, [c for g in groups for c in g.cands], gap_of)
        except UsageError as e:  # what was measured is kept and printed whatever this says
            self.record.notes.append(f"confirmation not measured: {e}")
        return self.finish()

    def _skip(self, items: list[Skipped]) -> None:
        for s in items:
            self.record.skipped.append(TuneSkip(name=s.remedy.name, change=s.remedy.change,
                                                reason=s.reason + self._alone(s)))  # fmt: skip

    def _alone(self, s: Skipped) -> str:
        """What it would take to try a remedy the tune's family left out (a rider past the
        run's 3 candidates, or with no run to join): the command that measures it alone,
        where the change is one a subject can name."""
        if "no measured share of the gap" not in s.reason:
            return ""
        if s.remedy.kind in ("mount-option", "transport"):
            other = candidate_spec(self.spec, s.remedy).id
            return f"; to try it alone: fsbench compare {self.spec.id} {other}"
        return "; to try it alone: set it by hand and compare the subject before and after"

    def _measure_group(self, name: str, g: Group, gap_of: dict[str, TuneGap], share: float) -> None:
        if g.io:
            return self._measure_resized(name, g, gap_of, share)
        if g.kernel:
            return self._measure_in_vm(name, g, gap_of, share)
        specs = [self.spec]
        for c in g.cands:
            s = candidate_spec(self.spec, c.remedy)
            if s.id not in {x.id for x in specs}:
                specs.append(s)
        run = self.measure(name, specs, g.size, g.placements, share)
        self.measured.append((g, run))
        for c in g.cands:
            s = candidate_spec(self.spec, c.remedy)
            place, base = placed(c)
            for wl in workloads_of(run):
                ch = change(c.name, s.id, self.spec.id, place, run, wl, gap_of.get(wl), self.k,
                            base_place=base)  # fmt: skip
                if ch is None:
                    continue
                ch.remedies = [c.name]
                self.record.changes.append(describe(ch, [c], self.spec, s))
                if base != UNTUNED:
                    ch.lab = free_words(self.spec.id, run, wl, ch.lab)

    def _measure_resized(
        self, name: str, g: Group, gap_of: dict[str, TuneGap], share: float
    ) -> None:
        """io-size: the untuned subject alone, each workload beside its larger-record variant
        (same image, interleaved rounds); the change is the variant against the workload."""
        pairs = {(wl, w2): c for c in g.cands for wl in c.covers if (w2 := resized(c.remedy, wl))}
        if not pairs:  # nothing to resize: no run (an empty list of workloads is the default)
            return self._skip([Skipped(c.remedy, "no workload of it to resize") for c in g.cands])
        names = list(dict.fromkeys(w for pair in pairs for w in pair))
        run = self.measure(name, [self.spec], g.size, g.placements, share, names)
        self.measured.append((g, run))
        for (wl, w2), c in pairs.items():
            ch = change(c.name, self.spec.id, self.spec.id, UNTUNED, run, wl, gap_of.get(wl),
                        self.k, w2)  # fmt: skip
            if ch is not None:
                ch.remedies = [c.name]
                self.record.changes.append(describe(ch, [c], self.spec, self.spec))

    def _measure_in_vm(self, name: str, g: Group, gap_of: dict[str, TuneGap], share: float) -> None:
        """The candidates of one VM kernel beside the untuned subject in one VM (their ratio is
        the VM's alone); the kernel fetched first if it is not cached."""
        subjects = [self.spec.id, *(candidate_spec(self.spec, c.remedy).id for c in g.cands)]
        left = self.clock.left() * share
        try:
            vm = invm.plan_fields(g.kernel, subjects, self.record.workloads, g.size, left)
        except (EnvironmentProblem, UsageError) as e:
            self._skip([Skipped(c.remedy, f"needs a VM ({g.kernel}): {e}") for c in g.cands])
            return
        size = invm.guest_size(g.size, invm.virtualization())
        # Not among self.measured: no combination is read from another machine's run.
        run = self.measure(name, [], size, [UNTUNED], share, vm=vm)
        where, emulated, line = invm.measured_in(run, g.kernel, self.spec.id)
        for c in g.cands:
            s = candidate_spec(self.spec, c.remedy)
            for wl in workloads_of(run):
                ch = change(c.name, s.id, self.spec.id, UNTUNED, run, wl, gap_of.get(wl), self.k)
                if ch is None:
                    continue
                ch.remedies = [c.name]
                ch = describe(ch, [c], self.spec, s)
                ch.vm, ch.emulated, ch.lab = where, emulated, line
                if emulated:  # a ratio of emulated work says nothing of the host's gap
                    ch.gap_closed = None
                self.record.changes.append(ch)
        got = {c.name for c in self.record.changes}
        if lost := [c for c in g.cands if c.name not in got]:  # a VM that failed says why
            errors = [v.error for v in run.environment.vms if v.error]
            errors += [x.error for x in run.subjects if x.status == "failed" and x.error]
            why = f"its VM run ({g.kernel}) measured nothing to compare: " + (
                errors[0] if errors else "no result of both subjects"
            )
            self._skip([Skipped(c.remedy, why) for c in lost])

    def finish(self) -> tuple[Run, TuneRecord, int]:
        """The record onto the last run, written again (results.json, report.html, store),
        and copied to the tune's own output directory."""
        assert self.last is not None
        self.record.used_s = round(self.clock.used(), 1)
        run = self.last
        attach(run, self.record)
        for out in (self.req.out_dir / self.phase, self.req.out_dir):
            write_report_safely(run, out)
            write_results(run, out)
        with Store(self.req.options["db"] or None) as store:
            store.finish_run(run)
        return run, self.record, self.code


def measured_as(subject: str, free_too: bool) -> str:
    """The untuned subject's name and how it was measured, as the title's line says it."""
    how = (
        f"untuned: {subject} as `fsbench compare` measures it (placement {UNTUNED}, compare's "
        "default: the application pinned to one CPU, with its FUSE daemon where it has one); "
        "every change is "
        "measured so, against it"
    )
    if free_too:
        how += (
            f"; beside it, {subject} free (nothing pinned, as it runs without taskset): the "
            f"placement change's baseline"
        )
    return how


def free_words(subject: str, run: Run, wl: str, lab: str) -> str:
    """A placement change's lab line: the two placements of the untuned subject, named, with
    their centres."""
    a, b = result_of(run, subject, wl, UNTUNED), result_of(run, subject, wl, "free")
    vals = ""
    if a is not None and b is not None and a.center and b.center:
        vals = f": {b.center:.4g} {b.unit} free, {a.center:.4g} {a.unit} pinned ({UNTUNED})"
    said = (
        f"{subject} pinned ({UNTUNED}, as compare measures it: every other change's baseline) "
        f"against {subject} free (nothing pinned), same run, same images{vals}"
    )
    return f"{lab}; {said}" if lab else said


def comparisons(groups: list[Group], n_workloads: int) -> int:
    """The tune's one family: each candidate against the untuned subject on each workload (an
    io-size candidate on each workload it resizes)."""
    n = 0
    for g in groups:
        for c in g.cands:
            n += sum(1 for wl in c.covers if resized(c.remedy, wl)) if g.io else n_workloads
    return max(1, n)
