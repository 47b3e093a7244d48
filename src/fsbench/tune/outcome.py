"""What the tune's runs measured, as the tune record's gaps and changes.

A gap is the subject's result against the reference's on one workload (the comparison the
explain run's table prints), with the explanation's factors (report.explain). A change is a
candidate's result against the untuned subject's in the same run, decided by the verdict
procedure (stats.verdict) at the tune's one family: every candidate × workload the tune
measures is one comparison of it, so "any change ▲" holds the family's error rate, not each
table's. Its gain is the speed-up whatever the metric's direction; the share of the gap a ▲
closes is the report model's (report/model/tune.py). One centre everywhere: the geometric mean
the verdicts divide (Result.center).
"""

from __future__ import annotations

import platform
import shlex
from collections.abc import Sequence

from fsbench.lab.drivers import DRIVERS
from fsbench.lab.formats import FORMATS
from fsbench.lab.loops import Knob
from fsbench.lab.subject import SubjectSpec
from fsbench.records.schema import Result, Run
from fsbench.records.tunerecord import TuneChange, TuneConfirmation, TuneGap
from fsbench.report.model.answer import answer_factor, answer_text, gap_share
from fsbench.report.model.comparison import Comparison, compare
from fsbench.report.model.explain import Explanation, explain_result, workload_key
from fsbench.report.model.keys import placement_of
from fsbench.report.model.summary import usable
from fsbench.report.model.tune import gap_closed, speed
from fsbench.schedule.dimensions.placement import DEFAULT as COMPARE_PLACEMENT
from fsbench.stats.decide import gmean
from fsbench.stats.verdict import ALPHA, Family, prior_of, verdict
from fsbench.tune.choose import Candidate, Gap
from fsbench.tune.remedies import Remedy, vm_kernel
from fsbench.vm.kernels import KNOWN

# The untuned subject is measured as `compare` measures it, so the two commands agree on one
# machine: compare's default placement (the application and the FUSE daemon pinned to one CPU).
# A placement change is that subject against itself left free, in the same run.
UNTUNED = COMPARE_PLACEMENT


def result_of(run: Run, subject: str, workload: str, placement: str = UNTUNED) -> Result | None:
    for r in run.results:
        if r.subject == subject and workload_key(r) == workload and placement_of(r) == placement:
            return r if usable(r) else None
    return None


def workloads_of(run: Run) -> list[str]:
    return list(dict.fromkeys(workload_key(r) for r in run.results))


def centre(r: Result) -> float | None:
    """The geometric mean of a result's samples: the centre every ratio divides."""
    return r.center if r.center else gmean(r.samples)


def _faster(a: Result, b: Result) -> bool:
    ca, cb = centre(a) or 0.0, centre(b) or 0.0
    return ca > cb if a.higher_is_better else 0 < ca < cb


def gaps(run: Run, subject: str, references: Sequence[str]) -> list[tuple[TuneGap, Gap]]:
    """Per workload: the fastest reference's result (by its centre) against the subject's,
    as the explain run's table compares them, explained."""
    out = []
    for wl in workloads_of(run):
        mine = result_of(run, subject, wl)
        refs = [r for r in (result_of(run, s, wl) for s in references) if r is not None]
        if mine is None or not refs:
            continue
        best = refs[0]
        for r in refs[1:]:
            best = r if _faster(r, best) else best
        e: Explanation = explain_result(mine, best, run)
        v = compare(best, mine)
        first = answer_factor(e)
        factors = [
            {"name": f.name, "brief": f.brief, "accounts": f.accounts, "first": f is first,
             "text": answer_text(e, f) if f is first else f.brief}
            for f in e.factors[:6]
        ]  # fmt: skip
        for d in factors:
            d["line"] = factor_words(d)
        shares = [f.accounts for f in e.factors if f.accounts is not None and f.accounts > 0]
        record = TuneGap(
            workload=wl,
            reference=best.subject,
            subject_center=centre(mine),
            reference_center=centre(best),
            unit=mine.unit,
            higher_is_better=mine.higher_is_better,
            cell=v.cell(),
            outcome=v.outcome,
            slower=speed(1 / v.ratio, mine.higher_is_better) if v.ratio else None,
            factors=factors,
            explained=min(1.0, max(shares)) if shares else None,
        )
        out.append((record, Gap(wl, e.factors)))
    return out


def factor_words(f: dict[str, object]) -> str:
    """A factor of the gap in one line with one share at most, never a negative one."""
    acc = f.get("accounts")
    text = str(f.get("text") or f.get("brief") or "")
    if not isinstance(acc, (int, float)) or "the gap" in text:
        return text
    return f"{text} ({gap_share(float(acc))})"


