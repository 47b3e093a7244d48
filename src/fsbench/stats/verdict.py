"""The ▲/▼/≈ verdict: one procedure gives a comparison its ratio, its interval and its mark.

It must hold its error rate, agree with its interval and decide what the samples show
(docs/verdicts.md: the why, the simulations, the A/A numbers):

- **Ratio and interval: Welch's t on the logarithms of the samples** (rates are positive,
  skewed, multiplicative): the ratio of geometric means, Welch's interval exponentiated.
- **Variances that borrow strength** (empirical Bayes, Smyth 2004, limma's ``squeezeVar``):
  a ``Prior`` (d0, s0²) fitted to the log variances of the run's cells of one driver kind
  (``fit_prior``) raises a cell to ``(d0·s0² + d·s²)/(d0 + d)`` at ``d0 + d`` degrees; a cell
  above that keeps its own variance, the prior's degrees fading (``Prior.moderate``).
- **Mark from the interval, nothing else:** ▲/▼ exactly when the interval excludes 1, ≈ when
  it lies within the equivalence band (±2 % unless ``--equivalence``), open otherwise.
- **The promise per table**: at most ``alpha`` = 5 % chance of any false ▲/▼ in a workload's
  table and its answer line. A table prints each subject against its baseline and against
  the fastest, a subject the data picks; "slower than the fastest" can be wrong in either
  direction of any pair, so Bonferroni spreads alpha over the k(k − 1) one-sided tails of
  the table's pairs (2 for two subjects) and over the looks at which a verdict may be drawn
  (2 for an adaptive run: after the minimum rounds and at the end; 1 for ``--repeat N``).

Every function is deterministic and needs no random numbers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from fsbench.units import fmt_bound

__all__ = [
    "ALPHA",
    "D0_MAX",
    "NO_PRIOR",
    "SETTLE_BAND",
    "Family",
    "Mark",
    "Prior",
    "Verdict",
    "family_of",
    "fit_prior",
    "judge",
    "log_var",
    "mark_of",
    "prior_of",
    "table_family",
    "table_tails",
    "verdict",
]

# The chance of any false ▲/▼ in one workload's table (and its answer line).
ALPHA = 0.05
# The default equivalence band: an interval within ±2 % of 1 is "no difference that matters".
SETTLE_BAND = 0.02
# The most degrees of freedom a prior may lend: beyond ~20 the t quantile hardly moves, and a
# run of a few cells cannot know its variances better than that.
D0_MAX = 20.0
# The prior's spread is taken at the upper end of its one-sided (1 - this) confidence bound.
# A prior's spread is read at its 75 % upper confidence bound: more (95 %) left the default
# run undecided for no gain in the simulated designs, less let a few cells lend as if exact.
PRIOR_SPREAD_LEVEL = 0.25
# Welch-Satterthwaite's degrees of freedom are trusted from this many samples a side; below,
# the smaller side's own degrees (Hsu's conservative choice). At 4-5 samples a side with
# spreads 4-10x apart Welch's own were still liberal where a table has no slack: 2 subjects,
# fixed n = 4-5, 3/12 %: 5.5-6.2 % false tables (3,000 each); with Hsu's below 6: 3.9-4.5 %.
WELCH_MIN_N = 6
# A cell above its prior's posterior borrows the prior's degrees in part (Prior.moderate),
# fading linearly from all at the posterior to none at this many times it. 2.0 and 1.25 broke
# or neared the promise (2 subjects at 5/15 % from n = 2, adaptive: 5.1 % false tables at
# 1.25, 2.6 % with no borrowing above the posterior, 3.2 % at 1.1; docs/verdicts.md).
BORROW_FADE = 1.1

Mark = Literal["above", "below", "same", "open", "none"]


def table_tails(subjects: int) -> int:
    """One-sided error tails a table of ``subjects`` needs: every ordered pair, k(k − 1).
    A table prints each subject against the baseline and against the fastest; the fastest
    is picked by the data, so "b is slower than the fastest a" can be wrong for any ordered
    pair (a, b) whose tail the data picked. With two subjects: the one pair's two tails."""
    return max(2, subjects * (subjects - 1))


