"""The measurement core, unit by unit: iteration merging arithmetic, warm-up discarding,
adaptive repeats (--max-repeat, --time-budget), the file-budget split, every cache verdict
and amplification. Driven by the fake workload with real `min_sample_s` and `warmup`, and by
hand-built probe deltas, so every expected figure is computed here from the inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsbench.probes.sample import ProbeDelta
from fsbench.records.schema import Device, Result, Run, Sample, Subject
from fsbench.schedule.merge import Iteration, build_sample, merge_iterations
from fsbench.schedule.merge import verify_cache as verify
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner, aggregate
from fsbench.schedule.sampler import sized
from fsbench.workloads.base import Declared, Measurement, Target, Workload
from fsbench.workloads.fake import FakeWorkload

MiB, GiB = 1024**2, 1024**3


def _target(sid: str, tmp_path: Path, size: int = 64 * MiB) -> AlwaysMounted:
    return AlwaysMounted(
        Subject(id=sid, driver="fake", fs="fake", kind="fake"),
        Target(sid, str(tmp_path), "fake", size),
    )


def _run(tmp_path: Path, wls: list[FakeWorkload], ids=("a",), size=64 * MiB, **kw) -> Run:
    targets = [_target(s, tmp_path, size) for s in ids]
    return Runner(Run(run_id="r", started="t"), targets, wls, **kw).execute()


# -- iterations and warm-up --------------------------------------------------------------------
def test_a_sample_grows_iterations_until_min_sample_s_and_merges_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 MiB at 100 MiB/s = 0.64 s per run: a 1.5 s minimum needs 3 runs per sample, after
    # the turn's first run, which is discarded (rewarm): here it is the slow one, at 50.
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=50,100,100,100")
    wl = FakeWorkload(min_sample_s=1.5, warmup=0)
    run = _run(tmp_path, [wl], repeat=2, min_sample_s=0.0)
    res = run.results[0]
    assert [p for p, _ in wl.calls].count("run") == 8
    for s in res.sample_details:
        assert s.extra["iterations"] == 3
        assert s.bytes == 3 * 64 * MiB
        assert s.seconds == pytest.approx(3 * 0.64)
        assert s.value == pytest.approx(100.0)  # total bytes over total seconds
        assert s.extra["rewarm_value"] == 50.0  # kept beside the sample, not in it
    # Without rewarm the slow first run is part of the sample.
    wl = FakeWorkload(min_sample_s=1.5, warmup=0)
    res = _run(tmp_path / "off", [wl], repeat=1, min_sample_s=0.0, rewarm=False).results[0]
    assert res.sample_details[0].extra["iteration_values"] == [50.0, 100.0]
    assert "rewarm_value" not in res.sample_details[0].extra
    # A cold sample's iterations each start from dropped caches: its first is kept.
    for cache in ("cold", "direct"):
        wl = FakeWorkload(min_sample_s=1.5, warmup=0, cache=cache)
        res = _run(tmp_path / cache, [wl], repeat=1, min_sample_s=0.0).results[0]
        assert res.sample_details[0].extra["iteration_values"] == [50.0, 100.0], cache


def test_a_sample_of_one_iteration_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run long enough on its own is the sample: nothing is discarded (a slow FUSE write
    would otherwise cost twice)."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=40")  # 64 MiB in 1.6 s
    wl = FakeWorkload(min_sample_s=1.5, warmup=0)
    res = _run(tmp_path, [wl], repeat=3, min_sample_s=0.0).results[0]
    assert [p for p, _ in wl.calls].count("run") == 3 and res.samples == [40.0] * 3
    assert all("rewarm_value" not in s.extra for s in res.sample_details)


def test_rates_merge_as_total_work_over_total_time() -> None:
    fast = Measurement(value=200.0, seconds=1.0, bytes=200 * MiB)
    slow = Measurement(value=50.0, seconds=2.0, bytes=100 * MiB)
    wl = FakeWorkload()
    it = merge_iterations([Iteration(fast, ProbeDelta(), 10), Iteration(slow, ProbeDelta(), 5)], wl)
    m, growth = it.m, it.growth
    assert m.value == pytest.approx(300 / 3.0)  # not the mean of 200 and 50
    assert (m.seconds, m.bytes) == (3.0, 300 * MiB)
    assert growth == 15
    # One iteration that cannot tell its page-cache growth makes the sum unknown.
    runs = [Iteration(fast, ProbeDelta(), 10), Iteration(slow, ProbeDelta(), None)]
    assert merge_iterations(runs, wl).growth is None


def test_probe_deltas_of_iterations_add_up() -> None:
    d1 = ProbeDelta(daemon_user_s=1.0, system_ctx=10, device=Device(write_bytes=4 * MiB))
    d1.kthreads_by_name = {"kworker": 0.5}
    d2 = ProbeDelta(daemon_user_s=2.0, system_ctx=30, device=Device(write_bytes=6 * MiB))
    d2.kthreads_by_name = {"kworker": 0.25, "loop": 1.0}
    m = Measurement(value=1.0, seconds=1.0, bytes=MiB)
    d = merge_iterations([Iteration(m, d1), Iteration(m, d2)], FakeWorkload()).delta
    assert d.daemon_user_s == pytest.approx(3.0)
    assert d.system_ctx == 40
    assert d.device.write_bytes == 10 * MiB
    assert d.kthreads_by_name == {"kworker": 0.75, "loop": 1.0}


def test_warmup_iterations_run_once_per_subject_and_are_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm-up's value (1) would drag every median down if it were kept.
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=1,100,100,100;b=1,50,50,50")
    wl = FakeWorkload(warmup=1)
    run = _run(tmp_path, [wl], ids=("a", "b"), repeat=3)
    runs = [sid for phase, sid in wl.calls if phase == "run"]
    assert runs.count("a") == 4 and runs.count("b") == 4  # 1 warm-up + 3 samples each
    by = {r.subject: r for r in run.results}
    assert by["a"].samples == [100.0] * 3
    assert by["b"].samples == [50.0] * 3


def test_runner_warmup_applies_when_the_workload_sets_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100")
    wl = FakeWorkload()
    wl.warmup = None  # type: ignore[assignment]  # the workload leaves it to the runner
    _run(tmp_path, [wl], repeat=1, warmup=2)
    assert [p for p, _ in wl.calls].count("run") == 3


# -- adaptive repeats --------------------------------------------------------------------------
def test_adaptive_stops_a_settled_workload_at_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subject alone in its table has no comparison to decide: its own interval does at the
    look after the minimum rounds (decide.precise). No spread at all: settled there."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100")
    run = _run(tmp_path, [FakeWorkload()], repeat=3, adaptive=True, max_repeat=10)
    assert len(run.results[0].samples) == 3
    assert run.results[0].stopped == "settled"


def test_adaptive_goes_on_to_max_repeat_while_unsettled_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone and never within 5 %, or in a comparison too noisy to decide (its plan cut at
    --max-repeat): every round allowed, and the stop named after --max-repeat."""
    wide = "50,150,80,120,60,140"
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", f"a={wide}")
    run = _run(tmp_path, [FakeWorkload()], repeat=3, adaptive=True, max_repeat=7)
    res = run.results[0]
    assert len(res.samples) == 7
    assert res.stopped == "max-repeat"
    assert run.schedule is not None and run.schedule.adaptive and run.schedule.max_repeat == 7
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", f"a={wide};b={wide}")
    pair = _run(tmp_path, [FakeWorkload()], ids=("a", "b"), repeat=3, adaptive=True, max_repeat=7)
    assert {(r.subject, len(r.samples), r.stopped) for r in pair.results} == {
        ("a", 7, "max-repeat"),
        ("b", 7, "max-repeat"),
    }


