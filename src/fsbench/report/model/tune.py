"""The tune record's decisions, made once for every view (terminal, page, markdown, diff):
which comparison of a change is printed, the speed-up a ratio is, the share of the gap a ▲
closes, the best change and the one to use. The views (report/views/tune.py) only format.

The share is read on the time per unit of work: (t_untuned - t_candidate) / (t_untuned -
t_reference), from the centres the gap's comparison divides (the geometric means); a change
not separated (or slower) closes no share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fsbench.records.tunerecord import TuneChange, TuneGap, TuneRecord


class Shown(Protocol):
    """What a change and its confirmation share: the comparison printed, and the centres its
    ratio divides (changed / untuned)."""

    untuned_center: float | None
    center: float | None
    cell: str
    outcome: str
    gain: float | None
    gap_closed: float | None
    interval: list[float] | None
    confidence: float | None


def shown(c: TuneChange) -> Shown:
    """What the tune prints of a change: its confirmation (fresh samples) where it has one."""
    return c.confirmation or c


def speed(ratio: float | None, higher_is_better: bool) -> float | None:
    """other/base as a speed-up: > 1 faster, whatever the metric's direction."""
    if ratio is None or ratio <= 0:
        return None
    return ratio if higher_is_better else 1 / ratio


def gap_closed(gain: float | None, gap: TuneGap | None, outcome: str = "better") -> float | None:
    """The share of the gap to the reference a ▲ closes, on time per unit of work (centres);
    None for a change not separated, the same or slower: it closes no share."""
    if outcome != "better" or gain is None or gap is None:
        return None
    if not gap.subject_center or not gap.reference_center:
        return None
    ref_speed = speed(gap.reference_center / gap.subject_center, gap.higher_is_better)
    if ref_speed is None or ref_speed <= 1.0:
        return None  # the subject is not slower than the reference: no gap to close
    return (1 - 1 / gain) / (1 - 1 / ref_speed)


def best_change(changes: Sequence[TuneChange]) -> TuneChange | None:
    """The change that closes the most of a gap with a ▲ confirmed on fresh samples, and ▼ on
    no workload there (never one measured in a VM: not confirmed on this host)."""
    worse = {c.name for c in changes if c.confirmation and c.confirmation.outcome == "worse"}
    won = [
        c
        for c in changes
        if c.confirmation is not None
        and c.confirmation.outcome == "better"
        and c.name not in worse
        and not c.vm
    ]
    return max(won, key=lambda c: (shown(c).gap_closed or 0.0, shown(c).gain or 0.0),
               default=None)  # fmt: skip


def recommended(t: TuneRecord) -> TuneChange | None:
    """The change to use: the winners together when they are ▲ against the best change alone
    in the same run, else the best single change (a combination not measured against it has
    not shown that the rest adds anything)."""
    single, together = best_change(t.changes), best_change(t.combination)
    if together is not None and (single is None or together.versus_outcome == "better"):
        return together
    return single