@dataclass(frozen=True)
class Family:
    """The error tails and looks one table's error rate is spread over.

    ``tails`` counts one-sided error tails (a two-sided comparison has two); 0 means
    ``2 * comparisons`` (runs stored before per-table families recorded comparisons).
    ``subjects`` is the table's size when the family is a table's (0: not recorded).
    """

    looks: int = 1
    comparisons: int = 1
    alpha: float = ALPHA
    tails: int = 0
    band: float = SETTLE_BAND
    subjects: int = 0
    # Columns of the table that show marks (the rate; the p99 beside it): one family.
    columns: int = 1
    # The relative resolution of the values judged (fio's latency percentiles are histogram
    # buckets, 1/64 apart): each side's centre is only known within it, so a step between two
    # neighbouring buckets never makes a mark. 0: exact values.
    resolution: float = 0.0

    def __post_init__(self) -> None:
        if (
            self.looks < 1
            or self.comparisons < 1
            or self.columns < 1
            or not 0.0 <= self.resolution < 1.0
            or self.tails < 0
            or not 0.0 < self.alpha < 1.0
            or not 0.0 < self.band < 1.0
        ):
            raise ValueError(f"invalid verdict family: {self}")

    @property
    def n_tails(self) -> int:
        return self.tails or 2 * self.comparisons

    @property
    def miss(self) -> float:
        """Each two-sided interval's chance of missing its true ratio."""
        return 2.0 * self.alpha / (self.looks * self.n_tails)

    @property
    def confidence(self) -> float:
        """Each interval's own (two-sided) confidence: Bonferroni over tails × looks."""
        return 1.0 - self.miss

    def confidence_text(self) -> str:
        """Each interval's confidence in percent, with the digits that keep it below 100
        (99.76, never a rounded "100")."""
        miss = self.miss * 100
        digits = max(0, 1 - math.floor(math.log10(miss)))
        return f"{100 - miss:.{digits}f}".rstrip("0").rstrip(".")

    def spread_text(self) -> str:
        """What alpha is spread over, in words: '28 pairs of 8 × 2 columns × 2 looks'."""
        parts = []
        if self.subjects > 2:
            parts.append(f"{self.subjects * (self.subjects - 1) // 2} pairs of {self.subjects}")
        elif not self.tails and self.comparisons > 1:
            parts.append(f"{self.comparisons} comparisons")
        if self.columns > 1:
            parts.append(f"{self.columns} columns")
        if self.looks > 1:
            parts.append(f"{self.looks} looks")
        return " × ".join(parts)

    def legend(self) -> str:
        """One line for a table's legend: what ▲/▼ promise."""
        spread = self.spread_text()
        over = f" over {spread}" if spread else ""
        scope = "a table" if self.tails else "the run"
        return (
            f"▲/▼ interval excludes 1 (chance of any false ▲/▼ in {scope} ≤ "
            f"{self.alpha * 100:.0f} %{over}: each interval at {self.confidence_text()} %); "
            f"≈ within ±{self.band * 100:g} %; open: not separated (the interval's reach)"
        )

    def record(self) -> dict[str, Any]:
        """What a result stores (Result.verdict_family) so every renderer judges alike."""
        out: dict[str, Any] = {"looks": self.looks, "alpha": self.alpha}
        if self.tails:
            out |= {"tails": self.tails, "subjects": self.subjects, "band": self.band}
        else:
            out["comparisons"] = self.comparisons
        if self.columns > 1:
            out["columns"] = self.columns
        if self.resolution:
            out["resolution"] = self.resolution
        return out

    @classmethod
    def from_record(cls, rec: Mapping[str, Any] | None) -> Family:
        rec = rec or {}
        return cls(
            looks=int(rec.get("looks", 1)),
            comparisons=int(rec.get("comparisons", 1)),
            alpha=float(rec.get("alpha", ALPHA)),
            tails=int(rec.get("tails", 0)),
            band=float(rec.get("band", SETTLE_BAND)),
            subjects=int(rec.get("subjects", 0)),
            columns=int(rec.get("columns", 1)),
            resolution=float(rec.get("resolution", 0.0)),
        )


def table_family(
    subjects: int,
    looks: int = 1,
    alpha: float = ALPHA,
    band: float = SETTLE_BAND,
    columns: int = 1,
) -> Family:
    """The family of one workload's table of ``subjects`` with ``columns`` marked columns
    (the rate, and a latency-bound table's p99): every column's tails share one alpha."""
    return Family(
        looks=looks,
        alpha=alpha,
        tails=columns * table_tails(subjects),
        band=band,
        subjects=subjects,
        columns=columns,
    )


