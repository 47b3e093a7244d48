"""The answer first, as every output leads with it: per workload the fastest subject and the
ranking of the others (report/model/ adds each one's comparison to the fastest, so the marks
are the tables' marks), per subject the first-ranked reason it differs (explain.py's first
factor) in the words and line widths the outputs print, and the drivers this machine lacks
with the command that measures them in a VM. Free of rich: the model reads it."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace

from fsbench.records.probes.numbers import fmt_pct, fmt_time
from fsbench.records.schema import Result, Run, Subject
from fsbench.report.model.comparison import Comparison
from fsbench.report.model.decided import leaders
from fsbench.report.model.explain import Explanation, Factor, brief_lines
from fsbench.report.model.grouping import groups, measured_subjects, usable
from fsbench.report.model.naming import baseline_result, ranked
from fsbench.report.model.vm_notes import SMALL_FLAGS, caveat_pieces
from fsbench.stats.decide import gmean


@dataclass
class WorkloadAnswer:
    """One workload: who is fastest, the others best first, and each one's first reason."""

    title: str
    unit: str
    higher_is_better: bool
    winner: Result | None
    others: list[Result]  # ranked and usable, best first, the winner left out
    unranked: list[Result]  # failed, without samples, or integrity failed
    baseline: Result | None  # the tables' baseline (the first subject that finished)
    # The winner and every other the data cannot tell from it (leaders()): one alone is the
    # fastest; several are not separated, and no output crowns any of them.
    leaders: list[Result] = field(default_factory=list)

    @property
    def ranking(self) -> list[Result]:
        return ([self.winner] if self.winner else []) + self.others

    @property
    def separated(self) -> bool:
        """A fastest can be named: no other subject is within reach of the winner."""
        return self.winner is not None and len(self.leaders) <= 1


def rank(results: list[Result]) -> list[Result]:
    """The usable, ranked results best first (by the samples' geometric mean, as the verdict's
    ratio is taken)."""
    good = [r for r in results if usable(r) and ranked(r)]
    hib = good[0].higher_is_better if good else True
    return sorted(good, key=_key, reverse=hib)


def first_factor(e: Explanation) -> Factor | None:
    """The first-ranked measured reason (a placement remark is not a reason against the
    baseline: it compares the subject with itself)."""
    return next((f for f in e.factors if not f.name.startswith("placement")), None)


def answer_factor(e: Explanation) -> Factor | None:
    """The reason the answer gives: the first-ranked one that stands for time (a count alone,
    '28 dev reads/GiB', says nothing about the gap), so its first figure is a time."""
    return next(
        (
            f
            for f in e.factors
            if not f.name.startswith("placement")
            and (f.seconds is not None or f.accounts is not None or f.unit.startswith("s/"))
        ),
        None,
    )


def gap_share(accounts: float) -> str:
    """A factor's share of the gap, bounded: factors overlap (a wake-up is also CPU time), so
    one can stand for more than the whole gap, or run against it."""
    if accounts > 1:
        return "more than the gap: factors overlap"
    if accounts < 0:
        return "against the gap"
    return f"{fmt_pct(accounts)} of the gap"


def answer_text(e: Explanation, f: Factor) -> str:
    """The reason with its time first: '13 s/GiB (59 % of its time): 262,144 FUSE WRITE/GiB
    × 4 KiB (< 4 GiB: no big_writes), 51 µs' (the brief's own '= 13 s/GiB (59 %)' dropped);
    a brief that already leads with its time ('CPU 2.1 s/GiB (ext4 672 ms)') as it is."""
    if f.seconds is None:
        return f.brief
    t = f"{fmt_time(f.seconds)}/{e.per}"
    if t in f.brief[:24]:
        return f.brief
    if f.accounts is not None:
        share = gap_share(f.accounts)
    elif f.share is not None:
        share = f"{fmt_pct(min(f.share, 1.0))} of its time"
    else:
        share = ""
    brief = re.sub(rf"\s*[=≈] {re.escape(t)}(\s*\([^)]*%\))?", "", f.brief).rstrip(" ,;")
    return f"{t}" + (f" ({share})" if share else "") + f": {brief}"


