"""What the run decided, as every output shows it: each result against its table's baseline
(the first subject that finished, per Iozone cell), as a cell ('0.44× 0.24–0.80 ▼'), an outcome
and words, and as results.json stores it (Run.verdicts, schema 5: decided once at the end of a
run, or once when an older run is read: report/model/upgrade.py). `Decided` hands every view its
comparisons, those the run stored and any other pair a view sets side by side (the fastest,
another placement, an aged image against the fresh one), each asked for here once;
report/model/ builds every view from these.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsbench.records.notecodes import words as note_words
from fsbench.records.schema import Result, Run
from fsbench.report.model.comparison import Comparison, compare, confidence_text, latency_verdict
from fsbench.report.model.grouping import groups, measured_subjects, report_order, usable
from fsbench.report.model.naming import baseline_result, centre_of, ranked, result_title
from fsbench.report.style import words
from fsbench.stats import latency
from fsbench.stats.verdict import Family, family_of


def vs_cell(
    base: Result | None, res: Result, stored: dict[str, Any] | None = None
) -> tuple[Comparison | None, str, str, str]:
    """(comparison, outcome, cell text, words) of res against the table's baseline: the one
    the run stored (`stored`, a Run.verdicts record) when it has one, else decided now."""
    if not ranked(res):
        return None, "unranked", "not ranked", "integrity failed"
    if base is None or base is res or not base.samples or not res.samples:
        return (
            None,
            ("baseline" if base is res else "empty"),
            ("baseline" if base is res else "–"),
            "",
        )
    c = (Comparison.from_record(stored) if stored else None) or compare(base, res)
    how = words(c.outcome)
    if c.interval is not None:
        how += f" ({confidence_text(c.confidence)} % interval)"
    return c, c.outcome, c.cell(), how


def leaders(ranked_results: list[Result]) -> list[Result]:
    """Of results ranked best first, the first and every other whose comparison with it is
    not decided worse: open (not separated), within the band (the same), or not comparable
    (too few samples). More than one: the answer names no fastest, no table stars a best."""
    if not ranked_results:
        return []
    top = ranked_results[0]
    return [top, *(r for r in ranked_results[1:] if compare(top, r).outcome != "worse")]


def baselines(run: Run) -> dict[int, Result | None]:
    """Each result's baseline: the first subject that finished in its table (id(result) ->
    baseline; the matrix: per cell)."""
    order = measured_subjects(run)
    out: dict[int, Result | None] = {}
    for g in groups(run):
        for per in g.cells.values():
            base = baseline_result(list(per.values()), order)
            out.update({id(r): base for r in per.values()})
    return out


def table_family(results: list[Result], run: Run) -> Family:
    """The family one table's verdicts were decided at (Result.verdict_family: its own
    subjects, columns and looks), else the run's (a run stored before tables had their own)."""
    rec = next((r.verdict_family for r in results if r.verdict_family), None)
    return Family.from_record(rec) if rec else family_of(run)


def family_line(f: Family) -> str:
    """One table's confidence in a line: 'vs interval at 99.58 % (any false ▲/▼ in this table
    ≤ 5 % over 6 pairs of 4 × 2 columns)'."""
    said = f"vs interval at {f.confidence_text()} % (any false ▲/▼ in "
    said += f"{'this table' if f.tails else 'the run'} ≤ {f.alpha * 100:.0f} %"
    spread = f.spread_text()
    return said + (f" over {spread})" if spread else ")")


def tables_legend(shared: Family | None, run: Family) -> str:
    """What ▲/▼ promise for every table at once: the family they share, else the run's error
    rate and band with each interval at its own table's confidence (family_line)."""
    if shared is not None:
        return shared.legend()
    return (
        f"▲/▼ interval excludes 1 (chance of any false ▲/▼ in a table ≤ {run.alpha * 100:.0f} %"
        f": each interval at its table's confidence, stated with the table); ≈ within "
        f"±{run.band * 100:g} %; open: not separated (the interval's reach)"
    )