@dataclass(frozen=True)
class Prior:
    """An empirical-Bayes prior of a cell's log-scale variance: ``d0`` degrees of freedom
    at ``s0sq`` (0 degrees: nothing borrowed)."""

    d0: float = 0.0
    s0sq: float = 0.0

    def moderate(self, var: float, df: float) -> tuple[float, float]:
        """(variance, degrees of freedom) of a cell after borrowing. A cell at or below the
        prior's posterior is raised to it, with the prior's degrees added; a cell above it
        keeps its own variance, and of the prior's degrees a share that fades to none at
        BORROW_FADE times the posterior. The prior describes the cells it was fitted to,
        not a subject consistently noisier than they are: lending such a cell the prior's
        degrees judged it at 22 df instead of 2 (9.2 % false tables in a design of 3 subjects
        at 3/3/12 %). Borrowing degrees only where the cell looks no noisier than its
        neighbours was tried too (an F test against the prior): 7 % in a design of 2 subjects
        at 3/12 % over 20 cells."""
        if self.d0 <= 0.0 or df <= 0:
            return var, df
        post = (self.d0 * self.s0sq + df * var) / (self.d0 + df)
        if var <= post:
            return post, df + self.d0
        # Above the posterior: its own variance, the prior's degrees fading (BORROW_FADE). Cut
        # at the posterior, ext4's write (s² 0.0013, prior 0.00127) fell from 18 degrees to 2.
        fade = max(0.0, (BORROW_FADE - var / post) / (BORROW_FADE - 1.0))
        return var, df + self.d0 * fade

    def record(self) -> dict[str, float]:
        return {"d0": round(self.d0, 6), "s0sq": self.s0sq}


NO_PRIOR = Prior()