def _key(res: Result) -> float:
    """Rank by the samples' geometric mean: the verdict's ratio is the ratio of geometric means
    (fsbench.verdict), so the ranking never contradicts the ratios printed beside it."""
    return gmean(res.samples) or 0.0


def answers(run: Run) -> list[WorkloadAnswer]:
    """Per workload (run order; the Iozone matrix has its own summary): the ranking and the
    leaders (report/model/ adds the comparisons and the reasons)."""
    order = measured_subjects(run)
    out = []
    for g in groups(run):
        if g.matrix:
            continue
        results = sorted(
            g.results(), key=lambda r: order.index(r.subject) if r.subject in order else 99
        )
        good = rank(results)
        base = baseline_result(results, order)
        out.append(
            WorkloadAnswer(
                title=g.title,
                unit=g.unit,
                higher_is_better=g.higher_is_better,
                winner=good[0] if good else None,
                others=good[1:],
                unranked=[r for r in results if r not in good],
                baseline=base,
                leaders=leaders(good),
            )
        )
    return out


def _head(e: Explanation) -> str:
    return f"  {e.label}: "


def first_why(e: Explanation, width: int = 100, answer: bool = False) -> list[str]:
    """The first-ranked factor alone, wrapped over as many lines as it takes, never dropped (at
    80 columns ntfs-3g's '262,144 FUSE WRITE/GiB × 4 KiB (< 4 GiB: no big_writes), …' takes
    two). `answer`: the answer's reason instead (answer_factor, its time first)."""
    first = answer_factor(e) if answer else first_factor(e)
    if first is None:
        return []
    text = answer_text(e, first) if answer else first.brief
    # A number keeps its unit on its line ("13 s/GiB", "59 %"): a no-break space while wrapping.
    glued = re.sub(r"(\d) (?=[^\W\d_]|%|µ)", "\\1\u00a0", text)
    wrapped = textwrap.wrap(
        glued,
        width=width,
        initial_indent=_head(e),
        subsequent_indent="    ",
        break_on_hyphens=False,
    )
    return [ln.replace("\u00a0", " ") for ln in wrapped]


def why_lines(e: Explanation, width: int = 100) -> list[str]:
    """explain.brief_lines, except that the first-ranked factor is never dropped: when it alone
    is wider than a line, it is wrapped on its own (first_why)."""
    lines = brief_lines(e, width)
    first = first_factor(e)
    if first is None or any(first.brief in ln for ln in lines):
        return lines
    # brief_lines never splits a factor: it left the first out, so wrap it on its own, then
    # add whatever brief_lines kept (a placement remark) below it.
    rest = [ln for ln in lines if first.brief not in ln]
    return first_why(e, width) + [
        ("    " + ln.split(": ", 1)[-1]) if ln.startswith("  ") else ln for ln in rest
    ]


# -- drivers this machine lacks -------------------------------------------------------------------
@dataclass
class Missing:
    """Subjects this machine could not measure, and the VM command that measures those a known
    kernel provides (`fsbench doctor` lists the kernels)."""

    kernel_lacks: list[str]  # kernel drivers this kernel has not
    other: list[tuple[str, str]]  # (subject, why) for the rest
    command: str | None  # "fsbench compare ntfs3 exfat vfat --kernel debian-6.12"
    covered: list[str]  # the subjects the command measures
    caveat: list[str] | None = None  # VMs here are emulated: why the command is small
    small: str = ""  # the flags that keep it small (vm_notes.SMALL_FLAGS), part of `command`


def _kernel_lacks(s: Subject) -> bool:
    return s.unavailable == "kernel"


def missing(run: Run) -> Missing:
    gone = [s for s in run.subjects if s.status == "unavailable"]
    lacks = [s for s in gone if _kernel_lacks(s)]
    other = [(s.id, s.error or "unavailable") for s in gone if not _kernel_lacks(s)]
    command, covered = None, []
    # The kernel the run recorded for most of them (Subject.available_in, set by the pipeline
    # from vm/kernels.py: the renderer reads only the records).
    kernels = [s.available_in for s in lacks if s.available_in]
    if kernels:
        name = max(dict.fromkeys(kernels), key=kernels.count)
        # One command for all of them: those another kernel has name it (ntfs@debian-sid).
        covered = [s.id for s in lacks if s.available_in]
        named = [
            s.id if s.available_in == name else f"{s.id}@{s.available_in}"
            for s in lacks
            if s.available_in
        ]
        command = f"fsbench compare {' '.join(named)} --kernel {name}"
    caveat, small = None, ""
    env = run.environment
    if command and env.virtualization == "emulated":
        small, caveat = SMALL_FLAGS, caveat_pieces(env.why_emulated)
        command += f" {small}"
    return Missing([s.id for s in lacks], other, command, covered, caveat, small)


