"""Shared by the renderers: how a result is named (workload/variant[-jN]), which result is a
workload's baseline, and how a ratio and its verdict are printed (fsbench.verdict: ▲ better,
▼ worse, both when the interval excludes 1; ≈ within ±2 %; ? open). Every table, report, diff
and plot prints a ratio through these, so a mark never disagrees with its printed interval."""

from __future__ import annotations

import math

from rich.text import Text

from fsbench.baseline import baseline_result, ranked
from fsbench.schema import Result
from fsbench.units import fmt_bound, fmt_halfwidth, fmt_ratio, fmt_value
from fsbench.verdict import Verdict

__all__ = [
    "OUTCOME_WORDS",
    "STOP_MARKS",
    "STOP_WORDS",
    "SYMBOLS",
    "baseline_result",
    "ci_text",
    "confidence_text",
    "interval_text",
    "outcome",
    "placement_text",
    "ranked",
    "ratio_cell",
    "result_title",
    "styled_ratio",
]

# What a verdict tells the reader, by outcome (outcome()).
SYMBOLS = {"better": "▲", "worse": "▼", "same": "≈", "open": "?", "none": "?"}
OUTCOME_WORDS = {
    "better": "better",
    "worse": "worse",
    "same": "no difference (within ±2 %)",
    "open": "not separated",
    "none": "too few samples to judge",
}
STYLES = {"better": "green", "worse": "red", "same": "yellow", "open": "dim", "none": "dim"}
# Why a result got no more samples (Result.stopped): the mark after its sample count, and its
# words (the page's hover).
STOP_MARKS = {"settled": "✓", "budget": "…", "max-repeat": "…", "planned": "…"}
STOP_WORDS = {
    "settled": "sampling stopped: its answer was settled",
    "budget": "sampling stopped by the time budget with the answer still open",
    "max-repeat": "sampling stopped at --max-repeat with the answer still open",
    "planned": "sampling stopped at the samples its variance planned, the answer still open",
}


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


def ci_text(res: Result, form: str = "half") -> str:
    """A result's median and 95 % interval, one way for every renderer: 'half' is '2,203 ±62%'
    (the median and the interval's larger half), 'range' is '1,370 – 3,570' (its bounds), ''
    without an interval; '–' without a median."""
    if res.median is None:
        return "–"
    if form == "range":
        if res.ci95 is None or not res.median:
            return ""
        return f"{fmt_value(res.ci95[0])} – {fmt_value(res.ci95[1])}"
    half = fmt_halfwidth(res.median, res.ci95)
    return f"{fmt_value(res.median)} {half}" if half else fmt_value(res.median)


def confidence_text(confidence: float) -> str:
    """An interval's confidence in per cent with the digits that keep it below 100 ('99.989'):
    a 100 % interval would promise what no interval can."""
    miss = (1.0 - confidence) * 100
    if miss <= 0:
        return "100"
    digits = max(0, 1 - math.floor(math.log10(miss)))
    return f"{100 - miss:.{digits}f}".rstrip("0").rstrip(".")


def outcome(v: Verdict, higher_is_better: bool) -> str:
    """better | worse | same | open | none: the verdict's mark for this metric's direction."""
    b = v.better(higher_is_better)
    if b is not None:
        return "better" if b else "worse"
    return v.mark if v.mark in ("same", "open") else "none"


def interval_text(v: Verdict) -> str:
    """'1.08–1.24': the interval's bounds rounded outward (units.fmt_bound), '' without one."""
    if v.interval is None:
        return ""
    lo, hi = v.interval
    return f"{fmt_bound(lo, False, v.band)}–{fmt_bound(hi, True, v.band)}"


def ratio_cell(v: Verdict, higher_is_better: bool, interval: bool = True) -> str:
    """'1.16× 1.08–1.24 ▲': the ratio, its interval and the mark the interval gives."""
    if v.ratio is None:
        return "–"
    text = fmt_ratio(v.ratio)
    if interval and v.interval is not None:
        text += " " + interval_text(v)
    return f"{text} {SYMBOLS[outcome(v, higher_is_better)]}"


def styled_ratio(v: Verdict, higher_is_better: bool, interval: bool = True) -> Text:
    """ratio_cell, green better, red worse, yellow ≈, dim open or untested."""
    style = STYLES[outcome(v, higher_is_better)]
    return Text(ratio_cell(v, higher_is_better, interval), style=style)
