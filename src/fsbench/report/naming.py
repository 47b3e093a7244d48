"""Shared by the terminal renderers: how a result is named (workload/variant[-jN]) and how a
ratio is marked (green better, red worse, ≈ not significant, ? undecided)."""

from __future__ import annotations

from rich.text import Text

from fsbench.schema import Result
from fsbench.stats import Comparison


def result_title(res: Result) -> str:
    variant = res.params.get("variant")
    jobs = res.params.get("numjobs", 1)
    title = f"{res.workload}/{variant}" if variant else res.workload
    return title if jobs in (1, None) else f"{title}-j{jobs}"


def styled_ratio(c: Comparison, text: str, higher_is_better: bool, ns: str = " ≈") -> Text:
    if c.significant is False:
        return Text(text + ns, style="yellow")
    if c.significant is None:
        return Text(text + " ?", style="dim")
    better = (c.ratio or 0) > 1 if higher_is_better else (c.ratio or 0) < 1
    return Text(text, style="green" if better else "red")