def verdict_key(res: Result) -> str:
    """What names a result across a store's round trip: subject, workload, parameters."""
    return json.dumps([res.subject, res.workload, res.params], sort_keys=True, default=str)


def verdict_record(res: Result, base: Result | None) -> dict[str, Any]:
    """A result against its table's baseline, as every output shows it: the outcome, the
    ratio with its interval and confidence, the cell text, the verdict's words; for a
    latency-bound result also its p99's ({} when there is no baseline)."""
    if base is None or not usable(res) or not usable(base):
        return {}
    c, said, cell, _ = vs_cell(base, res)
    rec: dict[str, Any] = {"baseline": base.subject, "verdict": said, "cell": cell}
    if c is not None:
        rec.update(c.to_dict())
        rec["verdict"] = said
    if latency.latency_bound(res):
        v = latency_verdict(base, res)
        if v is not None:
            rec["p99"] = Comparison.of(v, False).to_dict()
    return rec


def verdicts(run: Run) -> list[dict[str, Any]]:
    """Every result's verdict record, in the report's order, with its index in run.results."""
    base = baselines(run)
    index = {id(r): i for i, r in enumerate(run.results)}
    out = []
    for res in report_order(run):
        rec = verdict_record(res, base.get(id(res)))
        if rec:
            out.append({"index": index[id(res)], "key": verdict_key(res),
                        "subject": res.subject, "title": result_title(res), **rec})  # fmt: skip
    return out


# A comparison of two results as the report shows it: Decided.pair.
Pair = Callable[[Result, Result], Comparison]


class Decided:
    """The run's comparisons, each asked for once: a result against its table's baseline as
    the run decided it (Run.verdicts) where it stored that very pair, else decided now (the
    one procedure, comparison.py). Calling it gives a table's cell (vs_cell's four parts);
    `pair` any two results a view sets side by side; `p99` a latency-bound row's p99."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._stored = {str(v.get("key")): v for v in run.verdicts}

    def _record(self, base: Result | None, res: Result) -> dict[str, Any] | None:
        rec = self._stored.get(verdict_key(res))
        same = rec is not None and base is not None and rec.get("baseline") == base.subject
        return rec if same else None

    def __call__(self, base: Result | None, res: Result) -> tuple[Comparison | None, str, str, str]:
        return vs_cell(base, res, self._record(base, res))

    def pair(self, base: Result, res: Result) -> Comparison:
        """`res` against `base`: what the run stored for this pair, else decided now."""
        rec = self._record(base, res)
        return (Comparison.from_record(rec) if rec else None) or compare(base, res)

    def p99(self, base: Result | None, res: Result) -> Comparison | None:
        """A latency-bound result's p99 against its baseline's (lower is better): stored, else
        decided now; None without one."""
        rec = self._record(base, res)
        if rec is not None and "p99" in rec:
            return Comparison.from_record(rec["p99"])
        v = latency_verdict(base, res)
        return Comparison.of(v, False) if v is not None and v.ratio is not None else None


@dataclass
class ResultFacts:
    """One result as the exports list it, in the report's order: its title and centre, its
    notes in words and codes, its IOPS and p99 when latency-bound, and its verdict record
    against its table's baseline (what the run stored, else decided now; {} without one)."""

    result: Result
    title: str
    centre: float | None
    notes: list[str]
    codes: list[str]
    latency: dict[str, float]
    verdict: dict[str, Any]


def result_facts(run: Run) -> list[ResultFacts]:
    base = baselines(run)
    stored = {str(v.get("key")): v for v in run.verdicts}
    out = []
    for res in report_order(run):
        rec = stored.get(verdict_key(res)) or verdict_record(res, base.get(id(res)))
        out.append(
            ResultFacts(
                res,
                result_title(res),
                centre_of(res),
                [note_words(n) for n in res.notes],
                list(dict.fromkeys(n.code for n in res.notes)),
                latency.printed(res) if latency.latency_bound(res) else {},
                rec,
            )
        )
    return out
