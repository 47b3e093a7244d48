"""The ▲/▼/≈ verdict: one procedure gives a comparison its ratio, its interval and its mark.

A user switches file systems on this mark, so it must hold its error rate and never disagree
with the interval printed beside it. The procedure:

- **Ratio and interval: Welch's t on the logarithms of the samples.** Rates are positive,
  right-skewed and multiplicative (a stall halves a sample, nothing doubles it), so their logs
  are close to symmetric and a ratio becomes a difference. The estimate is the ratio of the
  geometric means, ``exp(mean(log b) - mean(log a))``; the interval is Welch's interval of the
  difference of mean logs, exponentiated. Welch allows the two sides different spreads (a FUSE
  driver's samples spread 10x more than a kernel driver's). Why not the alternatives, at the
  3-10 samples a run takes: a percentile bootstrap of medians undercovers badly (at n = 3 a
  resampled median takes only 3 values; that interval let a 0.82x false verdict through),
  and rank methods cannot reach the confidence needed (Mann-Whitney's smallest two-sided p at
  3 against 3 is 0.10, so a tenfold difference was "not significant" at n = 3). An outlier
  widens the t interval (the mark then stays open) rather than moving it.
- **Mark from the interval, nothing else:** ▲/▼ exactly when the interval excludes 1, ≈ when it
  lies within the settle band (±2 %), open otherwise. The same interval decides stopping.
- **Its error rate kept under adaptive stopping and many comparisons: Bonferroni over both.**
  Every interval is made at confidence ``1 - alpha / (looks * comparisons)``: ``looks`` is the
  number of rounds at which the schedule may stop or report (1 for ``--repeat N``; for
  ``--repeat auto`` every round from the minimum to ``--max-repeat``), ``comparisons`` the
  number of pairs of subjects per workload, summed over the run's workloads (every pair, since
  the answer line compares each subject with the fastest, which the data picks). By the union
  bound, the chance that any interval of the run at any look misses its true ratio is at most
  ``alpha``, whatever the stopping rule does with them, so the chance of any false ▲/▼ in the
  whole run (the family-wise error rate) is at most ``alpha`` = 5 %. Bonferroni is conservative
  (looks on growing data are correlated), which costs samples, not correctness; a
  group-sequential boundary would need equal spacing and normality this data does not promise.

Every function is deterministic and needs no random numbers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "ALPHA",
    "SETTLE_BAND",
    "Family",
    "Mark",
    "Verdict",
    "family_of",
    "judge",
    "verdict",
]

# The family-wise rate of false ▲/▼ a run promises.
ALPHA = 0.05
# An interval within ±2 % of 1 is "no difference that matters": ≈, and settled.
SETTLE_BAND = 0.02

Mark = Literal["above", "below", "same", "open", "none"]


@dataclass(frozen=True)
class Family:
    """The comparisons and looks one run's error rate is spread over."""

    looks: int = 1
    comparisons: int = 1
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if self.looks < 1 or self.comparisons < 1 or not 0.0 < self.alpha < 1.0:
            raise ValueError(f"invalid verdict family: {self}")

    @property
    def confidence(self) -> float:
        """Each interval's own confidence (Bonferroni over looks × comparisons)."""
        return 1.0 - self.alpha / (self.looks * self.comparisons)

    def confidence_text(self) -> str:
        """Each interval's confidence in percent, with the digits that keep it below 100
        (99.989, never a rounded "100")."""
        miss = self.alpha / (self.looks * self.comparisons) * 100
        digits = max(0, 1 - math.floor(math.log10(miss)))
        return f"{100 - miss:.{digits}f}".rstrip("0").rstrip(".")

    def legend(self) -> str:
        """One line for a table's legend: what ▲/▼ promise."""
        spread = []
        if self.comparisons > 1:
            spread.append(f"{self.comparisons} comparisons")
        if self.looks > 1:
            spread.append(f"{self.looks} looks")
        over = f" over {' × '.join(spread)}" if spread else ""
        return (
            f"▲/▼ interval excludes 1 (chance of any false ▲/▼ in the run ≤ "
            f"{self.alpha * 100:.0f} %{over}: each interval at {self.confidence_text()} %); "
            f"≈ within ±{SETTLE_BAND * 100:.0f} %; ? open (not decided)"
        )


