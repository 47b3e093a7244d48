"""What a run says, in words: per workload (and per Iozone operation) the fastest subject and
by how much, with the CPU it cost (the page's summary grid).

Only reads finished `Run` records; every comparison is one the run decided
(report/model/decided.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fsbench.records.schema import Result, Run
from fsbench.report.model.comparison import Comparison
from fsbench.report.model.decided import Decided, Pair
from fsbench.report.model.grouping import Group, groups, measured_subjects, usable
from fsbench.report.model.naming import (
    OUTCOME_WORDS,
    centre_of,
    confidence_text,
    ranked,
    result_title,
)
from fsbench.stats.decide import gmean
from fsbench.units import fmt_ratio, fmt_value, size_text


# -- comparisons ----------------------------------------------------------------------------------
def cpu_ratio(base: Result, other: Result) -> float | None:
    a, b = base.cpu.per_gib_s, other.cpu.per_gib_s
    if a is None or b is None or a <= 0:
        return None
    return b / a


def _better(a: float, b: float, higher_is_better: bool) -> bool:
    return a > b if higher_is_better else a < b


@dataclass
class Standing:
    """One subject against the group's best: per-cell ratios (other / best) and their tests."""

    subject: str
    ratios: list[float]
    cpu_ratios: list[float]
    significant: int  # cells where the verdict is ▲ or ▼
    tested: int  # cells with a verdict at all (an interval)
    not_significant: int  # cells where it is ≈ or open
    cells: int
    single: Comparison | None = None  # the comparison when the group has one cell

    @property
    def ratio(self) -> float | None:
        return gmean(self.ratios)

    @property
    def cpu(self) -> float | None:
        return gmean(self.cpu_ratios)


@dataclass
class Finding:
    """The summary of one group: who is fastest, by how much, and the sentences that say it."""

    key: str
    title: str
    best: str | None
    best_value: float | None
    unit: str
    standings: list[Standing]
    sentences: list[str]
    problems: list[str]


def _score(group: Group, subject: str, cells: list[object]) -> float | None:
    if len(cells) == 1:
        return centre_of(group.cells[cells[0]][subject])
    return gmean(centre_of(group.cells[c][subject]) or 0.0 for c in cells)


def _common_cells(group: Group, subjects: Sequence[str]) -> list[object]:
    return [c for c, per in group.cells.items() if all(usable(per.get(s)) for s in subjects)]


def _doing(res: Result, matrix: bool) -> str:
    """What a subject does in this group, as a verb phrase: 'writes 1 MiB records'."""
    p = res.params
    if matrix:
        op = str(p.get("op"))
        return {
            "write": "writes new files",
            "rewrite": "rewrites files",
            "read": "reads files cold",
            "reread": "rereads cached files",
            "rand-read": "reads random records cold",
            "rand-write": "writes random records",
            "stride-read": "reads strided records cold",
        }.get(op, f"does {op}")
    rw = str(p.get("rw", ""))
    bs = p.get("block_size")
    recs = f"{size_text(_bytes(bs))} records" if bs else "records"
    if rw.startswith("randwrite"):
        text = f"writes random {recs}"
    elif rw.startswith("randread"):
        text = f"reads random {recs}"
    elif rw.startswith("write"):
        text = f"writes {recs}"
    elif rw.startswith("read"):
        text = f"reads {recs}" + (" strided" if ":" in rw else "")
    else:
        return f"runs {result_title(res)}"
    if p.get("direct"):
        text += " with O_DIRECT"
    if p.get("fsync") == "end":
        text += " (final fsync)"
    cache = p.get("cache")
    if cache == "cold":
        text += " cold"
    elif cache == "warm":
        text += " cached"
    return text


def _bytes(text: object) -> int:
    """'1M' / '8k' / 65536 -> bytes."""
    if isinstance(text, int | float):
        return int(text)
    s = str(text).strip().lower()
    mult = {"k": 2**10, "m": 2**20, "g": 2**30}
    if s and s[-1] in mult:
        try:
            return int(float(s[:-1]) * mult[s[-1]])
        except ValueError:
            return 0
    try:
        return int(s)
    except ValueError:
        return 0


def _problems(group: Group) -> list[str]:
    out: dict[str, list[str]] = {}
    for r in group.results():
        if r.status == "ok" and not ranked(r):
            out.setdefault(f"{r.subject}: integrity failed, not ranked", []).append(r.subject)
        elif r.status != "ok":
            why = (r.error or r.status).split(";")[0]
            out.setdefault(f"{r.subject} {r.status}: {why}", []).append(r.subject)
    lines = []
    for text, who in out.items():
        lines.append(text if len(who) == 1 else f"{text} ({len(who)} cells)")
    return lines


