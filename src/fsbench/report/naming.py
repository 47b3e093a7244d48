"""Shared by the renderers: how a result is named (workload/variant[-jN]), which result is a
workload's baseline, and how a ratio is marked (green better, red worse, ≈ not significant,
? undecided)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text

from fsbench.schema import Result
from fsbench.stats import Comparison


def result_title(res: Result) -> str:
    variant = res.params.get("variant")
    jobs = res.params.get("numjobs", 1)
    title = f"{res.workload}/{variant}" if variant else res.workload
    title = title if jobs in (1, None) else f"{title}-j{jobs}"
    clients = res.params.get("clients")
    return title if clients is None else f"{title}-c{clients}"


def baseline_result(results: Iterable[Result], order: Sequence[str]) -> Result | None:
    """The result the others of a workload are compared with: that of the first subject (in
    the run's order) which finished with samples. Every renderer and the explanation use it."""
    ok = [r for r in results if r.status == "ok" and r.samples]
    ok.sort(key=lambda r: order.index(r.subject) if r.subject in order else len(order))
    return ok[0] if ok else None


def styled_ratio(c: Comparison, text: str, higher_is_better: bool, ns: str = " ≈") -> Text:
    if c.significant is False:
        return Text(text + ns, style="yellow")
    if c.significant is None:
        return Text(text + " ?", style="dim")
    better = (c.ratio or 0) > 1 if higher_is_better else (c.ratio or 0) < 1
    return Text(text, style="green" if better else "red")
