"""Why a subject differs from its workload's baseline, in words and numbers.

For every finished result a `Profile` collects what the run measured about it (the kernel
trace probes' figures per GiB or per 1000 operations, CPU by part, context switches, device
amplification), and `explain_run` turns two profiles (the result's and its baseline's) into
ranked `Factor` records: a name, a figure, its unit, the seconds of the traced run it stands for
and the share of the difference to the baseline it accounts for, and the sentence that says so.
The terminal table, the HTML report, `--json` and `diff` all read these records.

Each trace probe is one record (`fsbench/probedefs/`): its `read` makes its figures of the
Profile and its `factors` what they say; this module calls them in the catalogue's order, then
the factor functions the /proc probe records name (`probedefs.COUNTERS`: CPU, context switches,
amplification, over the result's own figures) and the FUSE floor's (`report/model/floor.py`), and
knows no probe by name.

Nothing here is canned: a sentence exists only when the numbers it quotes were measured in this
run. A probe that was unavailable (or a run without tracing) gives no claim, only a note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from fsbench.records import probes as probedefs
from fsbench.records.probes.counter import factor_functions
from fsbench.records.probes.factor import (
    SAME_WITHIN,
    Factor,
    FactorInput,
    OpFigures,
    Profile,
    differs,
)
from fsbench.records.probes.numbers import (
    as_dict,
    fmt_count,
    fmt_pct,
    fmt_short,
    fmt_time,
    fmt_us,
    number,
)
from fsbench.records.probes.sched import wakeup_costs
from fsbench.records.schema import Result, Run
from fsbench.report.model.decided import Decided, Pair
from fsbench.report.model.floor import floor_factors
from fsbench.report.model.grouping import measured_subjects, usable
from fsbench.report.model.keys import PLACEMENT_WORDS, placement_of, workload_key
from fsbench.report.model.naming import (
    OUTCOME_WORDS,
    baseline_result,
    centre_of,
    confidence_text,
)
from fsbench.units import fmt_ratio, size_text

# Renderers import these from here: the explanation's vocabulary in one place.
__all__ = [
    "SAME_WITHIN",
    "Explanation",
    "Factor",
    "OpFigures",
    "Profile",
    "fmt_count",
    "fmt_pct",
    "fmt_short",
    "fmt_time",
    "fmt_us",
    "placement_of",
    "wakeup_costs",
    "workload_key",
]

GiB = 2**30


def factor_sources() -> list[Callable[[FactorInput], list[Factor]]]:
    """The explanation's factor functions in the order they are listed before ranking (equal
    weights keep it): the trace probes' in the catalogue's `EXPLAINED` order, then those the
    /proc probe records name (`COUNTERS`, each function once), then the FUSE floor's."""
    return [
        *(p.factors for p in probedefs.EXPLAINED),
        *factor_functions(probedefs.COUNTERS),
        floor_factors,
    ]


# -- what was measured about one result -----------------------------------------------------------
def _work(res: Result, trace: dict[str, Any] | None) -> tuple[str, float, float | None]:
    w = as_dict(as_dict(trace).get("work"))
    nbytes = number(w.get("bytes")) or float(sum(s.bytes for s in res.sample_details))
    ops = number(w.get("ops")) or float(sum(s.ops for s in res.sample_details))
    secs = number(w.get("seconds")) or float(sum(s.seconds for s in res.sample_details))
    if nbytes > 0:
        amount, per = nbytes / GiB, "GiB"
    elif ops > 0:
        amount, per = ops / 1000, "1000 ops"
    else:
        return "GiB", 0.0, None
    return per, amount, (secs / amount if secs > 0 else None)


def _probe_part(trace: dict[str, Any], name: str, unavailable: list[str]) -> dict | None:
    """The probe's part of a trace, or None (with a note when the probe was not available)."""
    status = as_dict(trace.get("probes")).get(name)
    if status is not None and status != "ok":
        unavailable.append(f"{name}: {status}")
        return None
    part = trace.get(name)
    return part if isinstance(part, dict) else None


def profile(res: Result, run: Run) -> Profile:
    subject = next((s for s in run.subjects if s.id == res.subject), None)
    trace = res.trace or None
    per, amount, seconds = _work(res, trace)
    p = Profile(
        res,
        per,
        amount,
        seconds,
        subject.kind if subject else "",
        subject.driver if subject else res.subject.split(":")[0],
        subject.quirks if subject else [],
        transport=subject.transport if subject else None,
        probes=probedefs.PROBES,
    )
    if trace is None:
        p.unavailable.append("trace: no probe data in this result (tracing off or an older run)")
    elif amount > 0:
        for probe in probedefs.PROBES:
            figures = probe.read(_probe_part(trace, probe.name, p.unavailable), p)
            if figures is not None:
                p.measured[probe.name] = figures
    if per == "GiB" and res.cpu.per_gib:
        p.cpu = {k: v for k, v in res.cpu.per_gib.items() if isinstance(v, int | float)}
        own = getattr(res, "subject_ctx_switches_per_gib", None)
        p.ctx = own if own is not None else res.ctx_switches_per_gib
        p.ctx_machine = own is None and p.ctx is not None
    elif per != "GiB":
        per_kop = getattr(res.cpu, "per_kop_ms", None) or {}
        if per_kop:
            p.cpu = {k: v / 1e3 for k, v in per_kop.items() if isinstance(v, int | float)}
    if res.read_amplification is not None:
        p.amplification["read"] = res.read_amplification
    if res.write_amplification is not None:
        p.amplification["write"] = res.write_amplification
    return p