def test_adaptive_time_budget_ends_the_extra_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsbench.schedule.runner as runner_mod

    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=50,150,80,120,60,140")
    clock = iter(float(i * 10) for i in range(1000))  # every reading 10 s later
    monkeypatch.setattr(runner_mod.time, "monotonic", lambda: next(clock))
    run = _run(tmp_path, [FakeWorkload()], repeat=3, adaptive=True, max_repeat=50, time_budget_s=15)
    res = run.results[0]
    assert len(res.samples) == 3  # the budget was spent before the first extra round
    assert res.stopped == "budget"


# -- the file budget ---------------------------------------------------------------------------
def test_file_budget_is_split_between_workloads_that_keep_files(tmp_path: Path) -> None:
    keep_a = FakeWorkload(name="keep-a", space_group="a")
    keep_b = FakeWorkload(name="keep-b", space_group="b")
    keep_a2 = FakeWorkload(name="keep-a2", space_group="a")  # shares a's files
    small = FakeWorkload(name="small", space_group=None)
    r = Runner(Run(run_id="r", started="t"), [], [keep_a, keep_b, keep_a2, small])
    assert r.space_share(keep_a) == pytest.approx(0.5)
    assert r.space_share(keep_a2) == pytest.approx(0.5)
    assert r.space_share(small) == 1.0
    got = sized(Target("s", str(tmp_path), "fake", 100 * MiB), r.space_share(keep_b))
    assert got.size == 50 * MiB


# -- cache verdicts ----------------------------------------------------------------------------
def _delta(read: int = 0, written: int = 0, cached_growth: int = 0) -> ProbeDelta:
    d = ProbeDelta(device=Device(read_bytes=read, write_bytes=written))
    d.meminfo_before, d.meminfo_after = {"Cached": 1000}, {"Cached": 1000 + cached_growth}
    return d


READ = Measurement(value=100.0, seconds=1.0, bytes=100 * MiB)


