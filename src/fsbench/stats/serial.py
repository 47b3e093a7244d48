"""Do a subject's samples depend on the one before them?

Every interval fsbench prints treats a subject's samples as independent given the subject. Two
things break that differently. An effect a round shares with every subject of its table (the
machine slower for everyone for a while) makes samples depend on their neighbours, but it
widens both sides of a comparison: the verdicts pay in power, never in false marks. A subject
that wanders on its own (each sample near the one before, whatever the others do) is what no
interval from one run's samples covers (docs/verdicts.md). So the statistic is the lag-1
autocorrelation of each cell's log samples after the effect its round shares with the table's
other cells, plus 1/n (its bias under independence), pooled over cells weighted by their
samples; under independence it is about normal with standard error 1/sqrt(total samples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 4  # a cell's lag-1 from fewer is noise
# Flag only what is both clear (z) and large enough to matter for an interval: a lag-1 of
# 0.25 makes the variance of a mean of 10 samples about 1.5x what independence assumes.
Z_FLAG, R_FLAG = 3.0, 0.25


@dataclass(frozen=True)
class Serial:
    r: float  # pooled lag-1 autocorrelation after the rounds' shared effect (bias-corrected)
    z: float  # r over its standard error under independence
    cells: int
    samples: int

    @property
    def flagged(self) -> bool:
        return self.cells >= 3 and self.z > Z_FLAG and self.r > R_FLAG

    def words(self) -> str:
        return (
            f"samples depend on the one before them (lag-1 autocorrelation {self.r:+.2f} after "
            f"each round's shared effect, {self.cells} cells): the intervals assume independent "
            "samples and may be too narrow"
        )


def _lag1(x: np.ndarray) -> float | None:
    e = x - x.mean()
    ss = float((e * e).sum())
    if ss <= 0.0:
        return None
    return float((e[:-1] * e[1:]).sum()) / ss + 1.0 / len(e)


def _logs(cells: Sequence[Sequence[float]]) -> list[np.ndarray]:
    return [np.log(np.asarray(c, dtype=float)) for c in cells if len(c) and min(c) > 0]


def round_adjusted(cells: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Each cell's log samples (index = round) less the mean deviation of the round's cells
    from their own means (where at least two cells have that round)."""
    logs = _logs(cells)
    width = max((len(c) for c in logs), default=0)
    shared = np.zeros(width)
    for i in range(width):
        dev = [float(c[i] - c.mean()) for c in logs if len(c) > i]
        if len(dev) >= 2:
            shared[i] = float(np.mean(dev))
    return [c - shared[: len(c)] for c in logs]


def serial(tables: Iterable[Sequence[Sequence[float]]], adjust: bool = True) -> Serial:
    """The statistic over tables, each a list of cells (a subject's samples in round order).
    ``adjust=False``: raw, the rounds' shared effect left in."""
    num = 0.0
    cells = samples = 0
    for table in tables:
        logs = round_adjusted(table) if adjust else _logs(table)
        for x in logs:
            if len(x) < MIN_SAMPLES:
                continue
            r = _lag1(x)
            if r is None:
                continue
            num += r * len(x)
            cells += 1
            samples += len(x)
    if not samples:
        return Serial(0.0, 0.0, 0, 0)
    r = num / samples
    return Serial(r=r, z=r * math.sqrt(samples), cells=cells, samples=samples)


# A round whose every cell (at least this many) moved the same way, by this much on average
# (log: 1.22x), is the machine changing speed, not a subject: with 4 cells and no such effect
# all signs agree by chance 1 time in 8, and the size bound leaves the ordinary wobble out.
STALL_CELLS, STALL_LOG = 4, 0.2


@dataclass(frozen=True)
class Stall:
    round: int  # 0-based index of the round in every cell's samples
    low: float  # the smallest and largest sample/median of that round over the cells
    high: float
    cells: int
    depth: float = 0.0  # the mean log move of the round's samples from their medians


def stalls(cells: Sequence[Sequence[float]], worse: int = 0) -> list[Stall]:
    """The rounds of a table (cells: each subject's samples in round order) in which every
    cell's sample moved the same way from its own median, by STALL_LOG on average: an
    effect the round shared (the intervals, unpaired, carry it; docs/verdicts.md).
    ``worse``: -1 only rounds that moved every sample down, +1 up, 0 either way."""
    logs = [c for c in _logs(cells) if len(c) >= 3]
    out = []
    for i in range(max((len(c) for c in logs), default=0)):
        # From each cell's median: one deep stall pulls a mean so far that every other
        # round would look shared the other way.
        dev = np.array([float(c[i] - np.median(c)) for c in logs if len(c) > i])
        if dev.size < STALL_CELLS or abs(float(dev.mean())) < STALL_LOG:
            continue
        if (worse >= 0 and (dev > 0).all()) or (worse <= 0 and (dev < 0).all()):
            ratios = np.exp(dev)
            out.append(
                Stall(i, float(ratios.min()), float(ratios.max()), int(dev.size), float(dev.mean()))
            )
    return out