@dataclass(frozen=True)
class Verdict:
    """``other`` against ``baseline``.

    ``ratio`` is other/baseline (ratio of geometric means); ``interval`` its interval at
    ``confidence``; ``mark`` says where the interval lies: ``above``/``below`` 1 (excludes it),
    ``same`` (within the settle band), ``open`` (neither), ``none`` (no interval: fewer than 2
    samples on a side, or a sample that is not positive).
    """

    ratio: float | None
    interval: tuple[float, float] | None
    confidence: float
    mark: Mark
    n: tuple[int, int] = (0, 0)

    @property
    def decided(self) -> bool:
        """No more samples can change what the user is told (▲, ▼ or ≈)."""
        return self.mark in ("above", "below", "same")

    def better(self, higher_is_better: bool) -> bool | None:
        """True ▲ (better than the baseline), False ▼, None neither."""
        if self.mark == "above":
            return higher_is_better
        if self.mark == "below":
            return not higher_is_better
        return None


def mark_of(interval: tuple[float, float] | None) -> Mark:
    """The mark an interval gives: the one rule, used by everything that prints a mark."""
    if interval is None:
        return "none"
    lo, hi = interval
    if lo > 1.0:
        return "above"
    if hi < 1.0:
        return "below"
    if lo >= 1.0 - SETTLE_BAND and hi <= 1.0 + SETTLE_BAND:
        return "same"
    return "open"


@functools.cache
def _t_quantile(p: float, df: float) -> float:
    # scipy costs ~2 s to import, so only intervals import it; a report asks for the same
    # quantiles many times.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def verdict(
    baseline: Sequence[float], other: Sequence[float], family: Family | None = None
) -> Verdict:
    """The procedure (module docstring) on two sets of samples."""
    fam = family or Family()
    conf = fam.confidence
    a = np.asarray(baseline, dtype=float).reshape(-1)
    b = np.asarray(other, dtype=float).reshape(-1)
    n = (int(a.size), int(b.size))
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("samples must be finite numbers (found NaN or infinity)")
    if a.size == 0 or b.size == 0 or np.any(a <= 0) or np.any(b <= 0):
        ratio = None
        if a.size and b.size and np.median(a) > 0:
            ratio = float(np.median(b) / np.median(a))
        return Verdict(ratio=ratio, interval=None, confidence=conf, mark="none", n=n)
    la, lb = np.log(a), np.log(b)
    diff = float(lb.mean() - la.mean())
    ratio = math.exp(diff)
    if a.size < 2 or b.size < 2:
        return Verdict(ratio=ratio, interval=None, confidence=conf, mark="none", n=n)
    va = float(la.var(ddof=1)) if la.max() > la.min() else 0.0
    vb = float(lb.var(ddof=1)) if lb.max() > lb.min() else 0.0
    qa, qb = va / a.size, vb / b.size
    se = math.sqrt(qa + qb)
    if se == 0.0:
        # Both sides constant: the measurement is deterministic, the ratio exact.
        interval = (ratio, ratio)
    else:
        # Welch-Satterthwaite degrees of freedom (a constant side contributes none).
        den = (qa * qa / (a.size - 1) if qa else 0.0) + (qb * qb / (b.size - 1) if qb else 0.0)
        df = (qa + qb) ** 2 / den
        half = _t_quantile(1.0 - (1.0 - conf) / 2.0, df) * se
        # Two samples at a high confidence can give a bound beyond floating point: infinity.
        interval = (_exp(diff - half), _exp(diff + half))
    return Verdict(ratio=ratio, interval=interval, confidence=conf, mark=mark_of(interval), n=n)


def judge(base, res, family: Family | None = None) -> Verdict:
    """The verdict of a result against its workload's baseline result, at the family the run
    recorded on the result (``Result.verdict_family``), else ``family``, else one comparison
    at one look (a run stored before verdicts had families)."""
    fam = family
    stored = getattr(res, "verdict_family", None)
    if fam is None and stored:
        fam = Family(
            looks=int(stored.get("looks", 1)),
            comparisons=int(stored.get("comparisons", 1)),
            alpha=float(stored.get("alpha", ALPHA)),
        )
    return verdict(base.samples, res.samples, fam)


def family_of(run) -> Family:
    """The family a run recorded (``Run.schedule.verdict``); one look at one comparison for a
    run stored before it did."""
    v = getattr(getattr(run, "schedule", None), "verdict", None) or {}
    return Family(
        looks=int(v.get("looks", 1)),
        comparisons=int(v.get("comparisons", 1)),
        alpha=float(v.get("alpha", ALPHA)),
    )