def family(comparisons: int, looks: int = 1) -> Family:
    """The tune's one family: `comparisons` two-sided comparisons (each candidate against the
    untuned subject on each workload) at `looks` looks, alpha spread over them all."""
    return Family(looks=max(1, looks), comparisons=max(1, comparisons), alpha=ALPHA)


def family_words(what: str, fam: Family) -> str:
    """A family as a line of the legend."""
    return (
        f"{what}: one family of {fam.comparisons} comparison(s), chance of any false ▲/▼ "
        f"among them ≤ {fam.alpha * 100:.0f} %: each interval at {fam.confidence_text()} %"
        + (f" (over {fam.looks} looks)" if fam.looks > 1 else "")
    )


def _looks(*rs: Result) -> int:
    return max(Family.from_record(r.verdict_family).looks for r in rs)


def decide(base: Result, mine: Result, comparisons: int) -> Comparison:
    """`mine` against `base` at the tune's family of `comparisons` (the looks the run took),
    with the variance priors each result recorded."""
    fam = family(comparisons, _looks(base, mine))
    v = verdict(base.samples, mine.samples, fam, prior_of(base), prior_of(mine))
    return Comparison.of(v, mine.higher_is_better)


def change(
    name: str,
    cand_subject: str,
    untuned: str,
    placement: str,
    run: Run,
    wl: str,
    gap: TuneGap | None,
    comparisons: int,
    cand_wl: str | None = None,
    base_place: str = UNTUNED,
) -> TuneChange | None:
    """One candidate's result against the untuned subject in `run` (measured as compare
    measures it, or at `base_place`: a placement change's is the subject left free), at the
    tune's family of `comparisons`; an io-size candidate's on its own workload (`cand_wl`)
    against the untuned one's on `wl`. The gap was measured at UNTUNED: a change against the
    subject placed otherwise closes no share of it."""
    base = result_of(run, untuned, wl, base_place)
    mine = result_of(run, cand_subject, cand_wl or wl, placement)
    if base is None or mine is None:
        return None
    v = decide(base, mine, comparisons)
    hib = mine.higher_is_better
    gain = speed(v.ratio, hib)
    if base_place != UNTUNED:
        gap = None
    return TuneChange(
        name=name,
        subject=cand_subject,
        untuned=untuned,
        workload=wl,
        placement=placement,
        untuned_placement=base_place,
        run_id=run.run_id,
        unit=mine.unit,
        higher_is_better=hib,
        untuned_center=centre(base),
        center=centre(mine),
        confidence=v.confidence,
        ratio=v.ratio,
        interval=list(v.interval) if v.interval is not None else None,
        outcome=v.outcome,
        cell=v.cell(),
        gain=gain,
        gap_closed=gap_closed(gain, gap, v.outcome),
    )


def placed(c: Candidate) -> tuple[str, str]:
    """Where a candidate and the untuned subject it is set against ran: every change as compare
    measures it, against the untuned subject measured so; a placement change is the untuned
    subject placed so against it left free (nothing pinned, as users run it)."""
    if c.remedy.kind == "placement":
        return c.remedy.change, "free"
    return UNTUNED, UNTUNED


def confirmation(c: TuneChange) -> TuneConfirmation:
    """A change measured on fresh samples, as the confirmation the selected change carries."""
    return TuneConfirmation(
        run_id=c.run_id, center=c.center, untuned_center=c.untuned_center, ratio=c.ratio,
        interval=c.interval, outcome=c.outcome, cell=c.cell, gain=c.gain,
        gap_closed=c.gap_closed, confidence=c.confidence,
    )  # fmt: skip


def versus_best(
    combo: TuneChange, singles: Sequence[TuneChange], run: Run, comparisons: int
) -> tuple[str, str]:
    """The combination against the best single change on its workload, both measured in the
    same run (same images, same rounds), at that run's family: ('1.30× 1.10–1.52 ▲ against
    big_writes alone', 'better'); ('', 'none') otherwise."""
    mine = [c for c in singles if c.workload == combo.workload and c.run_id == run.run_id]
    best = max(mine, key=lambda c: c.gain or 0.0, default=None)
    if best is None or (best.subject, best.placement) == (combo.subject, combo.placement):
        return "", "none"
    a = result_of(run, best.subject, combo.workload, best.placement)
    b = result_of(run, combo.subject, combo.workload, combo.placement)
    if a is None or b is None:
        return "", "none"
    v = decide(a, b, comparisons)
    return f"{v.cell()} against {best.name} alone", v.outcome


