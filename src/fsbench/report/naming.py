"""Shared by the renderers: how a result is named (workload/variant[-jN]), which result is a
workload's baseline, and how a ratio is marked (green better, red worse, ≈ not significant,
? undecided)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text

from fsbench.schema import INTEGRITY_FAILED_FLAG, Result
from fsbench.stats import Comparison


def result_title(res: Result) -> str:
    """workload/variant[-jN][ [placement]]: the placement is named only when the run measured
    placements (params.placement), so results of one placement share a table."""
    variant = res.params.get("variant")
    jobs = res.params.get("numjobs", 1)
    title = f"{res.workload}/{variant}" if variant else res.workload
    if jobs not in (1, None):
        title += f"-j{jobs}"
    clients = res.params.get("clients")
    if clients is not None:
        title += f"-c{clients}"
    placement = res.params.get("placement")
    return f"{title} [{placement}]" if placement else title


# How a title's description says where the processes ran (--placement).
PLACEMENT_TEXT = {
    "free": "nothing pinned",
    "same": "app and daemon on one CPU",
    "split": "app and daemon on separate CPUs",
}


def placement_text(placement: object) -> str:
    return PLACEMENT_TEXT.get(str(placement), f"placement {placement}")


def ranked(res: Result) -> bool:
    """False for a subject whose volume failed its integrity check: its figures are shown but
    it is never the baseline, the fastest or the best."""
    return not any(f.startswith(INTEGRITY_FAILED_FLAG) for f in res.flags)


def baseline_result(results: Iterable[Result], order: Sequence[str]) -> Result | None:
    """The result the others of a workload are compared with: that of the first subject (in
    the run's order) which finished with samples and passed its integrity check. Every
    renderer and the explanation use it."""
    ok = [r for r in results if r.status == "ok" and r.samples and ranked(r)]
    ok.sort(key=lambda r: order.index(r.subject) if r.subject in order else len(order))
    return ok[0] if ok else None


def styled_ratio(c: Comparison, text: str, higher_is_better: bool, ns: str = " ≈") -> Text:
    if c.significant is False:
        return Text(text + ns, style="yellow")
    if c.significant is None:
        return Text(text + " ?", style="dim")
    better = (c.ratio or 0) > 1 if higher_is_better else (c.ratio or 0) < 1
    return Text(text, style="green" if better else "red")