def missing_pieces(run: Run, width: int = 100) -> list[list[str]]:
    """Per line, its pieces (a renderer may break a line between them, never inside): one line
    for the kernel drivers this kernel lacks, with the command when a known kernel provides
    them (where VMs are emulated, small, and why), and one per other reason."""
    m = missing(run)
    out = []
    if m.kernel_lacks:
        line = [f"not measured: {', '.join(m.kernel_lacks)} — not in this kernel;"]
        if m.command:
            some = "" if m.covered == m.kernel_lacks else f" ({', '.join(m.covered)})"
            line.append(f"in a VM{some}:")
            if not m.small or len(m.command) + 2 <= width:
                line.append(m.command)
            else:  # the small flags on a line of their own, continued as a shell reads it
                line += [f"{m.command.removesuffix(f' {m.small}')} \\", m.small]
        else:
            line[0] = line[0].rstrip(";")
        out.append(line)
        if m.caveat:
            out.append(list(m.caveat))
    by_why: dict[str, list[str]] = {}
    for sid, why in m.other:
        by_why.setdefault(why.replace(sid, "<fs>"), []).append(sid)
    for why, ids in by_why.items():
        if len(ids) == 1:
            out.append([f"not measured: {ids[0]} —", why.replace("<fs>", ids[0])])
        else:
            out.append([f"not measured: {', '.join(ids)} —", why])
    return out


# -- what is said of a difference: only what was decided --------------------------------------
@dataclass
class Why:
    """What a table or the answer says about why a subject differs from its reference: the
    explanation's factors when the difference was decided, else only the verdict's words."""

    subject: str
    explanation: Explanation | None  # factors to give (None: nothing measured to say)
    words: str = ""  # 'not separated: within ×0.52–2.43 against ext4' (undecided)

    def lines(self, width: int) -> list[str]:
        """The factors under a table, wrapped to `width`, the first never dropped."""
        e = self.explanation
        return why_lines(e, min(width, 100)) if e is not None and e.factors else []

    def answer_lines(self, width: int) -> list[str]:
        """The answer's reason (its time first), wrapped to `width`."""
        return first_why(self.explanation, width, answer=True) if self.explanation else []

    @property
    def answer_reason(self) -> str:
        """The answer's reason in one string, or the verdict's words."""
        e = self.explanation
        f = answer_factor(e) if e is not None else None
        return self.words or (answer_text(e, f) if e is not None and f is not None else "")

    @property
    def brief(self) -> str:
        """The first-ranked reason's brief, or the verdict's words."""
        f = first_factor(self.explanation) if self.explanation is not None else None
        return self.words or (f.brief if f is not None else "")


def _decided_placements(e: Explanation) -> Explanation:
    """The explanation's placement remarks whose verdict is ▲ or ▼ (they compare the subject
    with itself, a comparison of their own)."""
    moved = [
        f for f in e.factors if f.name.startswith("placement") and f.outcome in ("better", "worse")
    ]
    return replace(e, factors=moved)


def why(e: Explanation | None, c: Comparison | None, base: str | None) -> Why | None:
    """What is said about a subject's difference from its reference: the ranked factors when
    the difference was decided (▲/▼); the verdict's words, and no reason, when it was not."""
    if e is None:
        return None
    if e.is_baseline:
        kept = _decided_placements(e)
        return Why(e.subject, kept) if kept.factors else None
    if c is not None and not c.decided:
        kept = _decided_placements(e)
        return Why(e.subject, kept if kept.factors else None, f"{c.words} against {base}")
    return Why(e.subject, e) if e.factors else None