# -- the explanation ------------------------------------------------------------------------------
@dataclass
@dataclass
class Explanation:
    index: int  # position of the result in run.results
    subject: str
    title: str
    placement: str
    baseline: str | None
    is_baseline: bool
    per: str
    seconds: float | None  # the subject's seconds per unit of work
    baseline_seconds: float | None
    factors: list[Factor]
    unavailable: list[str]
    # The traced run's rate over the samples' centre, oriented so that < 1 is slower: what the
    # probes cost this subject in the one run they ran in (None: no traced rate recorded).
    traced_speed: float | None = None
    # The run measured this subject and workload at more than one placement (--placement
    # free,same): only then does a reason name its placement ("ntfs-3g [same]: ...").
    placed: bool = False

    @property
    def label(self) -> str:
        """The subject as its reasons head it: with its placement where the run compared
        placements (the scheduler's own, free, unlabelled), else alone (a default run pins
        every subject alike: no label)."""
        pinned = self.placed and self.placement != "free"
        return self.subject + (f" [{self.placement}]" if pinned else "")

    def sentence(self) -> str:
        return f"{self.subject}: " + "; ".join(f.sentence for f in self.factors)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _placement_factors(res: Result, siblings: dict[str, Result], pair: Pair) -> list[Factor]:
    """Other placements of the same subject and workload against this one, each comparison
    as the report decided it (`pair`: Decided.pair)."""
    out = []
    here = placement_of(res)
    for where in sorted(
        siblings, key=lambda w: list(PLACEMENT_WORDS).index(w) if w in PLACEMENT_WORDS else 9
    ):
        other = siblings[where]
        if where == here or not usable(other) or not usable(res):
            continue
        c = pair(res, other)
        if c.ratio is None or c.ratio <= 0:
            continue
        faster = c.ratio if res.higher_is_better else 1 / c.ratio
        words = PLACEMENT_WORDS.get(where, f"placement {where}")
        said = c.outcome
        if said == "same":
            how = f"no different ({fmt_ratio(faster)} the speed)"
        elif said in ("open", "none"):
            how = f"not decidedly different ({fmt_ratio(faster)} the speed)"
        elif faster >= 1:
            how = f"{fmt_ratio(faster)} faster"
        else:
            how = f"{fmt_ratio(1 / faster)} slower"
        text = f"{words} ({where}) {how} than {here}"
        if c.interval is None:
            text += " (too few samples to judge)"
        else:
            at = f"{c.interval_text} at {confidence_text(c.confidence)} %"
            text += f" ({at}: {OUTCOME_WORDS[said]})"
        brief = f"{words} {how}"
        out.append(
            Factor(
                f"placement {where}",
                c.ratio,
                f"ratio to {here}",
                text,
                brief,
                1.0,
                weight=-1.0,  # another comparison than the baseline's: said last
                outcome=None if c.interval is None else said,
            )
        )
    return out


def explain_result(
    res: Result,
    base: Result | None,
    run: Run,
    siblings: dict[str, Result] | None = None,
    index: int = -1,
    profiles: dict[int, Profile] | None = None,
    decided: Decided | None = None,
) -> Explanation:
    """The factors separating `res` from `base` (the baseline result of its workload and
    placement; `res` itself or None when it is the baseline), ranked; `siblings`' other
    placements compared as `decided` has them (None: the run's own, decided here)."""
    cache = profiles if profiles is not None else {}

    def prof_of(r: Result) -> Profile:
        if id(r) not in cache:
            cache[id(r)] = profile(r, run)
        return cache[id(r)]

    prof = prof_of(res)
    is_base = base is None or base is res
    bprof = None if is_base or base is None else prof_of(base)
    if bprof is not None and bprof.per != prof.per:
        bprof = None
    name = base.subject if base is not None else ""
    gap = None
    if bprof is not None and prof.seconds and bprof.seconds:
        g = prof.seconds - bprof.seconds
        # A gap within a few per cent is noise: shares of it would be meaningless.
        if abs(g) >= 0.05 * max(prof.seconds, bprof.seconds):
            gap = g
    inp = FactorInput(res, prof, bprof, name, run, gap, prof_of)
    factors = [f for source in factor_sources() for f in source(inp)]
    factors.sort(key=lambda f: -f.weight)
    if siblings and len(siblings) > 1:
        factors += _placement_factors(res, siblings, (decided or Decided(run)).pair)
    return Explanation(
        index=index,
        subject=res.subject,
        title=workload_key(res),
        placement=placement_of(res),
        baseline=None if is_base else name,
        is_baseline=is_base,
        per=prof.per,
        seconds=prof.seconds,
        baseline_seconds=bprof.seconds if bprof else None,
        factors=factors,
        unavailable=prof.unavailable,
        traced_speed=traced_speed(res),
        placed=len(siblings or {}) > 1,
    )


