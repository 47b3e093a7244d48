"""`fsbench judge`'s tables, decided once: per run, workload and column (rate, p99) each
subject's centre and interval, its comparison with the table's baseline and with the fastest,
and the family's legend; the comparisons `--json` lists and the outcomes `--fail-on` reads.

The verdicts are fsbench.stats.decide.printed's, as compare's tables are; the renderer
(report/views/judge.py) only lays these cells out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fsbench.report.model.naming import ci_text, outcome, ratio_cell
from fsbench.stats import decide
from fsbench.stats.verdict import Family
from fsbench.units import fmt_value


@dataclass
class JudgeRow:
    subject: str
    centre: str  # '2,203 ±3%' (the geometric mean and its interval's larger half)
    vs_baseline: str  # '0.44× 0.24–0.80 ▼', or 'baseline'
    vs_best: str  # against the fastest, or 'fastest'
    n: int


@dataclass
class JudgeTable:
    title: str  # 'RUN · seq-read/cold', ' · p99' for the latency column
    baseline: str
    best: str | None
    legend: str  # the table's own family (Family.legend)
    rows: list[JudgeRow] = field(default_factory=list)
    # Each row's outcome against the baseline (better, worse, same, open): the gate's words.
    outcomes: list[str] = field(default_factory=list)


def tables(run: Any, orders: Mapping[str, list[str]] | None = None) -> list[JudgeTable]:
    """The run's tables as compare prints their verdict columns."""
    out: list[JudgeTable] = []
    order = [s.id for s in run.subjects]
    per = {(r.workload_id or r.workload, r.subject): r for r in run.results}
    for wid, p in decide.printed(run.results, order, orders).items():
        for col, tl in p.looks.items():
            if tl.baseline is None:
                continue
            base = per[(wid, tl.baseline)]
            hib = base.higher_is_better if col == "rate" else False
            t = JudgeTable(
                title=f"{run.run_id} · {wid}" + ("" if col == "rate" else f" · {col}"),
                baseline=tl.baseline,
                best=tl.best,
                legend=Family.from_record(base.verdict_family).legend(),
            )
            subjects = [s for s in (orders or {}).get(wid, order) if (wid, s) in per]
            for s in subjects or [s for s in order if (wid, s) in per]:
                r = per[(wid, s)]
                vb, vf = tl.against(tl.baseline, s), tl.against(tl.best, s)
                cells = [
                    ratio_cell(v, hib) if v is not None else (
                        "baseline" if s == tl.baseline else "fastest")
                    for v in (vb, vf)
                ]  # fmt: skip
                # The p99 column's centres are the latency figures' own (not the rate's).
                centre = ci_text(r) if col == "rate" else fmt_value(None)
                t.rows.append(JudgeRow(s, centre, cells[0], cells[1], len(r.samples)))
                if vb is not None:
                    t.outcomes.append(outcome(vb, hib))
            out.append(t)
    return out


def compared(
    run: Any, orders: Mapping[str, list[str]] | None = None, baseline_only: bool = False
) -> list[tuple[dict[str, Any], str]]:
    """Every printed comparison with its outcome (``baseline_only``: those against each
    table's baseline)."""
    order = [s.id for s in run.subjects]
    out = []
    for wid, p in decide.printed(run.results, order, orders).items():
        hib0 = next(r.higher_is_better for r in run.results if (r.workload_id or r.workload) == wid)
        for (col, ref, subj), v in _printed_pairs(p):
            if baseline_only and ref != p.looks[col].baseline:
                continue
            hib = hib0 if col == "rate" else False
            lo, hi = v.interval if v.interval else (None, None)
            said = {
                "run": run.run_id,
                "workload": wid if col == "rate" else f"{wid} {col}",
                "subject": subj,
                "against": ref,
                "ratio": v.ratio,
                "low": lo,
                "high": hi,
            }
            out.append((said, outcome(v, hib)))
    return out


def _printed_pairs(p: Any) -> list[tuple[tuple[str, str, str], Any]]:
    """Each printed comparison once per (column, reference, subject): every subject against
    the baseline and against the fastest (the baseline's row against the fastest too)."""
    out = []
    for col, tl in p.looks.items():
        subjects = dict.fromkeys(s for pair in tl.verdicts for s in pair)
        for ref in dict.fromkeys((tl.baseline, tl.best)):
            for s in subjects:
                v = tl.against(ref, s)
                if v is not None and ref is not None:
                    out.append(((col, ref, s), v))
    return out