def finding(group: Group, order: Sequence[str], pair: Pair) -> Finding:
    """The group's fastest and every other subject against it, cell by cell, each comparison
    the one the run decided (`pair`: Decided.pair)."""
    subjects = group.subjects(order)
    ok_subjects = [
        s
        for s in subjects
        if any(usable(per.get(s)) and ranked(per[s]) for per in group.cells.values())
    ]
    problems = _problems(group)
    hib = group.higher_is_better
    if not ok_subjects:
        return Finding(group.key, group.title, None, None, group.unit, [], [], problems)
    cells = _common_cells(group, ok_subjects) if len(ok_subjects) > 1 else []
    if len(ok_subjects) == 1 or not cells:
        s = ok_subjects[0]
        vals = [centre_of(per[s]) for per in group.cells.values() if usable(per.get(s))]
        value = gmean(v for v in vals if v is not None)
        what = (
            f"{s} alone was measured: {fmt_value(value)} {group.unit}"
            if len(ok_subjects) == 1
            else "the subjects share no measured cell; nothing to compare"
        )
        return Finding(group.key, group.title, s, value, group.unit, [], [what], problems)
    scores = {s: _score(group, s, cells) for s in ok_subjects}
    best = ok_subjects[0]
    for s in ok_subjects[1:]:
        if (scores[s] or 0) and _better(scores[s] or 0, scores[best] or 0, hib):
            best = s
    standings = []
    for s in ok_subjects:
        if s == best:
            continue
        ratios, cpus, sig, tested, ns = [], [], 0, 0, 0
        single = None
        for c in cells:
            b, o = group.cells[c][best], group.cells[c][s]
            cmp_ = pair(b, o)
            single = cmp_ if len(cells) == 1 else None
            if cmp_.ratio is not None:
                ratios.append(cmp_.ratio)
            cr = cpu_ratio(b, o)
            if cr is not None:
                cpus.append(cr)
            if cmp_.interval is not None:
                tested += 1
                sig += int(cmp_.decided)
                ns += int(not cmp_.decided)
        standings.append(Standing(s, ratios, cpus, sig, tested, ns, len(cells), single))
    sentences = _sentences(group, best, scores[best], standings, cells)
    return Finding(
        group.key, group.title, best, scores[best], group.unit, standings, sentences, problems
    )


def _sentences(
    group: Group, best: str, value: float | None, standings: list[Standing], cells: list[object]
) -> list[str]:
    hib = group.higher_is_better
    one = len(cells) == 1
    if one:
        head = f"{best} is {'fastest' if hib else 'quickest'}: {fmt_value(value)} {group.unit}"
    else:
        head = (
            f"{best} is {'fastest' if hib else 'quickest'} over the {len(cells)} cells all "
            f"subjects ran (geometric mean {fmt_value(value)} {group.unit})"
        )
    out = [head + "."]
    for st in standings:
        r = st.ratio
        if r is None:
            continue
        doing = _doing(group.cells[cells[0]][st.subject], group.matrix)
        if hib:
            rate = f"{doing} at {fmt_ratio(r)} {best}'s rate"
        else:
            rate = f"takes {fmt_ratio(r)} as long as {best}"
        if one and st.single is not None and st.single.interval:
            pct = f"{confidence_text(st.single.confidence)}"
            rate += f" [{pct} % interval {st.single.interval_text}]"
        elif not one:
            rate += f" (geometric mean; {fmt_ratio(min(st.ratios))}–{fmt_ratio(max(st.ratios))})"
        text = f"{st.subject} {rate}"
        if st.cpu is not None:
            text += f" and spends {fmt_ratio(st.cpu)} the CPU per GiB"
        if one and st.single is not None:
            said = st.single.outcome
            if said not in ("better", "worse"):
                text += f"; {OUTCOME_WORDS[said]}"
        elif not one:
            ahead = sum(1 for r in st.ratios if _better(r, 1.0, hib))
            if ahead:
                text += f"; it is ahead in {ahead} of {len(st.ratios)} cells"
            if st.tested:
                text += f"; the interval excludes 1 (▲/▼) in {st.significant} of {st.tested}"
        out.append(text + ".")
    return out


def findings(run: Run, decided: Decided | None = None) -> list[Finding]:
    """Every group's finding, with the comparisons the report decided (`decided`: the model's;
    None: the run's own, decided here once)."""
    order = measured_subjects(run)
    pair = (decided or Decided(run)).pair
    return [finding(g, order, pair) for g in groups(run)]
