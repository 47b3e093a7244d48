"""Shared by the renderers: how a result is named (workload/variant[-jN]), which result is a
workload's baseline, and how a ratio is marked (green better, red worse, ≈ not significant,
? undecided)."""

from __future__ import annotations

from rich.text import Text

from fsbench.baseline import baseline_result, ranked
from fsbench.schema import Result
from fsbench.stats import Comparison

__all__ = ["baseline_result", "placement_text", "ranked", "result_title", "styled_ratio"]


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


def styled_ratio(c: Comparison, text: str, higher_is_better: bool, ns: str = " ≈") -> Text:
    if c.significant is False:
        return Text(text + ns, style="yellow")
    if c.significant is None:
        return Text(text + " ?", style="dim")
    better = (c.ratio or 0) > 1 if higher_is_better else (c.ratio or 0) < 1
    return Text(text, style="green" if better else "red")
