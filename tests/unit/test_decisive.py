"""Issue 52: a procedure that degrades smoothly, a first round like the others.

The borrowed degrees fade above a prior's posterior instead of falling off a cliff; a writing
workload's warm-up goes on until it is steady; a first round that still ran slow is named.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from fsbench.records.schema import Result, Run, Subject
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.schedule.stalled import first_round_slow
from fsbench.stats.verdict import BORROW_FADE, Prior, table_family, verdict
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload

# --- the borrowed degrees fade, no cliff ---------------------------------------------------


def test_a_cell_a_hair_above_the_posterior_keeps_nearly_all_borrowed_degrees() -> None:
    prior = Prior(16.0, 0.00127)
    post = (16.0 * 0.00127 + 2 * 0.0013) / 18.0
    var, df = prior.moderate(0.0013, 2)
    assert var == 0.0013  # never shrunk below its own variance
    assert df > 2 + 16.0 * 0.75
    assert var / post < BORROW_FADE
    below_v, below_df = prior.moderate(0.001, 2)  # below its prior: raised, every degree
    assert below_df == 18.0 and below_v == pytest.approx((16.0 * 0.00127 + 0.002) / 18.0)


def test_the_borrowed_degrees_fall_steadily_to_none_at_the_fade() -> None:
    prior = Prior(10.0, 0.01)
    post = lambda v: (10.0 * 0.01 + 2 * v) / 12.0  # noqa: E731
    dfs = []
    for k in range(0, 41):
        # A cell between the posterior and past the fade: its degrees never rise with it.
        v = 0.01 * (1.0 + k * 0.01)
        dfs.append(prior.moderate(v, 2)[1])
    assert all(a >= b for a, b in itertools.pairwise(dfs))
    # No jump between neighbours larger than the fade's slope allows (d0 / 0.25 per unit).
    steps = [a - b for a, b in itertools.pairwise(dfs)]
    assert max(steps) < 10.0 * 0.02 / (BORROW_FADE - 1.0)
    far = 0.01 * 3.0
    assert far / post(far) > BORROW_FADE and prior.moderate(far, 2) == (far, 2)


def test_the_issue_row_is_decided_when_the_baseline_is_a_hair_above_its_prior() -> None:
    """The fresh machine's default run: ext4 wrote 2,219/2,371/2,355 MiB/s, its s2 a hair
    above its kind's prior, and every comparison in its row paid its own 2 degrees: ntfs-3g
    at 128/176/172 was 'not separated' at x0.0020-2.30. Fading, it is decided."""
    ext4 = [2219.0, 2371.0, 2355.0]
    ntfs = [128.0, 176.0, 172.0]
    lv = [math.log(x) for x in ext4]
    m = sum(lv) / 3
    s2 = sum((x - m) ** 2 for x in lv) / 2
    kernel = Prior(16.0, s2 / 1.01)  # the cell a hair above its prior's posterior
    fuse = Prior(8.0, 0.03)
    fam = table_family(8, looks=2)
    v = verdict(ext4, ntfs, fam, kernel, fuse)
    assert v.mark == "below"
    lo, hi = v.interval
    assert hi / lo < 5.0  # at the cliff: x0.0020-2.30, 1,150x wide
    # Without any borrowing for the baseline (the cliff), the same row is open.
    assert verdict(ext4, ntfs, fam, Prior(), Prior()).mark == "open"


# --- a first round like the others ---------------------------------------------------------


class _Writing(FakeWorkload):
    is_write = True


def _runner(tmp_path: Path, wl: FakeWorkload, ids: tuple[str, ...], repeat: int = 3) -> Runner:
    targets = [
        AlwaysMounted(
            Subject(id=s, driver="fake", fs="fake", kind="fake"),
            Target(s, str(tmp_path), "fake", 64 * 2**20),
        )
        for s in ids
    ]
    return Runner(Run(run_id="t", started="2026-12-04T00:00:00"), targets, [wl], repeat=repeat)


def test_a_writing_warm_up_goes_on_until_two_runs_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seed 002's big_writes: the first writes slow, then steady; the samples are the rest.
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=300,600,1000,1050,1000,1020,990;b=100,100,100")
    wl = _Writing(warmup=1)
    run = _runner(tmp_path, wl, ("a", "b")).execute()
    res = {r.subject: r for r in run.results}
    assert res["a"].warmup_values == [300.0, 600.0, 1000.0, 1050.0]
    assert res["a"].samples == [1000.0, 1020.0, 990.0]
    assert res["b"].warmup_values == [100.0, 100.0]  # steady at once: two runs


def test_a_writing_warm_up_stops_when_a_run_is_not_faster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slower after faster is noise on a busy machine, not a first touch: no more warm-ups.
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=300,1400,1050,1300,1200,1250")
    run = _runner(tmp_path, _Writing(warmup=1), ("a",)).execute()
    assert run.results[0].warmup_values == [300.0, 1400.0, 1050.0]
    assert run.results[0].samples == [1300.0, 1200.0, 1250.0]


def test_a_reading_warm_up_stays_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=300,600,1000,1000")
    wl = FakeWorkload(warmup=1)
    run = _runner(tmp_path, wl, ("a",)).execute()
    assert run.results[0].warmup_values == [300.0]
    assert run.results[0].samples == [600.0, 1000.0, 1000.0]


def test_a_warm_up_that_never_settles_stops_at_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100,200,400,800,1600,3200")
    run = _runner(tmp_path, _Writing(warmup=1), ("a",)).execute()
    assert run.results[0].warmup_values == [100.0, 200.0, 400.0, 800.0]


def _res(sid: str, samples: list[float], hib: bool = True) -> Result:
    return Result(
        subject=sid, workload="w", metric="m", unit="MiB/s", samples=samples, higher_is_better=hib
    )


def test_a_first_round_slow_for_every_subject_is_named() -> None:
    note = first_round_slow([_res("a", [233, 295, 303]), _res("b", [348, 1178, 984])])
    assert note is not None and note.code == "first-round-slow"
    assert note.params["round"] == 1


def test_a_first_round_like_the_others_is_not_named() -> None:
    assert first_round_slow([_res("a", [300, 295, 303]), _res("b", [348, 1178, 984])]) is None
    # One subject alone, or too few samples: nothing to tell a round from a subject by.
    assert first_round_slow([_res("a", [100, 300, 300])]) is None
    assert first_round_slow([_res("a", [100, 300]), _res("b", [100, 300])]) is None
    # Lower is better: a first round that took longer is the slow one.
    slow = first_round_slow([_res("a", [3.0, 2.0, 2.1], False), _res("b", [9, 6, 6.2], False)])
    assert slow is not None


# --- an open result says what would close it ------------------------------------------------


def _stamped(samples: dict[str, list[float]], stopped: str = "budget") -> list[Result]:
    from fsbench.stats.verdict import table_family

    fam = table_family(len(samples), looks=2).record()
    return [
        Result(subject=s, workload="w", workload_id="w", metric="m", unit="MiB/s",
               samples=v, stopped=stopped, verdict_family=fam)
        for s, v in samples.items()
    ]  # fmt: skip


def test_an_open_comparison_names_the_samples_and_budget_that_would_close_it() -> None:
    from fsbench.schedule.closing import closing_notes

    rs = _stamped({"a": [1000, 1100, 950], "b": [700, 900, 560], "c": [990, 1010, 1005]})
    cost = {("a", "w"): 2.0, ("b", "w"): 2.0, ("c", "w"): 2.0}
    closing_notes({(r.subject, "w"): r for r in rs}, ["a", "b", "c"], cost, 200.0)
    by = {r.subject: r for r in rs}
    note = next(n for n in by["b"].notes if n.code == "would-close")
    assert note.params["against"] == "a" and note.params["more"] >= 1
    # Its budget pays for the planned samples of both sides, past what this run spent.
    assert note.params["budget"] >= 200 + 2 * 2.0 * note.params["more"] - 10
    assert "--time-budget" in by["b"].warnings[-1]
    # c is within twice the band of a: no budget would decide it, so no promise is made.
    assert not [n for n in by["c"].notes if n.code == "would-close"]
    assert not [n for n in by["a"].notes if n.code == "would-close"]


def test_a_fixed_repeat_run_names_the_repeat_instead() -> None:
    from fsbench.schedule.closing import closing_notes

    rs = _stamped({"a": [1000, 1100, 950], "b": [700, 900, 560]}, stopped="repeat")
    closing_notes({(r.subject, "w"): r for r in rs}, ["a", "b"], {}, 50.0)
    note = next(n for n in rs[1].notes if n.code == "would-close")
    assert note.params["repeat"] == 3 + note.params["more"]
    assert "--repeat" in rs[1].warnings[-1]


# --- the run's time anatomy ----------------------------------------------------------------


def test_the_time_anatomy_says_what_came_before_the_first_sample_and_what_a_sample_cost() -> None:
    from fsbench.schedule.phases import PhaseClock, anatomy_line

    t = [0.0]
    clock = PhaseClock(clock=lambda: t[0])
    with clock.phase("warm-up"):
        t[0] += 5.0
    with clock.phase("run"):
        t[0] += 2.0
    assert clock.since("run", -30.0) == 35.0  # the command began 30 s before the clock
    assert clock.since("run", None) is None and clock.since("cache", 0.0) is None
    phases = clock.report(7.0)
    line = anatomy_line({"images": 20.0, "mounts": 3.0}, 35.0, phases, 7.0, 1.5, 2)
    assert line.startswith("time anatomy: first sample at 35 s (images 20 s · mounts 3 s")
    assert "warm-up and traced runs 5 s" in line
    # 2 s of timed runs for 2 samples holding 1.5 s of data: 0.75 s data, 0.25 s around each.
    assert "a sample 0.75 s of data + 0.25 s around it" in line


# --- one slow sample: set aside, measured again ----------------------------------------------


def test_a_sample_far_slower_than_its_cells_others_is_slow() -> None:
    from fsbench.schedule.stalled import slow_sample

    xfs_cold = [3764.0, 4126.0, 3198.0, 736.0]
    assert slow_sample(xfs_cold, True) == 3
    assert slow_sample([3764.0, 4126.0, 3198.0, 3136.0], True) is None
    assert slow_sample([3764.0, 4126.0, 736.0], True) is None  # too few others to judge by
    # A noisy cell's own spread excuses more: 30 % apart, half is within 5 of its sds.
    assert slow_sample([100.0, 160.0, 70.0, 130.0, 50.0], True) is None
    # Faster never counts (nothing runs faster for a stall); lower is better: longer is slow.
    assert slow_sample([3764.0, 4126.0, 3198.0, 9000.0], True) is None
    assert slow_sample([1.0, 1.05, 0.98, 2.5], False) == 3
    # Any place, not only the newest: lowntfs-3g's seq-write samples in run 20261205-071044,
    # the stall its second, judged from the round that gave it a fourth.
    lowntfs = [443.0, 148.0, 438.0, 406.0, 427.0, 402.0]
    assert slow_sample(lowntfs[:3], True) is None
    assert [slow_sample(lowntfs[:n], True) for n in (4, 5, 6)] == [1, 1, 1]
    # ntfs-3g's 266 among ~400 in the same run is 1.5x slower: within what a sample may be.
    assert slow_sample([426.0, 386.0, 401.0, 266.0, 400.0, 426.0], True) is None
    # Two stalls in one cell excuse each other (each widens the others' spread): the rule is
    # for one subject's one stall; more is the cell's spread, and its interval shows it.
    assert slow_sample([1000.0, 300.0, 1010.0, 990.0, 1005.0, 1002.0, 450.0], True) is None


def test_a_slow_sample_is_set_aside_and_measured_again_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # b's fourth sample stalls; the round measured again gives it a fifth in its place.
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100;b=1000,1010,990,300,1005,400")
    wl = FakeWorkload()
    runner = _runner(tmp_path, wl, ("a", "b"), repeat=5)
    run = runner.execute()
    b = next(r for r in run.results if r.subject == "b")
    assert b.samples == [1000.0, 1010.0, 990.0, 1005.0, 400.0]  # once per cell: 400 stays
    assert [k.value for k in b.set_aside] == [300.0]
    assert any(n.code == "sample-set-aside" for n in b.notes)
    a = next(r for r in run.results if r.subject == "a")
    assert a.samples == [100.0] * 5 and not a.set_aside


def test_a_stall_in_a_cells_second_sample_is_set_aside_once_there_are_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b's second sample stalls: at its own round there is nothing to judge it by, so it is
    judged at the round that gives b its fourth sample, set aside, and measured again."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100;b=420,148,418,425,416")
    wl = FakeWorkload()
    runner = _runner(tmp_path, wl, ("a", "b"), repeat=4)
    run = runner.execute()
    b = next(r for r in run.results if r.subject == "b")
    assert b.samples == [420.0, 418.0, 425.0, 416.0]
    assert [(k.value, k.extra["alone"]) for k in b.set_aside] == [(148.0, 2)]
    note = next(n for n in b.notes if n.code == "sample-set-aside")
    assert note.params["sample"] == 2 and note.params["ratio"] < 0.5


@pytest.mark.parametrize(
    "samples", [[1000.0, 1010.0, 990.0, 300.0], [420.0, 148.0, 418.0, 425.0]], ids=["newest", "2nd"]
)
def test_an_interrupt_before_the_sample_is_measured_again_puts_it_back_at_its_place(
    samples: list[float],
) -> None:
    from fsbench.schedule.stalled import Stalled

    st = Stalled()
    r = _res("b", list(samples))
    r.workload_id = "w"
    assert st.look("w", [r], lambda _cells: True)
    assert r.samples == [v for v in samples if v != min(samples)] and ("b", "w") in st.owed
    st.restore({("b", "w"): r})
    assert r.samples == samples and not r.set_aside


def test_judging_the_slowest_is_judging_every_sample_against_its_others() -> None:
    """slow_sample judges only a cell's slowest sample; on random cells (kernel-like to noisy,
    stalls of every depth, either direction) it finds what judging each sample against the
    median and spread of all the others would: the one furthest below them that passes, or
    none (the argument is in slow_sample)."""
    import numpy as np

    from fsbench.schedule.stalled import SLOW_LOG, SLOW_MIN, SLOW_SD, slow_sample

    def every_sample(samples: list[float], hib: bool) -> int | None:
        if len(samples) <= SLOW_MIN:
            return None
        logs = np.log(samples) * (1 if hib else -1)
        passed = {}
        for i in range(len(logs)):
            others = np.delete(logs, i)
            dev = float(np.median(others) - logs[i])
            if dev > max(SLOW_LOG, SLOW_SD * float(others.std(ddof=1))):
                passed[i] = dev
        return max(passed, key=lambda i: passed[i]) if passed else None

    rng = np.random.default_rng(5)
    found = 0
    for _ in range(3000):
        n = int(rng.integers(4, 13))
        x = np.exp(rng.normal(0.0, rng.choice([0.01, 0.04, 0.1, 0.3]), n))
        stalled = rng.random(n) < rng.choice([0.1, 0.3, 0.6])
        x[stalled] *= rng.uniform(0.05, 0.7, int(stalled.sum()))
        hib = bool(rng.random() < 0.7)
        samples = [float(v) for v in (x if hib else 1.0 / x)]
        want = every_sample(samples, hib)
        assert slow_sample(samples, hib) == want, samples
        found += want is not None
    assert 300 < found < 2700  # both answers were tried often


# --- RAM images: the pristine one is sparse, so it is not counted ---------------------------


def test_ram_images_are_refused_only_for_what_the_subjects_images_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 002's two 5 GiB subjects on a machine with 20.4 GiB free were refused for 15 GiB
    (a pristine image counted whole, though it is sparse and freed once copied)."""
    from types import SimpleNamespace

    from fsbench.errors import EnvironmentProblem
    from fsbench.lab import lab as labmod
    from fsbench.lab.backing import Backing
    from fsbench.lab.subject import parse_subjects

    gib = 1024**3
    free = SimpleNamespace(available=int(20.4 * gib))
    monkeypatch.setattr(labmod.psutil, "virtual_memory", lambda: free)
    # Only the size is asked here: root, the driver and mkfs are taken as present.
    monkeypatch.setattr(labmod, "is_root", lambda: True)
    monkeypatch.setattr(labmod, "availability", lambda _d: SimpleNamespace(available=True))
    monkeypatch.setattr(labmod.shutil, "which", lambda *_a, **_k: "/usr/sbin/mkfs.ntfs")
    specs = parse_subjects(["ntfs-3g", "ntfs-3g:big_writes"])
    labmod.Lab("t", Backing("ram"), 5 * gib).check(specs)  # 10 GiB: within 70 % of 20.4
    with pytest.raises(EnvironmentProblem, match=r"more than 70 % of the 20\.4 GiB"):
        labmod.Lab("t", Backing("ram"), 8 * gib).check(specs)


