"""Known-value tests for fsbench.stats.describe: every expected number is derived by hand below."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsbench.stats.describe import summarize

# t_{0.975} quantiles from a printed Student-t table (df = 1..4).
T975 = {
    1: 12.706204736174707,
    2: 4.302652729749464,
    3: 3.182446305284263,
    4: 2.7764451051977987,
    5: 2.5705818366147395,
}


# --- summarize: degenerate sizes -------------------------------------------------------------


def test_empty() -> None:
    s = summarize([])
    assert s.n == 0
    assert s.median is None and s.mean is None and s.stdev is None and s.cv is None
    assert s.mad is None and s.ci95 is None and s.ci_halfwidth_rel is None
    assert s.outliers == []
    assert s.warnings == ["no samples: nothing was measured"]
    assert s.ci_method == "none"


def test_single_sample_has_no_ci_and_says_what_to_do() -> None:
    s = summarize([42.5])
    assert s.n == 1
    assert s.median == 42.5 and s.mean == 42.5
    assert s.stdev is None and s.cv is None
    assert s.mad == 0.0
    assert s.ci95 is None and s.ci_halfwidth_rel is None
    assert s.outliers == []
    assert s.warnings == ["only 1 sample: no confidence interval; use --repeat 3 or more"]


def test_all_equal_samples() -> None:
    s = summarize([0.1, 0.1, 0.1, 0.1])
    assert s.median == 0.1
    assert s.stdev == 0.0  # exactly: rounding in the mean must not invent noise
    assert s.cv == 0.0
    assert s.mad == 0.0
    assert s.outliers == []
    assert s.ci95 == (0.1, 0.1)
    assert s.ci_halfwidth_rel == 0.0
    assert s.warnings == []


def test_all_equal_large_n_is_exact() -> None:
    s = summarize([7.0] * 12)
    assert s.ci_method == "log-t"
    assert s.center == 7.0
    assert s.ci95 == (7.0, 7.0)
    assert s.ci_halfwidth_rel == 0.0


def test_non_finite_samples_are_rejected() -> None:
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("inf")])


# --- summarize: basic statistics --------------------------------------------------------------


def test_basic_statistics_known_values() -> None:
    # median 3, mean 3, deviations -2..2: s^2 = (4+1+0+1+4)/4 = 2.5, MAD = median(2,1,0,1,2) = 1.
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert s.n == 5
    assert s.median == 3.0
    assert s.mean == 3.0
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert s.cv == pytest.approx(math.sqrt(2.5) / 3.0)
    assert s.mad == 1.0


def test_cv_none_when_mean_zero() -> None:
    s = summarize([-1.0, 1.0])
    assert s.stdev == pytest.approx(math.sqrt(2.0))
    assert s.cv is None


def test_cv_warning_text() -> None:
    # mean 100, stdev sqrt((144 + 0 + 144) / 2) = 12 -> CV 12 %.
    s = summarize([88.0, 100.0, 112.0])
    assert s.cv == pytest.approx(0.12)
    cv_warnings = [w for w in s.warnings if w.startswith("CV")]
    assert cv_warnings == ["CV is 12.0 % of the mean: the machine may be busy"]
    # The note as data: its code and the CV itself; the report says the advice per table.
    assert [n.params for n in s.notes if n.code == "cv-high"] == [{"cv": pytest.approx(0.12)}]


def test_cv_at_threshold_does_not_warn() -> None:
    # stdev 10 on mean 100: exactly pyperf's 10 %, which is not above it.
    s = summarize([90.0, 100.0, 110.0])
    assert s.cv == pytest.approx(0.10)
    assert not any(w.startswith("CV") for w in s.warnings)


# --- outliers ----------------------------------------------------------------------------------


def test_obvious_outlier_is_flagged() -> None:
    # sorted 9.9, 10, 10.05, 10.1, 30: median 10.05; |dev| 0.05, 0.05, 0.15, 0.05, 19.95 so
    # MAD = 0.05. M(30) = 0.6745 * 19.95 / 0.05 = 269; M(9.9) = 0.6745 * 0.15 / 0.05 = 2.02.
    s = summarize([10.0, 10.1, 9.9, 10.05, 30.0])
    assert s.median == 10.05
    assert s.mad == pytest.approx(0.05)
    assert s.outliers == [4]
    assert "1 outlier among 5 samples (index 4)" in "\n".join(s.warnings)


def test_two_outliers_warning_lists_indices() -> None:
    # median 10, MAD 0.1; 3 and 25 are ~47 and ~101 modified-z units away.
    s = summarize([10.0, 3.0, 10.1, 9.9, 25.0, 10.0, 10.1, 9.9])
    assert s.outliers == [1, 4]
    assert any(w.startswith("2 outliers among 8 samples (indices 1, 4)") for w in s.warnings)


def test_modified_z_threshold_boundary() -> None:
    # With x = 10 + d: median 10, |dev| = 1,1,0,1,1,0,d so MAD = 1 and M = 0.6745 * d:
    # d = 5 -> 3.37 (kept), d = 5.3 -> 3.57 (flagged).
    base = [9.0, 11.0, 10.0, 9.0, 11.0, 10.0]
    assert summarize([*base, 15.0]).outliers == []
    assert summarize([*base, 15.3]).outliers == [6]


def test_mad_zero_lone_deviant_flagged_via_mean_absolute_deviation() -> None:
    # MAD = 0. meanAD = 2/5 = 0.4; score = 2 / (1.253314 * 0.4) = 3.99 > 3.5.
    s = summarize([10.0, 10.0, 10.0, 10.0, 12.0])
    assert s.mad == 0.0
    assert s.outliers == [4]


def test_mad_zero_lone_deviant_not_flagged_with_four_samples() -> None:
    # MAD = 0. meanAD = 2/4 = 0.5; score = 2 / (1.253314 * 0.5) = 3.19 <= 3.5.
    s = summarize([10.0, 10.0, 10.0, 12.0])
    assert s.mad == 0.0
    assert s.outliers == []


def test_mad_zero_two_samples_at_same_level_are_not_outliers() -> None:
    # MAD = 0. meanAD = 4/7; score = 2 / (1.253314 * 4/7) = 2.79: a quantization level.
    s = summarize([10.0, 10.0, 12.0, 10.0, 10.0, 12.0, 10.0])
    assert s.mad == 0.0
    assert s.outliers == []


# --- the interval: the geometric mean's, on the log scale -------------------------------------


def test_summary_ci_is_the_geometric_means_on_the_log_scale() -> None:
    """The centre is the geometric mean (what a ratio divides); its interval is Student's t
    on the logs, exponentiated: asymmetric, never negative, the larger side the honest ±."""
    xs = [10.0, 11.0, 12.0, 13.0, 14.0, 20.0]
    s = summarize(xs)
    lx = np.log(xs)
    half = T975[5] * lx.std(ddof=1) / math.sqrt(6)
    assert s.ci_method == "log-t"
    assert s.center == pytest.approx(math.exp(lx.mean()))
    assert s.ci95 == pytest.approx((math.exp(lx.mean() - half), math.exp(lx.mean() + half)))
    assert s.ci_halfwidth_rel == pytest.approx(math.exp(half) - 1)
    # The default run's lowntfs-3g (122 MiB/s, linear interval -13.5 – 258): positive now.
    wide = summarize([40.0, 122.0, 205.0])
    assert wide.ci95 is not None and wide.ci95[0] > 0


def test_ci_warning_respects_target() -> None:
    # n = 3 around 100, log sd ~0.01: half = 4.3027 * 0.01 / sqrt(3) -> ~2.5 % above.
    samples = [99.0, 100.0, 101.0]
    s = summarize(samples)
    assert s.ci_method == "log-t"
    half = T975[2] * float(np.log(samples).std(ddof=1)) / math.sqrt(3)
    assert s.ci_halfwidth_rel == pytest.approx(math.exp(half) - 1)
    assert s.warnings == []
    tight = summarize(samples, target_rel_halfwidth=0.02)
    assert tight.warnings == [
        "confidence interval is ±2.5 % of the median, wider than the 2.0 % target"
    ]
    assert tight.notes[0].code == "ci-wide" and tight.notes[0].params["target_rel"] == 0.02


def test_no_interval_where_a_sample_is_not_positive() -> None:
    """No logarithm, no log-scale interval (and no ratio of such centres): the median stands
    alone, with no second kind of interval beside the geometric mean's."""
    s = summarize([-1.0, 0.0, 1.0])
    assert s.center == s.median == 0.0
    assert s.ci95 is None and s.ci_halfwidth_rel is None and s.ci_method == "none"
    assert not any(n.code == "ci-wide" for n in s.notes)
    z = summarize([0.0, 4.0, 5.0, 6.0])
    assert z.center == 4.5 and z.ci95 is None


def test_no_outlier_is_flagged_among_fewer_than_five_samples() -> None:
    """At n = 3 one stalled sample cannot be told from spread: no "1 outlier among 3"."""
    s = summarize([100.0, 100.5, 40.0])
    assert s.outliers == [] and not any("outlier" in w for w in s.warnings)
    assert summarize([100.0, 100.5, 99.5, 100.2, 40.0]).outliers == [4]