def log_var(samples: Sequence[float]) -> tuple[float, int] | None:
    """(variance of the logs, its degrees of freedom), None where there is none (fewer than
    two samples, or a sample that is not positive)."""
    x = np.asarray(samples, dtype=float).reshape(-1)
    if x.size < 2 or not np.all(np.isfinite(x)) or np.any(x <= 0):
        return None
    lx = np.log(x)
    return (float(lx.var(ddof=1)) if lx.max() > lx.min() else 0.0), int(x.size - 1)


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Newton's iteration, as limma's trigammaInverse)."""
    from scipy.special import polygamma

    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(polygamma(1, x))
        step = tri * (1.0 - tri / y) / float(polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def _spread_upper(e: np.ndarray, w: np.ndarray, q: float) -> float:
    """The upper confidence bound of the prior's spread tau² of the cells' log variances
    (the Q-profile bound of meta-analysis, Viechtbauer 2007): the tau² at which the cells'
    weighted dispersion Q(tau²) = sum (e - ê)² / (w + tau²) falls to the chi-square quantile
    ``q``. 0 when the cells agree better than their sampling noise predicts."""

    def qstat(tau2: float) -> float:
        wt = 1.0 / (w + tau2)
        mu = float((wt * e).sum() / wt.sum())
        return float((wt * (e - mu) ** 2).sum())

    if qstat(0.0) <= q:
        return 0.0
    lo, hi = 0.0, 1.0
    while qstat(hi) > q:
        hi *= 4.0
        if hi > 1e8:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if qstat(mid) > q else (lo, mid)
    return hi


def fit_prior(cells: Iterable[tuple[float, int]]) -> Prior:
    """The prior of a set of cells' (log variance, df): s0² by limma's ``fitFDist`` moments,
    d0 from an *upper* confidence bound of the cells' spread beyond their sampling noise
    (PRIOR_SPREAD_LEVEL), not its point estimate: from 3-6 cells the moment estimate of that
    spread is often 0, which would take the prior as exact. d0 never exceeds the degrees of
    freedom the cells hold together (a prior cannot know more than its data), nor D0_MAX.
    Fewer than 3 cells with a spread: nothing to borrow."""
    # chdtri, not scipy.stats.chi2.ppf: the same quantile without importing scipy.stats.
    from scipy.special import chdtri, digamma, polygamma

    got = [(v, d) for v, d in cells if d >= 1 and v > 0.0 and math.isfinite(v)]
    if len(got) < 3:
        return NO_PRIOR
    z = np.log([v for v, _ in got])
    half = np.array([d / 2.0 for _, d in got])
    e = z - digamma(half) + np.log(half)
    w = polygamma(1, half)
    tau2 = _spread_upper(e, w, float(chdtri(len(e) - 1, 1.0 - PRIOR_SPREAD_LEVEL)))
    cap = min(D0_MAX, float(sum(d for _, d in got)))
    d0 = cap if tau2 <= 0 else min(cap, 2.0 * _trigamma_inverse(tau2))
    if d0 < 0.5:
        return NO_PRIOR
    emean = float(e.mean())
    s0sq = math.exp(emean + float(digamma(d0 / 2.0)) - math.log(d0 / 2.0))
    return Prior(d0=d0, s0sq=s0sq)


@dataclass(frozen=True)
class Verdict:
    """``other`` against ``baseline``.

    ``ratio`` is other/baseline (ratio of geometric means); ``interval`` its interval at
    ``confidence``; ``mark`` says where the interval lies: ``above``/``below`` 1 (excludes it),
    ``same`` (within the equivalence band), ``open`` (neither: not separated), ``none`` (no
    interval: fewer than 2 samples on a side, or a sample that is not positive).
    """

    ratio: float | None
    interval: tuple[float, float] | None
    confidence: float
    mark: Mark
    n: tuple[int, int] = (0, 0)
    df: float | None = None
    band: float = SETTLE_BAND  # the equivalence band the mark was read at

    @property
    def decided(self) -> bool:
        """No more samples can change what the user is told (▲, ▼ or ≈)."""
        return self.mark in ("above", "below", "same")

    def inverse(self) -> Verdict:
        """The same comparison the other way round (baseline against other)."""
        flip: dict[str, Mark] = {"above": "below", "below": "above"}
        return replace(
            self,
            ratio=None if not self.ratio else 1.0 / self.ratio,
            interval=None if self.interval is None else _inv(self.interval),
            mark=flip.get(self.mark, self.mark),
            n=(self.n[1], self.n[0]),
        )

    def better(self, higher_is_better: bool) -> bool | None:
        """True ▲ (better than the baseline), False ▼, None neither."""
        if self.mark == "above":
            return higher_is_better
        if self.mark == "below":
            return not higher_is_better
        return None

    def reach(self) -> str:
        """The interval as a reach, '×0.80–1.25' ('' without one)."""
        if self.interval is None:
            return ""
        lo, hi = self.interval
        return f"×{fmt_bound(lo, False, self.band)}–{fmt_bound(hi, True, self.band)}"

    def words(self) -> str:
        """What the mark says, in words: 'not separated: within ×0.80–1.25' for an open
        comparison (what it is, not a '?')."""
        if self.mark == "open":
            return f"not separated: within {self.reach()}"
        if self.mark == "same":
            return f"the same: within {self.reach()}"
        if self.mark == "none":
            return "not compared: fewer than 2 samples"
        return ("above" if self.mark == "above" else "below") + f": {self.reach()}"


def _inv(iv: tuple[float, float]) -> tuple[float, float]:
    lo, hi = iv
    return (1.0 / hi if hi else math.inf), (1.0 / lo if lo else math.inf)


def mark_of(interval: tuple[float, float] | None, band: float = SETTLE_BAND) -> Mark:
    """The mark an interval gives: the one rule, used by everything that prints a mark."""
    if interval is None:
        return "none"
    lo, hi = interval
    if lo > 1.0:
        return "above"
    if hi < 1.0:
        return "below"
    if lo >= 1.0 - band and hi <= 1.0 + band:
        return "same"
    return "open"


@functools.cache
def _t_quantile(p: float, df: float) -> float:
    # scipy costs ~2 s to import, so only intervals import it; a report asks for the same
    # quantiles many times.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def critical(fam: Family, df: float) -> float:
    """A comparison's standard errors to its interval's end at ``df`` degrees: Student's t at
    the family's Bonferroni level (the plan, decide.planned_n, counts with it too)."""
    return _t_quantile(1.0 - (1.0 - fam.confidence) / 2.0, round(df, 6))


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def verdict(
    baseline: Sequence[float],
    other: Sequence[float],
    family: Family | None = None,
    prior_a: Prior = NO_PRIOR,
    prior_b: Prior = NO_PRIOR,
) -> Verdict:
    """The procedure (module docstring) on two sets of samples; ``prior_a``/``prior_b`` are
    the baseline's and the other's variance priors (their driver kind's, in the run)."""
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
    raw_a = float(la.var(ddof=1)) if la.max() > la.min() else 0.0
    raw_b = float(lb.var(ddof=1)) if lb.max() > lb.min() else 0.0
    va, dfa = prior_a.moderate(raw_a, a.size - 1)
    vb, dfb = prior_b.moderate(raw_b, b.size - 1)
    res, reach = resolution_of(a, b, fam.resolution)
    h = math.log1p(res)
    off = 0.0  # how far the centres' difference may be off by rounding alone
    # A side whose spread is below the resolution (its samples tie, or sit in two neighbouring
    # buckets) has a spread below it, not zero, and a centre known only within it: its
    # variance is at least the rounding's reach squared, at its own degrees, and the interval
    # is widened by that reach. Two cells of fio's p99, each in one bucket and a few buckets
    # apart, were judged exact: 8.6 % false tables in a design of 12 subjects at n = 2 (0.5 %
    # without the p99 column). A side spread over several steps carries its rounding in its
    # variance already (Sheppard).
    if h and raw_a < h * h:
        va, dfa, off = max(va, (reach * h) ** 2), max(dfa, a.size - 1), off + reach * h
    if h and raw_b < h * h:
        vb, dfb, off = max(vb, (reach * h) ** 2), max(dfb, b.size - 1), off + reach * h
    qa, qb = va / a.size, vb / b.size
    se = math.sqrt(qa + qb)
    df = None
    half = 0.0  # both sides constant (and nothing borrowed): the ratio exact but for rounding
    if se > 0.0:
        df = welch_df(qa, dfa, qb, dfb, small=min(a.size, b.size) < WELCH_MIN_N)
        half = critical(fam, df) * se
    half += off
    # Two samples at a high confidence can give a bound beyond floating point: infinity.
    interval = (_exp(diff - half), _exp(diff + half))
    mark = mark_of(interval, fam.band)
    return Verdict(
        ratio=ratio, interval=interval, confidence=conf, mark=mark, n=n, df=df, band=fam.band
    )