# --- a busy machine says so ------------------------------------------------------------------


def test_a_program_spinning_beside_the_run_is_named_and_the_runs_own_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextlib
    import subprocess
    import sys

    import psutil

    from fsbench.probes.others import OthersWatch
    from polling import wait_until

    spin = "while True: pass\n"
    # Another program, not fsbench's child: a shell starts it and exits, so init adopts it.
    sh = f"{sys.executable} -c '{spin}' >/dev/null 2>&1 & echo $!"
    other = psutil.Process(int(subprocess.run(["sh", "-c", sh], capture_output=True,
                                              text=True, check=True).stdout))  # fmt: skip
    # A child of this process, whose command line names the run too (a FUSE daemon's).
    ours = subprocess.Popen([sys.executable, "-c", spin, "the-run-id"])
    try:
        name = other.name()
        watch = OthersWatch.start("the-run-id")
        seen = {pid for pid, _ in watch._read()}
        assert other.pid in seen and ours.pid not in seen
        # Counted while both still run (a program gone before the end is not seen).
        assert wait_until(lambda: watch.used().get(name, 0.0) >= 0.3, timeout=30)
        monkeypatch.setattr("fsbench.probes.others.BUSY_CPUS", 0.01)
        note = watch.note()
        assert note is not None and note.startswith("the machine was busy: other programs used")
        # Read between samples (tick), then gone before the end: still counted.
        watch.tick(every=0.0)
        other.kill()
        assert wait_until(lambda: not other.is_running(), timeout=30)
        assert watch.used().get(name, 0.0) >= 0.3
    finally:  # both spin forever: neither may outlive the test, whatever failed
        ours.kill()
        ours.wait()
        with contextlib.suppress(psutil.Error):
            other.kill()
