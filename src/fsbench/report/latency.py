"""Latency and IOPS in the reports: the terminal table's columns for latency-bound
workloads (random, records ≤ 8 KiB) and the verdict on a p99, made by the same procedure as a
throughput's (fsbench.latency.view: the result with its per-sample p99 as samples, lower
better, judged through summary.compare at the family the run recorded)."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from fsbench import latency
from fsbench.report.comparison import verdict_of
from fsbench.report.naming import ratio_cell, styled_ratio
from fsbench.schema import Result
from fsbench.units import fmt_value
from fsbench.verdict import Verdict

Cell = Callable[[Result], Text | str]


def judge(base: Result | None, res: Result, key: str = "p99") -> Verdict | None:
    """The verdict on `key` (p50, p99, p99.9 or iops) of res against base; None when either
    lacks it or res is the baseline."""
    if base is None or base is res:
        return None
    a, b = latency.view(base, key), latency.view(res, key)
    if a is None or b is None:
        return None
    return verdict_of(a, b)


def iops_text(res: Result) -> str:
    v = latency.figures(res).get("iops")
    return fmt_value(v, 0) if v else "–"


def pct_text(res: Result, key: str = "p99") -> str:
    v = latency.figures(res).get(f"{key}_us")
    return fmt_value(v) if v is not None else "–"


def verdict_text(base: Result | None, res: Result, key: str = "p99") -> str:
    """'6.02× 3.1–11.7 ▼' for the HTML and notes: lower is better, so ▼ is a longer latency."""
    v = judge(base, res, key)
    return ratio_cell(v, False) if v is not None else ""


def columns(results: list[Result], base: Result | None) -> list[tuple[str, Cell]]:
    """The terminal table's extra columns: IOPS, and the median p99 with its ratio to the
    baseline's and the mark (▼: longer); none unless a result of the table is latency-bound."""
    if not any(latency.latency_bound(r) for r in results):
        return []

    def p99(res: Result) -> Text:
        out = Text(pct_text(res))
        v = judge(base, res)
        if v is not None and v.ratio is not None:
            out.append(" ").append_text(styled_ratio(v, False, interval=False))
        return out

    return [("IOPS", iops_text), ("p99 µs", p99)]


def legend(results: list[Result]) -> list[Text]:
    """The line under a table with latency columns: what its p99 is."""
    if not any(latency.latency_bound(r) for r in results):
        return []
    return [Text(f"  p99: fio's {latency.words(results)}, µs, median over the samples", "dim")]
