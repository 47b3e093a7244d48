"""Gains confirmed where they were not chosen: the changes that won, and the winners together,
measured again on fresh samples.

The largest of several noisy gains is biased upward (the winner's curse): a change is chosen by
the candidates runs (▲ on a workload and ▼ on none, at the tune's one family), and its gain
read from the run that chose it is the largest of the noisy gains, not an estimate of it. So
every change that won, and the winners together when two or more can be combined, is measured
once more in a run of its own (`confirm`; an io-size change in `confirm-io`: the untuned
subject on its workload beside the larger-record variant), beside the untuned subject, on fresh
images and in fresh rounds. The gain printed and recommended on is that run's; the selecting
run's stays beside it (`TuneChange.cell`) and the fresh one is the change's `confirmation`.
The confirmation's comparisons are one family of their own (each winner and the combination ×
workload, and the combination against the best change alone). A placement that won is
confirmed on the tune's own image size, in a run of its own when the other winners need a
larger one (its free baseline is the slow cell: see tune/budget.py); each run is started only
when what the selecting runs took for the same cells says it fits the budget left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fsbench.records.tunerecord import TuneChange
from fsbench.tune.budget import GiB, Group, fits_memory
from fsbench.tune.choose import Candidate
from fsbench.tune.outcome import (
    UNTUNED,
    change,
    confirmation,
    describe,
    family,
    family_words,
    placed,
    result_of,
    versus_best,
    workloads_of,
)
from fsbench.tune.remedies import resized
from fsbench.tune.subjects import candidate_spec, merge, one_daemon

if TYPE_CHECKING:
    from fsbench.lab.subject import SubjectSpec
    from fsbench.records.schema import Run
    from fsbench.records.tunerecord import TuneGap, TuneRecord
    from fsbench.tune.budget import Costs


class Clock(Protocol):
    def left(self) -> float: ...


class Tuner(Protocol):
    """What confirming needs of the tune (session.Tuner): its subject, record, costs, clock
    and a way to measure one more run."""

    spec: SubjectSpec
    base_size: int
    record: TuneRecord
    costs: Costs
    clock: Clock
    measured: list[tuple[Group, Run]]

    def measure(self, name: str, specs: list[SubjectSpec], size: int, placements: list[str],
                share: float, workloads: list[str] | None = None) -> Run: ...  # fmt: skip


def won(name: str, changes: list[TuneChange]) -> bool:
    """Chosen by the selection: ▲ on a workload and ▼ on none, at the tune's family."""
    mine = [c for c in changes if c.name == name and not c.vm]
    return any(c.outcome == "better" for c in mine) and not any(c.outcome == "worse" for c in mine)


def confirm(t: Tuner, cands: list[Candidate], gap_of: dict[str, TuneGap]) -> None:
    """Measure every winner, and the winners together, again on fresh samples."""
    notes = t.record.notes
    if any(c.kernel and won(c.name, t.record.changes) for c in cands):
        notes.append("a change measured in a VM is not confirmed on this host (nor recommended): "
                     "measure it on a kernel that has its driver")  # fmt: skip
    winners = [c for c in cands if not c.kernel and won(c.name, t.record.changes)]
    if not winners:
        notes.append("nothing to confirm: no change was decidedly faster (▲) in the selection")
        return
    host = [c for c in winners if c.remedy.kind != "io-size"]
    io = [c for c in winners if c.remedy.kind == "io-size"]
    # Not a placement: every change is measured pinned as compare measures it already, so
    # pinning adds nothing to a combination (its own row is the subject against itself free).
    combinable = one_daemon(
        [c for c in host if c.remedy.kind not in ("kernel-driver", "placement")], notes
    )
    combo = combinable if len(combinable) >= 2 else []
    n_wl = max(1, len(t.record.workloads))
    pairs = [(wl, w2, c) for c in io for wl in c.covers if (w2 := resized(c.remedy, wl))]
    k = (len(host) + 2 * bool(combo)) * n_wl + len(pairs)
    fam = family(k)
    t.record.families.append(family_words("confirmation (fresh samples)", fam))
    pins = [c for c in host if c.remedy.kind == "placement"]
    opts = [c for c in host if c.remedy.kind != "placement"]
    runs = [("confirm", host, combo)]
    if pins and opts and max(c.size or t.base_size for c in opts) > t.base_size:
        runs = [("confirm", opts, combo), ("confirm-placement", pins, [])]
    for i, (name, cands_, together) in enumerate(runs):
        more = i + 1 < len(runs) or bool(pairs)
        _confirm_host(t, name, cands_, together, gap_of, k, 0.5 if more else 0.95)
    if pairs:
        _confirm_io(t, pairs, gap_of, k)


def _combined(t: Tuner, combo: list[Candidate]) -> tuple[SubjectSpec, str]:
    spec = t.spec
    for c in combo:
        spec = merge(spec, candidate_spec(t.spec, c.remedy))
    return spec, UNTUNED