def resolution_of(a: np.ndarray, b: np.ndarray, declared: float = 0.0) -> tuple[float, float]:
    """(relative resolution, the part of a step a side's centre may be off by). Declared
    (fio's buckets: each value its bucket's lower edge): a whole step. Else, where a side's
    samples tie (values rounded to digits: dd's "1.2 GB/s", a count), the finest decimal
    place the values are written in, over the smallest value, rounded to the nearest: half a
    step. Samples that never tie (the lab's rates, quotients of floats) are exact: (0, 0)."""
    if declared:
        return declared, 1.0
    if np.unique(a).size == a.size and np.unique(b).size == b.size:
        return 0.0, 0.0
    x = np.concatenate([a, b])
    step = min(_decimal_step(float(v)) for v in x)
    return min(0.5, step / float(x.min())), 0.5


def _decimal_step(v: float) -> float:
    """The place of the last digit v is written to (1.25: 0.01), never above units: 1200 may
    be a count to the unit as well as a figure rounded to hundreds."""
    for k in range(0, -10, -1):
        q = 10.0**k
        if q <= v and abs(v / q - round(v / q)) < 1e-9 * max(1.0, v / q):
            return q
    return 0.0


def welch_df(qa: float, dfa: float, qb: float, dfb: float, small: bool = False) -> float:
    """The degrees of freedom of a difference of two means whose squared standard errors
    ``qa``, ``qb`` have ``dfa``, ``dfb`` degrees of freedom (a constant side contributes
    none): Welch-Satterthwaite's estimate. With ``small`` (fewer than WELCH_MIN_N samples on
    a side) no more than the smaller side's own: at 2-5 samples the estimate comes from the
    same sample variances as the t and is too large exactly when the noisier side looked quiet
    (5.2-7.4 % false tables at a nominal 5 % with spreads 4-10x apart at 2-3 samples, 5.4-6.2 %
    at 4-5); Hsu's bound is conservative there."""
    if not qa:
        return dfb
    if not qb:
        return dfa
    ws = (qa + qb) ** 2 / (qa * qa / dfa + qb * qb / dfb)
    return min(ws, dfa, dfb) if small else ws


def prior_of(res: Any) -> Prior:
    """The variance prior a result recorded (``Result.verdict_family``), none before."""
    rec = getattr(res, "verdict_family", None) or {}
    return Prior(d0=float(rec.get("d0", 0.0)), s0sq=float(rec.get("s0sq", 0.0)))


def judge(base: Any, res: Any, family: Family | None = None) -> Verdict:
    """The verdict of a result against another of its table, at the family and priors the
    run recorded on the results (``Result.verdict_family``), else ``family``, else one
    comparison at one look (a run stored before verdicts had families)."""
    fam = family
    stored = getattr(res, "verdict_family", None)
    if fam is None and stored:
        fam = Family.from_record(stored)
    return verdict(base.samples, res.samples, fam, prior_of(base), prior_of(res))


def family_of(run: Any) -> Family:
    """The family a run recorded for its largest table (``Run.schedule.verdict``): what its
    legend states; one look at one comparison for a run stored before families."""
    v = getattr(getattr(run, "schedule", None), "verdict", None) or {}
    return Family.from_record(v)