def describe(
    c: TuneChange, cands: Sequence[Candidate], spec: SubjectSpec, cand: SubjectSpec
) -> TuneChange:
    """The change's remedies' words and the commands to use it (`cand`: the subject measured)."""
    rs = [x.remedy for x in cands if x.remedy.name in c.remedies] or []
    c.kind = "+".join(dict.fromkeys(r.kind for r in rs))
    c.change = ", ".join(r.change for r in rs)
    worst = [r.safety for r in rs if r.safety != "safe"]
    c.safety = worst[0] if worst else "safe"
    c.lab = "; ".join(x.lab for x in cands if x.remedy.name in c.remedies and x.lab)
    c.addresses = [a for x in cands if x.remedy.name in c.remedies for a in x.addresses]
    # Pinning's own lines only for a placement change: every change is measured as compare
    # measures it (pinned), its use is the change itself.
    c.use = use_lines(cand, c.placement if c.placement != c.untuned_placement else "", spec)
    for r in rs:
        if r.kind == "kernel-driver":
            c.use.append(kernel_line(r))
        if r.kind == "io-size":  # the application's change: the mount stays as it is
            new = r.change.partition("=")[2]
            c.use = [f"the application: {new} records instead of {r.replaces} (fio --bs={new}, "
                     f"dd bs={new}, a program's read/write buffer)"]  # fmt: skip
    return c


def use_lines(s: SubjectSpec, placement: str, spec: SubjectSpec) -> list[str]:
    """The commands and fstab line that make the change outside fsbench."""
    d = s.driver
    opts = s.options
    out = []
    if s.mkfs:
        out.append(f"{FORMATS[d.fs].tool} {' '.join(s.mkfs)} DEVICE  (formats it: data is lost)")
    if d.kind == "kernel":
        out.append(shlex.join(d.mount_argv("DEVICE", "MOUNTPOINT", opts)))
        out.append(f"fstab: DEVICE MOUNTPOINT {d.fstype} {opts or 'defaults'} 0 2")
    else:
        argv = d.mount_argv("DEVICE", "MOUNTPOINT", opts, s.transport)
        out.append(shlex.join(argv))
        if d.built is None and d.binary:
            fstype = _fstab_type(d.name)
            out.append(f"fstab: DEVICE MOUNTPOINT {fstype} {opts or 'defaults'} 0 0")
    out += [line for k in s.knobs for line in knob_lines(k)]
    if placement == "same":
        daemon = (d.binary or d.name).split("/")[-1]
        out.append("taskset -c 0 APPLICATION")
        out.append(f"taskset -a -p -c 0 $(pidof {daemon})")
    if spec.driver.name != d.name:
        out.append(f"(another driver: {d.name}, {DRIVERS[d.name].description})")
    return out


def kernel_line(r: Remedy) -> str:
    """What a kernel-driver change needs of the kernel, and where this host stands."""
    d = DRIVERS[r.change]
    need = f"needs a kernel with {d.fstype} (the {d.module} module)"
    if not vm_kernel(r):
        return f"{need}: this kernel ({platform.release()}) has it"
    known = KNOWN.get(r.kernel)
    has = f"{known.description}, fsbench's {r.kernel}" if known else r.kernel
    return f"{need}: this kernel ({platform.release()}) has none; {has} has it"


def knob_lines(k: Knob) -> list[str]:
    """A block-device setting as commands: now, and at every boot (udev) for a device."""
    if k.where == "mount":  # the mount's own bdi: after every mount
        return [
            "after each mount: b=/sys/class/bdi/$(mountpoint -d MOUNTPOINT); "
            f"[ -d $b-fuseblk ] && b=$b-fuseblk; echo {k.value} > $b/{k.name}"
        ]
    out = [f"echo {k.value} > /sys/block/DEVICE/queue/{k.name}"]
    if k.name == "read_ahead_kb":
        out.append(f"blockdev --setra {int(k.value) * 2} /dev/DEVICE  (the same, in sectors)")
    out.append(f'udev: ACTION=="add|change", KERNEL=="DEVICE", ATTR{{queue/{k.name}}}="{k.value}"')
    return out


def _fstab_type(driver: str) -> str:
    """The type fstab names a FUSE driver by (mount.TYPE helpers: ntfs-3g, exfat-fuse)."""
    return {"fuse2fs": "fuse.fuse2fs"}.get(driver, driver)