def _plan(t: Tuner, host: list[Candidate], combo: list[Candidate]) -> tuple[int, list[SubjectSpec]]:
    """The confirmation run's image size and subjects (the untuned subject first), the
    combination's last; what memory leaves out, said."""
    size = max([t.base_size, *(c.size or t.base_size for c in host)])
    specs: list[SubjectSpec] = [t.spec]
    for c in host:
        s = candidate_spec(t.spec, c.remedy)
        if s.id not in {x.id for x in specs}:
            specs.append(s)
    if combo:
        s, _ = _combined(t, combo)
        if s.id not in {x.id for x in specs}:
            specs.append(s)
    while len(specs) > 2 and not fits_memory(size, len(specs)):
        dropped = specs.pop()
        t.record.notes.append(f"{dropped.id} not confirmed: no memory for its {size / GiB:g} "
                              "GiB image beside the others")  # fmt: skip
    return size, specs


def _cell_s(t: Tuner, subject: str, place: str, workload: str, size: int) -> float:
    """What one cell of a confirmation costs at its fewest samples (a warm-up and three): as
    the selecting run measured the same subject, placement and workload on the same image
    size; the explain run's estimate where none did (the combination)."""
    for g, run in t.measured:
        r = result_of(run, subject, workload, place) if g.size == size else None
        if r is not None and r.sample_details:
            return 4 * sum(d.seconds for d in r.sample_details) / len(r.sample_details)
    return t.costs.cell_s(size)


def _confirm_host(t: Tuner, name: str, host: list[Candidate], combo: list[Candidate],
                  gap_of: dict[str, TuneGap], k: int, share: float) -> None:  # fmt: skip
    size, specs = _plan(t, host, combo)
    pinning = any(c.remedy.kind == "placement" for c in host)
    places = [UNTUNED, "free"] if pinning else [UNTUNED]  # free: the placement's baseline
    wls = t.record.workloads or [""]
    need = t.costs.run([Group(size, [])], 0) + t.costs.image_s_per_gib * size / GiB * (
        len(specs) - 1
    )
    need += sum(_cell_s(t, s.id, p, wl, size) for s in specs for p in places for wl in wls)
    if need > t.clock.left():
        what = ", ".join(c.name for c in host)
        t.record.notes.append(
            f"{what} not confirmed: its confirmation run (~{need:.0f} s, as the selecting run "
            f"took for the same cells) does not fit the {t.clock.left():.0f} s left; the gain "
            "printed is the selecting run's (biased upward: the largest of several noisy "
            "gains); raise --time-budget"
        )
        return
    run = t.measure(name, specs, size, places, share)
    ids = {s.id for s in specs}
    fresh: list[TuneChange] = []
    for c in host:
        s = candidate_spec(t.spec, c.remedy)
        place, base = placed(c)
        if s.id in ids:
            fresh += _attach(t, run, c.name, s.id, place, gap_of, k, base_place=base)
    if combo:
        spec, place = _combined(t, combo)
        if spec.id in ids:
            _together(t, run, combo, spec, place, fresh, gap_of, k)


def _attach(t: Tuner, run: Run, name: str, subject: str, place: str,
            gap_of: dict[str, TuneGap], k: int, w2: str | None = None,
            only: str | None = None, base_place: str = UNTUNED) -> list[TuneChange]:  # fmt: skip
    """The fresh comparison of a change on each workload, as its record's confirmation."""
    out = []
    for wl in [only] if only else workloads_of(run):
        ch = change(name, subject, t.spec.id, place, run, wl, gap_of.get(wl), k, w2, base_place)
        if ch is None:
            continue
        out.append(ch)
        for rc in t.record.changes:
            if rc.name == name and rc.workload == wl:
                rc.confirmation = confirmation(ch)
    return out


def _together(t: Tuner, run: Run, combo: list[Candidate], spec: SubjectSpec, place: str,
              fresh: list[TuneChange], gap_of: dict[str, TuneGap], k: int) -> None:  # fmt: skip
    names = [c.name for c in combo]
    for wl in workloads_of(run):
        ch = change("combination", spec.id, t.spec.id, place, run, wl, gap_of.get(wl), k)
        if ch is None:
            continue
        ch.remedies = names
        ch.versus, ch.versus_outcome = versus_best(ch, fresh, run, k)
        ch.confirmation = confirmation(ch)
        t.record.combination.append(describe(ch, combo, t.spec, spec))


def _confirm_io(t: Tuner, pairs: list[tuple[str, str, Candidate]],
                gap_of: dict[str, TuneGap], k: int) -> None:  # fmt: skip
    names = list(dict.fromkeys(w for wl, w2, _ in pairs for w in (wl, w2)))
    need = t.costs.run([Group(t.base_size, [], io=True)], len(names))
    if need > t.clock.left():
        t.record.notes.append(f"{', '.join(dict.fromkeys(c.name for *_, c in pairs))} not "
                              f"confirmed: its run (~{need:.0f} s) does not fit the "
                              f"{t.clock.left():.0f} s left; raise --time-budget")  # fmt: skip
        return
    run = t.measure("confirm-io", [t.spec], t.base_size, [UNTUNED], 0.95, names)
    for wl, w2, c in pairs:
        _attach(t, run, c.name, t.spec.id, UNTUNED, gap_of, k, w2, only=wl)
