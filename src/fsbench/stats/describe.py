"""Statistics over repeated samples: a subject's centre and interval, spread and outliers.
Comparisons between subjects (the ratio, its interval and the ▲/▼/≈ mark) are
fsbench.stats.verdict's alone.

One model with the verdicts: a rate is positive and multiplicative, so a subject's centre is
the geometric mean of its samples (the one a comparison's ratio divides) and its interval is
Student's t on the logarithms, with the variance moderated by the run's prior exactly as the
verdict moderates it: it is never negative, and a printed ratio is the ratio of the printed
centres. The spread's warnings and the outliers stay robust (median, MAD).

The ideas follow pyperf (warn when the stdev exceeds 10 % of the mean, report the median)
and hyperfine (flag statistical outliers and say what to do about them).

Every function is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fsbench.records.notecodes import Note, words
from fsbench.stats.verdict import NO_PRIOR, Prior, log_var


def _t_ppf(q: float, df: float) -> float:
    # scipy.special, not scipy.stats: the same quantile without ~0.4 s of import in every
    # fsbench process (~5 s in an emulated VM guest); only intervals need it.
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


__all__ = [
    "CV_WARN_THRESHOLD",
    "OUTLIER_THRESHOLD",
    "Summary",
    "log_interval",
    "summarize",
]

# Iglewicz & Hoaglin (1993): |modified z| > 3.5 marks a likely outlier.
OUTLIER_THRESHOLD = 3.5
# "1 outlier among 3 samples" is noise: outliers are flagged from this many samples on.
MIN_OUTLIER_N = 5
# 0.6745 is the 0.75 quantile of the standard normal: MAD / 0.6745 estimates sigma.
_MAD_TO_Z = 0.6745
# sqrt(pi/2): for normal data, mean absolute deviation * sqrt(pi/2) estimates sigma.
_MEANAD_TO_SIGMA = 1.253314

# pyperf's rule of thumb: above 10 % the run is too unstable to trust small differences.
CV_WARN_THRESHOLD = 0.10
DEFAULT_TARGET_REL_HALFWIDTH = 0.05

CIMethod = Literal["log-t", "none"]


@dataclass(frozen=True)
class Summary:
    """What a set of repeated samples says, and what to distrust about it.

    ``center`` is the geometric mean (the median where a sample is not positive); ``ci95``
    its 95 % interval (:func:`log_interval`; None with fewer than 2 samples or one that is not
    positive, ``ci_method`` "none").
    ``ci_halfwidth_rel`` is the larger distance from the centre to either end of ``ci95``,
    relative to the centre: a log-scale interval is asymmetric and the larger side is the
    honest "±".
    """

    n: int
    # None: not defined for these samples (none at all, or one for the spread).
    center: float | None = None
    median: float | None = None
    mean: float | None = None
    stdev: float | None = None
    cv: float | None = None
    mad: float | None = None
    ci95: tuple[float, float] | None = None
    ci_halfwidth_rel: float | None = None
    outliers: list[int] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)  # what to distrust, as data (notecodes)
    ci_method: CIMethod = "none"

    @property
    def warnings(self) -> list[str]:
        return [words(n) for n in self.notes]


def _as_array(samples: Sequence[float]) -> np.ndarray:
    x = np.asarray(samples, dtype=float).reshape(-1)
    # A NaN or inf means a broken measurement; silently propagating it would corrupt every
    # statistic, so refuse it and let the caller record the sample as failed.
    if not np.all(np.isfinite(x)):
        raise ValueError("samples must be finite numbers (found NaN or infinity)")
    return x


def log_interval(
    samples: Sequence[float], confidence: float = 0.95, prior: Prior = NO_PRIOR
) -> tuple[float, float] | None:
    """The interval of the geometric mean: Student's t on the logarithms, exponentiated, the
    log variance moderated by ``prior`` as fsbench.stats.verdict moderates it. None with fewer
    than 2 samples or a sample that is not positive (no logarithm)."""
    lv = log_var(samples)
    if lv is None:
        return None
    lx = np.log(np.asarray(samples, dtype=float))
    m = float(lx.mean())
    var, df = prior.moderate(*lv)
    if var == 0.0:
        x = float(np.asarray(samples, dtype=float).reshape(-1)[0])
        return x, x  # exactly, not exp(log(x))
    half = _t_ppf((1.0 + confidence) / 2.0, df) * math.sqrt(var / lx.size)
    return math.exp(m - half), math.exp(min(m + half, 700.0))


def _outliers(x: np.ndarray, med: float, mad: float) -> list[int]:
    dev = x - med
    if mad > 0.0:
        score = _MAD_TO_Z * dev / mad
    else:
        # MAD is 0 whenever more than half the samples are identical, as happens when a
        # coarse timer or a deterministic count quantizes the results. The modified z-score
        # would then be infinite for every differing sample and flag ordinary quantization
        # steps. The mean absolute deviation uses every sample, so it stays > 0 if anything
        # differs; scaled by sqrt(pi/2) it estimates sigma. One lone deviant is then flagged
        # only with n >= 5, and a second sample at the same value is treated as a level,
        # not an outlier.
        mean_ad = float(np.mean(np.abs(dev)))
        if mean_ad == 0.0:
            return []
        score = dev / (_MEANAD_TO_SIGMA * mean_ad)
    return [int(i) for i in np.flatnonzero(np.abs(score) > OUTLIER_THRESHOLD)]


def _spread(
    x: np.ndarray, mean: float, constant: bool, notes: list[Note]
) -> tuple[float | None, float | None]:
    """Sample standard deviation and CV (None for one sample), with their notes."""
    stdev: float | None = None
    cv: float | None = None
    if x.size >= 2:
        # Exactly 0 for identical samples: floating-point rounding in the mean must not
        # invent noise that was never measured.
        stdev = 0.0 if constant else float(np.std(x, ddof=1))
        cv = stdev / abs(mean) if mean != 0.0 else None
    else:
        notes.append(Note(code="one-sample"))
    if cv is not None and cv > CV_WARN_THRESHOLD:
        notes.append(Note(code="cv-high", params={"cv": cv}))
    return stdev, cv


def summarize(
    samples: Sequence[float],
    *,
    target_rel_halfwidth: float = DEFAULT_TARGET_REL_HALFWIDTH,
    prior: Prior = NO_PRIOR,
) -> Summary:
    """Summarize repeated samples of one metric.

    ``stdev`` is the sample standard deviation (ddof=1); ``cv`` is ``stdev / |mean|``;
    ``mad`` is the raw (unscaled) median absolute deviation. ``outliers`` are indices whose
    modified z-score ``0.6745 * (x - median) / MAD`` exceeds 3.5 in absolute value
    (Iglewicz-Hoaglin); when MAD is 0 the score uses the mean absolute deviation instead,
    ``(x - median) / (1.253314 * meanAD)``. ``notes`` are what to distrust, as data
    (``warnings``: in words); the CI one fires when ``ci_halfwidth_rel`` exceeds
    ``target_rel_halfwidth``. ``prior``: the run's variance prior for this subject's kind
    (the interval borrows as the verdict does).
    """
    x = _as_array(samples)
    n = int(x.size)
    if n == 0:
        return Summary(n=0, notes=[Note(code="no-samples")])

    x_sorted = np.sort(x)
    med = float(np.median(x_sorted))
    mean = float(np.mean(x))
    mad = float(np.median(np.abs(x - med)))
    constant = bool(x_sorted[0] == x_sorted[-1])
    notes: list[Note] = []

    stdev, cv = _spread(x, mean, constant, notes)

    # Among fewer than 5 samples no sample can be told from the spread: not flagged.
    outliers = _outliers(x, med, mad) if n >= MIN_OUTLIER_N else []
    if outliers:
        notes.append(Note(code="outliers", params={"indices": outliers, "n": n}))

    center, ci, rel = med, None, None
    if x_sorted[0] > 0:
        center = float(x_sorted[0]) if constant else float(np.exp(np.log(x).mean()))
        # A zero or negative sample has no logarithm: no log-scale interval, and no ratio of
        # such centres is printed either, so the median stands alone, without an interval.
        ci = log_interval(x, 0.95, prior)
    if ci is not None:
        rel = max(center - ci[0], ci[1] - center) / center
        if rel > target_rel_halfwidth:
            params = {"halfwidth_rel": rel, "target_rel": target_rel_halfwidth}
            notes.append(Note(code="ci-wide", params=params))
    return Summary(
        n=n, center=center, median=med, mean=mean, stdev=stdev, cv=cv, mad=mad, ci95=ci,
        ci_halfwidth_rel=rel, outliers=outliers, notes=notes,
        ci_method="log-t" if ci is not None else "none",
    )  # fmt: skip
