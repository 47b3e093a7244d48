"""The verdict procedure as a whole, proved by simulation (tests/unit/simulate_verdicts.py runs
fsbench.stats.decide and fsbench.stats.verdict exactly as the runner schedules them): valid (a
family-wise rate of false ▲/▼ per table at most 5 %) and decisive (power where the issue asks
for it)."""

from __future__ import annotations

import numpy as np
import pytest
from simulate_verdicts import DESIGNS, POWER, Design, make_runner, power, run_once, within_promise

from fsbench.stats import decide
from fsbench.stats.decide import WIDE_SPAN, look, planned_n, priors_by_kind
from fsbench.stats.verdict import (
    BORROW_FADE,
    NO_PRIOR,
    Prior,
    fit_prior,
    log_var,
    prior_of,
    table_family,
    verdict,
)

# The CI-sized simulation: a few hundred tables per design to start (bench/verdict_designs.py
# runs them at full size). A design passes when its Monte-Carlo interval's upper end is within
# the promise (its rate shown <= 5 %, not merely not shown above it); while the interval
# straddles 5 %, more tables are drawn (simulate_verdicts.within_promise).
RUNS = 150


PROMISED = [d for d in DESIGNS if d.promised]


@pytest.mark.parametrize("design", PROMISED, ids=[d.name for d in PROMISED])
def test_every_design_keeps_the_familywise_rate(design: Design) -> None:
    """A/A tables through the runner's real schedule and the printed verdicts (every column):
    subjects consistently noisier, spreads 10x apart, n = 2, constant and quantized values,
    stalls, drift, fixed and adaptive."""
    # At least 20 runs: a 20-cell design's 400 tables already show its rate under the promise
    # (12 subjects, 20 cells: 1 of 400, upper end 1.4 %, in 7 s where 40 runs took 16 s).
    r = within_promise(design, max(20, RUNS // design.cells), seed=11)
    assert r.interval()[1] <= 0.05, r.text()


@pytest.mark.parametrize("design,want", POWER, ids=[d.name for d, _ in POWER])
def test_power_as_stated(design: Design, want: float) -> None:
    r = power(design, 120, seed=3)
    assert r.p >= want, r.text()


def test_a_look_that_wrongly_borrowed_would_fail_the_three_subject_design() -> None:
    """The issue's design (3 subjects, n = 3, spreads 3/3/12 %) with the old moderation (a
    prior's degrees lent to every cell, d0 from the point estimate) broke the promise: 9.2 %
    (6.5 % on today's code with both restored, 600 tables). Guard, in the cells and in the
    design's own runs: a cell clearly above its prior's posterior (BORROW_FADE times it or
    more) keeps its own degrees, and no prior lends more degrees than the cells it was fitted
    to hold together."""
    assert Prior(10.0, 0.01).moderate(0.04, 2) == (0.04, 2)
    assert fit_prior([(0.01, 2), (0.011, 2), (0.012, 2)]).d0 <= 6.0
    design = DESIGNS[0]
    assert design.spreads == (0.03, 0.03, 0.12) and design.n0 == 3 and not design.adaptive
    rng = np.random.default_rng(0)
    noisier = 0
    for _ in range(30):
        run = make_runner(design, rng).execute()
        own = {r.subject: log_var(r.samples) for r in run.results}
        held = sum(df for _v, df in filter(None, own.values()))
        kept: dict[str, float] = {}  # a cell that borrows nothing: its own degrees
        for r in run.results:
            prior, (var, df) = prior_of(r), own[r.subject] or (0.0, 0)
            assert prior.d0 <= held, (r.subject, prior, held)
            post = (prior.d0 * prior.s0sq + df * var) / (prior.d0 + df) if prior.d0 else var
            if var >= BORROW_FADE * post:
                kept[r.subject] = df
                noisier += prior.d0 > 0  # a prior it could have borrowed from
        for p in decide.printed(run.results, [f"s{i}" for i in range(design.k)]).values():
            for (_col, a, b), v in p.marks().items():
                bound = min((kept[s] for s in (a, b) if s in kept), default=None)
                if bound is not None and v.df is not None:
                    assert v.df <= bound, (a, b, v, kept)
    assert noisier >= 30  # cells that had a prior to borrow from and must not (41 of 90)


def test_the_issues_twentyfold_gap_is_decided_once_its_samples_are_planned() -> None:
    """The default run's ntfs-3g against ext4 (123, 93, 77 against 1,752, 2,128, 1,974 MiB/s)
    in a table of eight at two looks, with the run's other cells as priors. Both cells are
    noisier than their kind's prior, so they borrow no degrees: at 3 samples a side the
    interval is hopeless and the comparison stays open (the price of the promise: the
    runner plans more samples for it); at 5 it is ▼ and narrower than 5×."""
    ext4 = [1752.0, 2128.0, 1974.0, 1890.0, 2050.0]
    ntfs = [123.0, 93.0, 77.0, 101.0, 88.0]
    kernel = [ext4[:3], [3038, 3400, 2800], [850, 900, 800], [500, 560, 470], [5000, 5200, 4700],
              [4500, 4300, 4700], [3000, 3100, 2800], [2500, 2400, 2700]]  # fmt: skip
    fuse = [ntfs[:3], [100, 120, 90], [220, 200, 240], [550, 500, 610], [1400, 1300, 1500],
            [1300, 1250, 1420], [900, 1000, 870], [1000, 900, 1100]]  # fmt: skip
    priors = priors_by_kind([("kernel", s) for s in kernel] + [("fuse", s) for s in fuse])
    fam = table_family(8, looks=2)
    assert verdict(ext4[:3], ntfs[:3], fam, priors["kernel"], priors["fuse"]).mark == "open"
    v = verdict(ext4, ntfs, fam, priors["kernel"], priors["fuse"])
    assert v.mark == "below" and v.interval is not None
    assert v.interval[1] / v.interval[0] <= 5.0
    first = {"a": ext4[:3], "b": ntfs[:3]}
    pri = {"a": priors["kernel"], "b": priors["fuse"]}
    plan = planned_n(look(first, ["a", "b"], True, fam, pri), first, fam, pri)
    assert plan["a"] > 3 and plan["b"] > 3


def test_the_plan_counts_degrees_as_the_verdict_will() -> None:
    """README command 1 on a quiet machine (run 20261127-121449): 3 samples of 1-2 % a side,
    xfs 1.57x ext4 open at 0.99-2.50. Planned with Welch's degrees (4), 3 samples looked
    enough and both cells stopped with the budget unspent; the verdict counts Hsu's (2) below
    4 samples a side, and so must the plan."""
    kernel = {"ext4": [3013, 3081, 2956], "ext2": [1340, 1370, 1372], "xfs": [4692, 4802, 4733],
              "btrfs": [913, 927, 920]}  # fmt: skip
    fuse = {"ntfs-3g": [215, 221, 223], "lowntfs-3g": [215, 225, 227],
            "fuse2fs": [579, 610, 579], "exfat-fuse": [1330, 1328, 1331]}  # fmt: skip
    cold_k = [[8785, 8687, 8681], [8128, 8267, 8440], [8443, 8639, 8954], [4548, 4513, 4535]]
    cold_f = [[1730, 1765, 1753], [1765, 1710, 1740], [989, 933, 955], [1815, 1814, 1824]]
    priors = priors_by_kind(
        [("kernel", v) for v in [*kernel.values(), *cold_k]]
        + [("fuse", v) for v in [*fuse.values(), *cold_f]]
    )
    samples: dict[str, list[float]] = {
        k: [float(x) for x in v] for k, v in {**kernel, **fuse}.items()
    }
    pri = {s: priors["kernel" if s in kernel else "fuse"] for s in samples}
    fam = table_family(8, looks=2)
    tl = look(samples, list(samples), True, fam, pri)
    assert ("ext4", "xfs") in tl.open_pairs()
    plan = planned_n(tl, samples, fam, pri, n_max=10)
    assert plan["ext4"] > 3 and plan["xfs"] > 3
    # And at the planned samples (the same spread), the verdict decides it.
    more = {
        s: v + [float(np.exp(np.mean(np.log(v))))] * (plan.get(s, 3) - 3)
        for s, v in samples.items()
    }
    assert verdict(more["ext4"], more["xfs"], fam, pri["ext4"], pri["xfs"]).mark == "above"


def test_the_prior_is_limmas_moments_fit() -> None:
    """Cells whose variances all come from one sigma² give a large d0 near the cap and s0²
    near sigma²; cells spread far beyond their sampling noise lend few degrees."""
    rng = np.random.default_rng(0)
    same = [log_var(list(np.exp(rng.normal(0, 0.1, 4)))) for _ in range(200)]
    p = fit_prior([c for c in same if c is not None])
    assert p.d0 >= 5 and p.s0sq == pytest.approx(0.01, rel=0.3)
    spread = [log_var(list(np.exp(rng.normal(0, s, 4)))) for s in rng.choice([0.01, 0.3], size=200)]
    q = fit_prior([c for c in spread if c is not None])
    assert q.d0 < 3
    assert fit_prior([(0.01, 2), (0.02, 2)]) == NO_PRIOR  # too few cells to lend anything
    # A cell above the prior keeps its own variance and degrees; one below is raised to the
    # posterior and gets the prior's degrees.
    assert Prior(10.0, 0.01).moderate(0.04, 2) == (0.04, 2)
    var, df = Prior(10.0, 0.01).moderate(0.0001, 2)
    assert var == pytest.approx((10 * 0.01 + 2 * 0.0001) / 12) and df == 12.0


def test_a_look_compares_with_the_baseline_and_the_fastest_and_plans_the_open() -> None:
    samples = {
        "ext4": [100.0, 102.0, 98.0],
        "xfs": [150.0, 90.0, 130.0],  # the fastest by its geometric mean, wide
        "slow": [10.0, 10.5, 9.5],
    }
    fam = table_family(3, looks=2)
    tl = look(samples, ["ext4", "xfs", "slow"], True, fam)
    assert tl.baseline == "ext4" and tl.best == "xfs"
    assert set(tl.verdicts) == {("ext4", "xfs"), ("ext4", "slow"), ("xfs", "slow")}
    assert tl.verdicts[("ext4", "slow")].mark == "below"
    assert tl.open_pairs() == [("ext4", "xfs")]
    # slow is decided against both, but against the wide xfs its interval spans more than
    # WIDE_SPAN: a mark without a size, so it keeps getting samples; against ext4 it is narrow.
    assert tl.verdicts[("xfs", "slow")].decided and tl.wide_pairs() == [("xfs", "slow")]
    lo, hi = tl.verdicts[("ext4", "slow")].interval or (0, 0)
    assert hi / lo < WIDE_SPAN
    assert tl.open_subjects() == {"ext4", "xfs", "slow"}
    plan = planned_n(tl, samples, fam, n_max=10)
    assert set(plan) == {"ext4", "xfs", "slow"} and all(3 < n <= 10 for n in plan.values())
    # Without the wide pair, slow would stop: the open pair alone plans ext4 and xfs.
    narrow = dict(samples, xfs=[120.0, 118.0, 122.0])
    tl2 = look(narrow, ["ext4", "xfs", "slow"], True, fam)
    assert not tl2.wide_pairs() and "slow" not in tl2.open_subjects()
    # Lower is better (a latency): the fastest is the lowest.
    assert look(samples, ["ext4", "xfs", "slow"], False, fam).best == "slow"


def test_stamp_records_each_tables_family_and_its_kinds_prior() -> None:
    """After a VM stage merged guests' results, a table spans kernels: the pipeline stamps
    every result again with its table's size (decide.restamp); results no run stamped (no
    prior recorded) get their kind's prior."""
    from fsbench.records.schema import Result, Run, Schedule, Subject
    from fsbench.stats.decide import restamp

    def res(sid: str, wid: str, xs: list[float], fam: dict | None = None) -> Result:
        return Result(subject=sid, workload=wid, workload_id=wid, metric="m", unit="MiB/s",
                      samples=xs, verdict_family=fam)  # fmt: skip

    guest = {"looks": 2, "alpha": 0.05, "tails": 2, "subjects": 2, "band": 0.02}
    results = [
        res("ntfs3@a", "w", [100.0, 101.0, 99.0], guest),
        res("ntfs-3g@a", "w", [50.0, 52.0, 49.0], guest),
        res("ntfs@b", "w", [120.0, 118.0, 122.0], guest),
        res("ntfs-3g@b", "w", [51.0, 50.0, 48.0], guest),
        res("ntfs@b", "v", [10.0, 11.0, 10.5], guest),
    ]
    subjects = [
        Subject(id=r.subject, driver=r.subject.split("@")[0], kind=k, fs="ntfs")
        for r, k in zip(results[:4], ("kernel", "fuse", "kernel", "fuse"), strict=True)
    ]
    run = Run(run_id="r", started="2026-11-26T10:00:00", subjects=subjects, results=results,
              schedule=Schedule(adaptive=True))  # fmt: skip
    restamp(run, 0.05)
    fams = [r.verdict_family or {} for r in run.results]
    assert [f["subjects"] for f in fams] == [4, 4, 4, 4, 1]
    assert all(f["looks"] == 2 and f["band"] == 0.05 for f in fams)
    assert fams[0]["tails"] == 12 and fams[4]["tails"] == 2
    assert run.schedule is not None and run.schedule.verdict["subjects"] == 4


def test_a_vm_stage_keeps_the_priors_each_runs_looks_froze() -> None:
    """decide.restamp after guests' results joined: each result keeps the variance prior its
    own run froze at its interim look (the host's cells the host's, the guest's the guest's),
    so the final marks are what the looks decided. Refitted over every sample (before), the
    host's a-b went from ▼ (0.96-0.99, decided at the frozen prior) to open (0.95-1.01)."""
    from fsbench.records.schema import Result, Run, Schedule, Subject
    from fsbench.stats.decide import restamp
    from fsbench.stats.verdict import Prior, prior_of, table_family

    host = table_family(2, 2).record() | Prior(d0=20.0, s0sq=0.00005).record()
    guest = table_family(2, 2).record() | Prior(d0=4.0, s0sq=0.05).record()

    def res(sid: str, wid: str, xs: list[float], fam: dict) -> Result:
        return Result(subject=sid, workload=wid, workload_id=wid, metric="m", unit="MiB/s",
                      samples=xs, verdict_family=dict(fam))  # fmt: skip

    results = [
        res("a", "w", [100.0, 100.6, 99.4], host),
        res("b", "w", [97.5, 98.1, 96.9], host),
        res("x@g", "v", [100.0, 130.0, 80.0], guest),
        res("y@g", "v", [60.0, 90.0, 70.0], guest),
    ]
    subjects = [Subject(id=r.subject, driver="ext4", kind="kernel", fs="ext4") for r in results]
    run = Run(run_id="r", started="2026-11-26T10:00:00", subjects=subjects, results=results,
              schedule=Schedule(adaptive=True))  # fmt: skip
    order = [s.id for s in subjects]

    def marks() -> dict:
        return {k: (v.mark, v.interval) for p in decide.printed(run.results, order).values()
                for k, v in p.marks().items()}  # fmt: skip

    looked, priors = marks(), [prior_of(r) for r in run.results]
    assert looked[("rate", "a", "b")][0] == "below"
    restamp(run, 0.02)
    assert [prior_of(r) for r in run.results] == priors
    assert marks() == looked


def test_the_final_look_moderates_with_the_prior_the_interim_look_fitted() -> None:
    """A cell stopped at the interim look is judged at the end with the prior that stopped it:
    refitted over the later, larger cells, the prior moved and a settled cell of 3 samples
    fell from the prior's degrees to its own 2 (README command 1 printed ext2 "settled" at
    ×0.054–3.68)."""
    from fsbench.stats.verdict import prior_of

    d = Design("interim", k=6, cells=2, spreads=(0.03, 0.12), rounds=(8, 8), effects=(1, 0.5))
    runner = make_runner(d, np.random.default_rng(3))
    run = runner.execute()
    assert runner.frozen_priors is not None and "kernel" in runner.frozen_priors
    first = decide.priors_by_kind(("kernel", r.samples[: d.n0]) for r in run.results)
    assert runner.frozen_priors == first  # fitted on the first rounds' equal samples
    assert any(len(r.samples) > d.n0 for r in run.results)  # later rounds happened
    want = first["kernel"]
    for r in run.results:
        got = prior_of(r)
        assert got.s0sq == want.s0sq and got.d0 == pytest.approx(want.d0, abs=1e-6)
    # ... and a prior refitted over all samples would differ: the freeze is what holds it.
    assert decide.priors_by_kind(("kernel", r.samples) for r in run.results) != first


def test_a_default_like_run_marks_every_clear_difference_with_a_useful_interval() -> None:
    """README command 1's shape (8 subjects of two kinds, 2 workloads, its true ratios, 6-8
    rounds of budget): every comparison with the baseline outside 0.67-1.5 is marked the
    right way, and few runs print an interval wider than 5x. Before the interim look's prior
    was kept and wide decided comparisons got samples: 82 % of runs all marked, 89 % with an
    interval wider than 5x."""
    eff = (1, 0.45, 1.56, 0.32, 0.077, 0.075, 0.18, 0.42)
    d = Design(
        "default-like",
        k=8,
        cells=2,
        spreads=(0.05, 0.12, 0.05, 0.10, 0.06, 0.10, 0.2, 0.06),
        kinds=("kernel",) * 4 + ("fuse",) * 4,
        rounds=(6, 8),
        effects=eff,
    )
    rng = np.random.default_rng(5)
    runs, all_marked, wide = 60, 0, 0
    for _ in range(runs):
        ok, w = True, False
        for p in run_once(d, rng).values():
            for (_col, ref, s), v in p.marks().items():
                lo, hi = v.interval or (1.0, 1.0)
                w |= lo > 0 and hi / lo > 5
                e = eff[int(s[1:])]
                if ref == "s0" and s != "s0" and not 0.67 <= e <= 1.5:
                    ok &= v.mark == ("above" if e > 1 else "below")
        all_marked += ok
        wide += w
    assert all_marked >= 57, all_marked
    assert wide <= 0.4 * runs, wide


def test_a_decided_comparison_wider_than_twofold_keeps_sampling() -> None:
    """The second default run of issue 52: btrfs's write at 3 samples within 2.3 % against
    ext4's 5, judged at Hsu's 2 degrees, was ▼ at ×0.30–0.80 (2.7× wide) and stopped with the
    budget unspent. Decided but wider than 2×, it is planned more samples (from variances)."""
    samples = {
        "ext4": [2479.0, 2472.0, 2475.0, 2478.0, 2512.0],
        "btrfs": [1427.0, 1479.0, 1489.0],
    }
    fam = table_family(8, looks=2)
    tl = look(samples, ["ext4", "btrfs"], True, fam)
    v = tl.verdicts[("ext4", "btrfs")]
    lo, hi = v.interval or (0.0, 0.0)
    assert v.mark == "below" and 2.0 < hi / lo < 3.0
    assert tl.wide_pairs() == [("ext4", "btrfs")] and "btrfs" in tl.open_subjects()
    assert planned_n(tl, samples, fam, n_max=10)["btrfs"] > 3