def traced_speed(res: Result) -> float | None:
    """The traced run's speed relative to the timed samples' centre, the one every table prints
    (1.0: the probes cost nothing; 0.8: the traced run went at 80 % of the timed speed)."""
    v, c = number(as_dict(res.trace).get("value")), centre_of(res)
    if not v or not c:
        return None
    return v / c if res.higher_is_better else c / v


def explain_run(run: Run, decided: Decided | None = None) -> list[Explanation]:
    """An explanation per usable result, in run order (`decided`: the report's comparisons;
    None: the run's own, decided here once)."""
    order = measured_subjects(run)
    decided = decided or Decided(run)
    by_key: dict[str, list[tuple[int, Result]]] = {}
    for i, r in enumerate(run.results):
        by_key.setdefault(workload_key(r), []).append((i, r))
    profiles: dict[int, Profile] = {}
    out: list[Explanation] = []
    for items in by_key.values():
        results = [r for _, r in items]
        for i, r in items:
            if not usable(r):
                continue
            same_place = [x for x in results if placement_of(x) == placement_of(r)]
            base = baseline_result(same_place, order)
            siblings = {placement_of(x): x for x in results if x.subject == r.subject}
            out.append(explain_result(r, base, run, siblings, i, profiles, decided))
    out.sort(key=lambda e: e.index)
    return out


def run_json(run: Run) -> str:
    """The run as results.json has it plus a derived `explanations` section (one record per
    explained result, `index` into `results`): old readers ignore the extra key."""
    doc = json.loads(run.to_json())
    doc["explanations"] = [e.to_dict() for e in explain_run(run)]
    return json.dumps(doc, indent=2, ensure_ascii=False)


# -- the terminal ---------------------------------------------------------------------------------
def brief_lines(e: Explanation, width: int = 100, max_lines: int = 2) -> list[str]:
    """The explanation in at most `max_lines` lines of `width` columns: the ranked factors that
    fit, in rank order; a placement remark is kept in preference to all but the first."""
    head = f"  {e.label}: "
    indent = "    "
    ranked = [f.brief for f in e.factors if not f.name.startswith("placement")]
    place = [f.brief for f in e.factors if f.name.startswith("placement")]

    def pack(items: list[str]) -> list[str] | None:
        lines, line = [], head
        for i, item in enumerate(items):
            piece = item + (";" if i < len(items) - 1 else "")
            if len(line) + len(piece) > width and line != indent:
                lines.append(line.rstrip())
                line = indent
            if len(line) + len(piece) > width:
                return None  # one piece alone is wider than a line
            line += piece + " "
        lines.append(line.rstrip())
        return lines if len(lines) <= max_lines else None

    # The first-ranked factor comes first, then the placement remark, then what still fits.
    chosen: list[str] = ranked[:1] if ranked and pack(ranked[:1]) else []
    if pack([*chosen, *place]) is None:
        place = []
    for item in ranked[len(chosen) :]:
        if pack([*chosen, item, *place]) is None:
            break
        chosen.append(item)
    if not chosen and not place:
        return []
    return pack([*chosen, *place]) or []


# -- diff -----------------------------------------------------------------------------------------
def fmt_figure(v: float, how: str) -> str:
    """A probe figure by its kind (bytes, us, s, n: a plain number, else a count); `diff` and
    the aging effects write figures alike."""
    if how == "bytes":
        return size_text(v)
    if how == "us":
        return fmt_us(v)
    if how == "s":
        return fmt_time(v)
    if how == "n":
        return f"{v:.2f}"
    return fmt_count(v)


def changed_figures(a: Result, run_a: Run, b: Result, run_b: Run) -> list[str]:
    """Probe figures of the same result in two runs that differ by SAME_WITHIN or more:
    'FUSE WRITE requests per GiB 262,144 → 8,192'. A figure only one run measured is said
    as such, never compared with nothing."""
    pa, pb = profile(a, run_a), profile(b, run_b)
    if pa.per != pb.per:
        return []
    fa = {k: (label, v, how) for k, label, v, how in pa.figures()}
    fb = {k: (label, v, how) for k, label, v, how in pb.figures()}
    out = []
    for k, (label, va, how) in fa.items():
        if k in fb:
            vb = fb[k][1]
            if differs(va, vb):
                out.append(f"{label} {fmt_figure(va, how)} → {fmt_figure(vb, how)}")
        elif pb.measured.get("fuse") is not None and k.startswith("fuse."):
            out.append(f"{label} {fmt_figure(va, how)} → none")
    for k, (label, vb, how) in fb.items():
        if k not in fa and pa.measured.get("fuse") is not None and k.startswith("fuse."):
            out.append(f"{label} none → {fmt_figure(vb, how)}")
    return out
