"""The ▲/▼/≈ verdict (fsbench.stats.verdict): one procedure for the interval and the mark, an error
rate kept across looks and comparisons, and a seeded, recorded round order."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from test_runner import _by_subject, _runner

from fsbench.schedule.runner import Runner
from fsbench.stats.verdict import SETTLE_BAND, Family, judge, mark_of, table_family, verdict
from fsbench.workloads.fake import FakeWorkload


def test_the_mark_is_exactly_where_the_interval_lies() -> None:
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(600):
        n_a, n_b = rng.integers(2, 9, size=2)
        ratio = float(np.exp(rng.normal(0, 0.3)))
        cv = float(rng.choice([0.005, 0.03, 0.1, 0.3]))
        a = 100 * np.exp(rng.normal(0, cv, n_a))
        b = 100 * ratio * np.exp(rng.normal(0, cv, n_b))
        v = verdict(a, b, Family(looks=int(rng.integers(1, 9)), comparisons=3))
        assert v.interval is not None and v.ratio is not None
        lo, hi = v.interval
        assert lo <= v.ratio <= hi
        expected = (
            "above"
            if lo > 1
            else "below"
            if hi < 1
            else "same"
            if lo >= 1 - SETTLE_BAND and hi <= 1 + SETTLE_BAND
            else "open"
        )
        assert v.mark == expected == mark_of(v.interval)
        assert v.decided == (expected != "open")
        seen.add(v.mark)
    assert seen == {"above", "below", "same", "open"}


def test_a_tenfold_difference_at_three_samples_is_marked() -> None:
    """The issue's seed-002 run (--repeat 3, one comparison): every big_writes sample 3.7x or
    more above every plain one was "9.63× ±61 % ≈" under the old test; its interval excludes 1
    (at 3 samples a side the smaller side's 2 degrees of freedom, Hsu's bound: 1.86-34)."""
    v = verdict([40.9, 52.6, 48.8], [196.8, 576.4, 470.2], Family())
    assert v.mark == "above" and v.better(True) is True
    assert v.interval is not None and v.interval[0] > 1.5 and v.df == 2
    assert v.confidence == pytest.approx(0.95)


def test_the_family_spreads_alpha_over_looks_and_tails() -> None:
    # A run stored with an all-pairs family ({looks, comparisons}) is judged as it was.
    assert Family(looks=8, comparisons=14).confidence == pytest.approx(1 - 0.05 / 112)
    # A table of 8 subjects: 56 ordered pairs' tails, 2 looks.
    fam = table_family(8, looks=2)
    assert fam.n_tails == 56 and fam.confidence == pytest.approx(1 - 2 * 0.05 / (56 * 2))
    assert table_family(2).confidence == pytest.approx(0.95)  # one pair, one look
    a, b = [100.0, 104.0, 97.0, 101.0], [90.0, 93.0, 88.0, 92.0]
    one = verdict(a, b, Family())
    many = verdict(a, b, fam)
    assert one.interval and many.interval
    assert many.interval[0] < one.interval[0] and many.interval[1] > one.interval[1]
    assert "any false ▲/▼ in a table ≤ 5 %" in fam.legend()
    assert "28 pairs of 8 × 2 looks" in fam.legend()
    assert "14 comparisons × 8 looks" in Family(looks=8, comparisons=14).legend()
    assert Family.from_record(fam.record()) == fam
    assert "±5 %" in table_family(3, band=0.05).legend()


def test_the_legend_never_rounds_a_confidence_to_100() -> None:
    # 56 comparisons × 8 looks: 99.989 %, which three significant digits showed as "100 %".
    assert Family(looks=8, comparisons=56).confidence_text() == "99.989"
    assert "each interval at 99.989 %" in Family(looks=8, comparisons=56).legend()
    assert Family(comparisons=2).confidence_text() == "97.5"
    assert Family().confidence_text() == "95"


def test_an_open_comparison_says_what_it_is() -> None:
    v = verdict([100.0, 104.0, 97.0], [99.0, 108.0, 92.0])
    assert v.mark == "open" and v.words().startswith("not separated: within ×")
    lo, hi = v.interval or (0, 0)
    assert lo < 1 < hi
    assert verdict([100.0, 101.0, 99.0], [50.0, 51.0, 49.0]).words().startswith("below: ×0.")


def test_the_equivalence_band_decides_the_same_mark() -> None:
    # An interval across 1 that lies within ±5 % but not ±2 % (0.985–1.023): the band decides.
    a, b = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5], [100.5, 102.5, 98.5, 101.5, 99.0, 101.0]
    assert verdict(a, b, table_family(2)).mark == "open"
    wide = verdict(a, b, table_family(2, band=0.05))
    assert wide.interval is not None and 0.95 < wide.interval[0] < 1 < wide.interval[1] < 1.05
    assert wide.mark == "same"
    # An interval above 1 (1.001–1.019) is ▲ at any band: a decided difference stays decided.
    a, b = [100.0, 100.5, 99.5, 100.2], [101.0, 101.4, 100.6, 101.2]
    assert verdict(a, b, table_family(2)).mark == "above"
    assert verdict(a, b, table_family(2, band=0.05)).mark == "above"
    assert mark_of((0.97, 1.04), band=0.05) == "same" and mark_of((0.97, 1.04)) == "open"
    # The printed bound never crosses the band the mark was read at.
    from fsbench.units import fmt_bound

    assert fmt_bound(1.0499, True, 0.05) == "1.0499" and fmt_bound(1.0499, True) == "1.05"


def test_degenerate_samples() -> None:
    assert verdict([100.0], [50.0, 51.0]).mark == "none"
    # Ties are values rounded (here to the unit): two samples a side cannot say "same"
    # (their spread is only known to be below the rounding); ten can.
    assert verdict([100.0, 100.0], [100.0, 100.0]).mark == "open"
    assert verdict([100.0] * 10, [100.0] * 10).mark == "same"
    assert verdict([100.0, 100.0], [50.0, 50.0]).mark == "below"
    assert verdict([0.0, 1.0], [2.0, 3.0]).mark == "none"  # no logarithm of 0
    with pytest.raises(ValueError):
        verdict([1.0, math.nan], [1.0, 2.0])


def _noisy(rng: np.random.Generator, ratio: float, cv: float, n: int = 10) -> np.ndarray:
    # Lognormal noise and one stall (x0.5) in twenty samples: what a busy VM does.
    x = 100 * ratio * np.exp(rng.normal(0, cv, n))
    return np.where(rng.random(n) < 0.05, x * 0.5, x)


def test_the_runner_stops_a_decided_comparison_and_reports_its_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 % apart: decided within 2x at the first look (a decided comparison wider than that
    # keeps sampling: test_decide's twofold test).
    rng = np.random.default_rng(3)
    spec = {s: _noisy(rng, r, 0.02) for s, r in (("subj-a", 1.0), ("subj-b", 0.6))}
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES", ";".join(f"{s}=" + ",".join(map(str, v)) for s, v in spec.items())
    )
    runner: Runner = _runner(tmp_path, [FakeWorkload()], repeat=3, ids=tuple(spec),
                             adaptive=True, max_repeat=10, order_seed=1)  # fmt: skip
    res = _by_subject(runner.execute())
    assert res["subj-b"].stopped == "settled"
    assert judge(res["subj-a"], res["subj-b"]).mark == "below"
    assert len(res["subj-b"].samples) == 3  # decided at the look after the minimum rounds


def test_round_order_is_shuffled_recorded_and_reproducible(tmp_path: Path) -> None:
    ids = ("subj-a", "subj-b", "subj-c", "subj-d")

    def orders(seed: int | None) -> list[list[str]]:
        run = _runner(tmp_path, [FakeWorkload()], repeat=8, ids=ids, order_seed=seed).execute()
        assert run.schedule is not None and run.schedule.order_seed == seed
        return run.schedule.orders

    shuffled = orders(42)
    assert len(shuffled) == 8 and all(sorted(o) == sorted(ids) for o in shuffled)
    assert len({tuple(o) for o in shuffled}) > 1  # not one fixed order
    assert len({o[-1] for o in shuffled}) > 1  # the last place is not always the same subject
    assert orders(42) == shuffled
    assert orders(None) == [list(ids)] * 8


def test_results_and_schedule_record_the_family(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=100,101,99;subj-b=50,51,49;subj-c=90,110")
    run = _runner(tmp_path, [FakeWorkload()], repeat=3).execute()
    assert run.schedule is not None
    # Three subjects, one workload: one table of three, every ordered pair's tail (3 × 2), one
    # look for a fixed --repeat; each result carries its kind's variance prior.
    v = run.schedule.verdict
    assert (v["looks"], v["tails"], v["subjects"], v["per"]) == (1, 6, 3, "table")
    assert v["method"] == "welch-log-moderated"
    for r in run.results:
        assert r.verdict_family is not None
        assert {k: r.verdict_family[k] for k in ("looks", "tails", "subjects", "alpha")} == {
            "looks": 1,
            "tails": 6,
            "subjects": 3,
            "alpha": 0.05,
        }
        assert {"d0", "s0sq", "band"} <= set(r.verdict_family)
    adaptive = _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True,
                       max_repeat=10).execute()  # fmt: skip
    # An adaptive run with room for more rounds: one look after the minimum, one at the end.
    assert adaptive.schedule is not None and adaptive.schedule.verdict["looks"] == 2


def test_a_bound_far_from_one_prints_with_a_power_of_ten() -> None:
    """Two samples at a table's confidence can give bounds like 1e30: printed as 1.2e30
    (rounded outward), not as thirty-one digits."""
    from fsbench.units import fmt_bound

    assert fmt_bound(1.16e30, True) == "1.2e30" and float(fmt_bound(1.16e30, True)) >= 1.16e30
    assert fmt_bound(2.3e-7, False) == "2.3e-7" and float(fmt_bound(2.31e-7, False)) <= 2.31e-7
    assert fmt_bound(4122.3, True) == "4123"


def test_an_equivalence_run_never_says_two_percent() -> None:
    """`--equivalence 5`: the legend, the ≈ words and the style's words say the run's band,
    never a fixed ±2 % (issue 45's row)."""
    from fsbench.report.style import OUTCOMES

    fam = table_family(3, band=0.05)
    assert "±5 %" in fam.legend() and "±2 %" not in fam.legend()
    v = verdict([100.0, 101.5, 99.5, 100.2] * 3, [100.4, 101.0, 100.6, 99.9] * 3, fam)
    assert v.mark == "same" and "±2" not in v.words()
    assert "±2" not in OUTCOMES["same"].words


def test_ties_are_rounding_not_zero_spread() -> None:
    """A bucket step between two cells each tied in one bucket is no mark; dd's figures
    rounded to 0.1 GB/s are judged at that resolution, and enough of them still decide."""
    from dataclasses import replace

    from fsbench.stats.verdict import resolution_of

    fio = replace(table_family(12, 2), resolution=1 / 64)
    assert verdict([89.6, 89.6], [92.992, 92.992], fio).mark == "open"  # 2 buckets apart
    assert resolution_of(np.array([1.2, 1.2]), np.array([1.3, 1.3])) == (
        pytest.approx(0.1 / 1.2),
        0.5,
    )
    assert resolution_of(np.array([1.21, 1.23]), np.array([1.3, 1.31])) == (0.0, 0.0)  # no ties
    assert verdict([1.2] * 3, [1.3] * 3).mark == "open"
    assert verdict([1.2] * 10, [1.5] * 10).mark == "above"
    # Integers spread over several units carry their rounding in their variance already.
    ints = [100.0, 101.0, 99.0, 100.0, 102.0]
    exact = verdict([v + 1e-7 for v in ints], ints).interval  # no tie: no rounding assumed
    assert verdict(ints, ints).interval == pytest.approx(exact, rel=1e-6)