@pytest.mark.parametrize(
    ("asked", "delta", "growth", "is_write", "state", "flag"),
    [
        ("cold", _delta(read=100 * MiB), None, False, "cold-verified", None),
        ("cold", _delta(read=10 * MiB), None, False, "cold-unverified", "cold-not-verified"),
        ("warm", _delta(read=0), None, False, "warm", None),
        ("warm", _delta(read=50 * MiB), None, False, "warm", "warm-not-verified"),
        ("direct", _delta(read=100 * MiB), 0, False, "direct", None),
        # The device delivered every byte, but its page cache filled: not direct below.
        ("direct", _delta(read=100 * MiB), 90 * MiB, False, "direct-not-honored", "device cache"),
        # No device figure: the machine's page cache stands in (and says so).
        ("direct", _delta(read=100 * MiB, cached_growth=95 * MiB), None, False,
         "direct-not-honored", "page cache"),
        ("direct", _delta(written=100 * MiB), 0, True, "direct", None),
        ("direct", _delta(written=1 * MiB), 0, True, "direct-not-honored", "device wrote"),
        ("n/a", _delta(), None, True, "n/a", None),
    ],
)  # fmt: skip
def test_every_cache_verdict_follows_the_counters(
    asked: str,
    delta: ProbeDelta,
    growth: int | None,
    is_write: bool,
    state: str,
    flag: str | None,
) -> None:
    got, flags = verify(asked, READ, delta, is_write, growth)
    assert got == state
    if flag is None:
        assert flags == []
    else:
        assert len(flags) == 1 and flag in flags[0]


def test_cold_ops_workload_is_verified_by_any_device_read() -> None:
    stat = Measurement(value=1.0, seconds=1.0, ops=1000)
    assert verify("cold", stat, _delta(read=4096), False)[0] == "cold-verified"
    state, flags = verify("cold", stat, _delta(read=0), False)
    assert state == "cold-unverified" and "not read at all" in flags[0]


# -- per-GiB figures and amplification ---------------------------------------------------------
def test_cpu_per_gib_and_amplification_from_the_sample() -> None:
    m = Measurement(value=100.0, seconds=2.0, bytes=2 * GiB, app_user_s=1.0, app_sys_s=1.0)
    d = ProbeDelta(daemon_user_s=3.0, daemon_sys_s=1.0, kthreads_s=2.0)
    d.device = Device(write_bytes=3 * GiB)
    wl = FakeWorkload(name="seq-write")
    s = build_sample(m, d, wl, "n/a", [])
    assert s.cpu.per_gib == pytest.approx({"app": 1.0, "driver": 2.0, "kernel_threads": 1.0})
    assert s.cpu.per_gib_s == pytest.approx(4.0)
    res = Result(subject="a", workload="seq-write", params={"rw": "write"}, metric="t",
                 unit="MiB/s", samples=[s.value], sample_details=[s])  # fmt: skip
    aggregate(res, is_write=True)
    assert res.write_amplification == pytest.approx(1.5)
    assert res.read_amplification is None


def test_read_amplification_for_reads() -> None:
    s = Sample(value=1.0, seconds=1.0, bytes=GiB, device=Device(read_bytes=GiB + GiB // 4))
    res = Result(subject="a", workload="seq-read", params={"rw": "read"}, metric="t",
                 unit="MiB/s", samples=[1.0], sample_details=[s])  # fmt: skip
    aggregate(res)
    assert res.read_amplification == pytest.approx(1.25)
    assert res.write_amplification is None


# -- the workload contract ---------------------------------------------------------------------
def test_every_workload_honours_the_declared_contract() -> None:
    """Registered workloads are declared records with every member of the contract, their
    capabilities typed fields (base.Workload), and nothing outside base.py reads a workload's
    members by a name in a string (getattr, hasattr)."""
    import dataclasses
    import re

    import fsbench
    from fsbench.registry import WORKLOADS
    from fsbench.workloads.base import Workload

    required = [*Workload.__annotations__, "params", "prepare", "run"]
    for wl in WORKLOADS.values():
        assert dataclasses.is_dataclass(wl), wl
        missing = [m for m in required if not hasattr(wl, m)]
        assert not missing, (wl, missing)
    src = Path(fsbench.__file__).parent
    by_name = re.compile(r"(getattr|hasattr)\((wl|workload|job)\b")
    offenders = [
        f"{p.relative_to(src)}:{i}"
        for p in src.rglob("*.py")
        if p.name != "base.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if by_name.search(line)
    ]
    assert offenders == []


def test_declared_capabilities_apply_to_a_workload_without_them() -> None:
    class Bare(Declared):
        name = "bare"
        fileset = "seq"

    bare = Bare()
    assert (bare.id, bare.space_group, bare.is_write, bare.warmup) == (
        "bare",
        "fio:seq",
        False,
        None,
    )
    assert (bare.needs, bare.with_numjobs, dict(bare.merge_extra)) == ((), None, {})
    # Every capability of the contract has its usual value in Declared.
    capabilities = set(Workload.__annotations__) - {"name", "description"}
    assert not [c for c in capabilities if not hasattr(bare, c)]
    with pytest.raises(AttributeError):
        bare.not_a_capability  # noqa: B018


def test_results_carry_workload_id_and_variant(tmp_path: Path) -> None:
    wl = FakeWorkload()
    wl.variant = "v1"  # type: ignore[attr-defined]  # the id follows (base.Declared)
    res = _run(tmp_path, [wl], repeat=1).results[0]
    assert (res.workload, res.workload_id, res.variant) == ("fake", "fake/v1", "v1")
