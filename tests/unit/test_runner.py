"""The scheduler and its stats wiring, driven by the fake workload (no root, no devices).

A fake subject is never a measurement of anything: these tests check order, bookkeeping,
statuses, what reaches the store and when, and what the runner does about cold caches.
Probes read the live /proc (the default ProcFS); nothing here asserts on their values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from fsbench.errors import LabError
from fsbench.probes.procfs import ProcFS
from fsbench.records.schema import Result, Run, Sample, Subject
from fsbench.records.store import Store
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload

MiB = 1024 * 1024
SIZE = 64 * MiB  # the fake's seconds = size / MiB / value: long enough to raise no warning
IDS = ("subj-a", "subj-b", "subj-c")


def _subject(sid: str) -> Subject:
    return Subject(id=sid, driver="fake", fs="fake", kind="fake")


def _target(sid: str, workdir: Path, make_cold: Callable[[], None] | None = None) -> AlwaysMounted:
    return AlwaysMounted(_subject(sid), Target(sid, str(workdir), "fake", SIZE), cold=make_cold)


@dataclass
class FakeLab:
    """A lab as the runner sees it, with nothing mounted: each subject a `Mounted` (mounted.py)
    whose calls are logged. `broken[sid]` is why that subject's mount fails (ensure raises the
    LabError a real lab raises) and what its health check then says."""

    workdir: Path
    broken: dict[str, str] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)

    def subjects(self, *ids: str) -> list[FakeMounted]:
        return [FakeMounted(_subject(sid), self) for sid in ids]

    def calls(self, what: str, sid: str) -> int:
        return self.log.count((what, sid))


@dataclass
class FakeMounted:
    subject: Subject
    lab: FakeLab

    def _log(self, what: str) -> None:
        self.lab.log.append((what, self.subject.id))

    def ensure(self) -> Target:
        self._log("ensure")
        why = self.lab.broken.get(self.subject.id)
        if why:
            raise LabError(why)
        return Target(self.subject.id, str(self.lab.workdir), "fake", SIZE)

    def release(self) -> None:
        self._log("release")

    def health(self) -> str | None:
        self._log("health")
        return self.lab.broken.get(self.subject.id)

    def discard(self) -> None:
        self._log("discard")

    def make_cold(self) -> str | None:
        self._log("make_cold")
        return None

    def evict(self) -> str | None:
        self._log("evict")
        return "the fake lab evicts nothing"


def _runner(
    tmp_path: Path,
    workloads: list[FakeWorkload],
    repeat: int = 3,
    ids: tuple[str, ...] = IDS,
    **kw,
) -> Runner:
    targets = [_target(sid, tmp_path) for sid in ids]
    return Runner(Run(run_id="test-run", started="2025-01-01T00:00:00"), targets, workloads,
                  repeat=repeat, **kw)  # fmt: skip


def _by_subject(run: Run, workload: str = "fake") -> dict[str, Result]:
    return {r.subject: r for r in run.results if r.workload == workload}


class Recorder:
    """A SampleSink that keeps every call in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def save_subject(self, run_id: str, subject: Subject) -> None:
        self.events.append(("subject", subject.id, subject.status))

    def save_sample(self, run_id: str, result: Result, sample: Sample) -> None:
        self.events.append(("sample", result.subject, sample.value))

    def save_result(self, run_id: str, result: Result) -> None:
        self.events.append(("result", result.subject, result.median))

    def samples(self) -> list[tuple[str, object]]:
        return [(sid, v) for kind, sid, v in self.events if kind == "sample"]


# --- order ----------------------------------------------------------------------------------


def test_interleaves_subjects_within_each_repeat(tmp_path: Path) -> None:
    wl = FakeWorkload()
    steps: list[str] = []
    _runner(tmp_path, [wl], repeat=3, on_step=steps.append).execute()
    one_round = [(phase, sid) for sid in IDS for phase in ("prepare", "run")]
    assert wl.calls == one_round * 3
    assert steps == [f"{sid} · fake · sample {rep}/3" for rep in (1, 2, 3) for sid in IDS]


def test_all_workloads_of_a_subject_run_in_its_turn(tmp_path: Path) -> None:
    log: list[tuple[str, str, str]] = []

    class Logged(FakeWorkload):
        def prepare(self, target: Target) -> None:
            log.append((self.name, "prepare", target.subject_id))

        def run(self, target: Target):
            log.append((self.name, "run", target.subject_id))
            return super().run(target)

    w1, w2 = Logged(name="w1"), Logged(name="w2")
    _runner(tmp_path, [w1, w2], repeat=2, ids=("a", "b")).execute()
    one_round = [
        (w, phase, sid) for sid in ("a", "b") for w in ("w1", "w2") for phase in ("prepare", "run")
    ]
    assert log == one_round * 2


def test_release_is_called_after_each_turn(tmp_path: Path) -> None:
    lab = FakeLab(tmp_path)
    Runner(Run(run_id="r", started="t"), lab.subjects(*IDS), [FakeWorkload()], repeat=2).execute()
    assert [sid for what, sid in lab.log if what == "release"] == list(IDS) * 2


# --- values and statistics --------------------------------------------------------------------


def test_exact_medians_from_fake_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES", "subj-a=100,101,99;subj-b=50,51,49,80,20;subj-c=10,30"
    )
    run = _runner(tmp_path, [FakeWorkload()], repeat=5, procfs=ProcFS()).execute()
    res = _by_subject(run)
    assert res["subj-a"].samples == [100, 101, 99, 100, 101]
    assert res["subj-a"].median == 100
    assert res["subj-b"].samples == [50, 51, 49, 80, 20]
    assert res["subj-b"].median == 50
    assert res["subj-c"].samples == [10, 30, 10, 30, 10]
    assert res["subj-c"].median == 10
    for sid in IDS:
        r = res[sid]
        assert r.status == "ok" and r.error is None
        assert (r.metric, r.unit, r.higher_is_better) == ("throughput", "MiB/s", True)
        assert r.params["engine"] == "fake" and r.params["file_size"] == SIZE
        assert len(r.sample_details) == 5
        assert [s.value for s in r.sample_details] == r.samples
        assert all(s.bytes == SIZE and s.ops == 1 for s in r.sample_details)
        # The fake's cache is "none": the runner records it as not applicable.
        assert r.cache == "n/a"
        assert r.ci95 is not None and r.ci95[0] <= r.median <= r.ci95[1]
    # How much work a sample was is reported, but is not part of the result's identity.
    assert res["subj-a"].model_dump()["work_per_sample"] == {
        "bytes": SIZE,
        "ops": 1,
        "seconds": round(SIZE / MiB / 100, 4),
    }
    assert set(res["subj-a"].params) == {"engine", "file_size"}
    assert [s.id for s in run.subjects] == list(IDS)
    assert all(s.status == "ok" for s in run.subjects)


def test_unlisted_subject_gets_the_fake_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=7")
    run = _runner(tmp_path, [FakeWorkload()], repeat=2).execute()
    res = _by_subject(run)
    assert res["subj-a"].samples == [7, 7]
    assert res["subj-b"].samples == [100, 100]


# --- failures -----------------------------------------------------------------------------------


def test_failed_subject_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=100,101,99;subj-b=-1;subj-c=10,11,12")
    wl = FakeWorkload()
    sink = Recorder()
    run = _runner(tmp_path, [wl], repeat=3, sink=sink).execute()
    res = _by_subject(run)
    failed = res["subj-b"]
    assert failed.status == "failed"
    assert failed.error == "fake failure: No space left on device"
    assert failed.samples == [] and failed.median is None
    # Tried once: the same error again teaches nothing.
    assert wl.calls.count(("run", "subj-b")) == 1
    assert res["subj-a"].samples == [100, 101, 99] and res["subj-a"].median == 100
    assert res["subj-c"].samples == [10, 11, 12] and res["subj-c"].median == 11
    assert res["subj-a"].status == res["subj-c"].status == "ok"
    assert [sid for sid, _ in sink.samples()].count("subj-b") == 0
    assert len(sink.samples()) == 6


def test_a_declared_need_the_mount_lacks_is_unsupported_before_prepare(tmp_path: Path) -> None:
    @dataclass
    class NeedsChmod(FakeWorkload):
        needs: tuple[str, ...] = ("posix_permissions",)

    wl = NeedsChmod()
    lacks = {"posix_permissions": False, "posix_permissions_detail": "mode ignored"}
    targets = [
        AlwaysMounted(_subject("has"), Target("has", str(tmp_path), "fake", SIZE)),
        AlwaysMounted(_subject("lacks"), Target("lacks", str(tmp_path), "fake", SIZE,
                                            capabilities=lacks)),
    ]  # fmt: skip
    run = Runner(Run(run_id="t", started="2025-01-01T00:00:00"), targets, [wl], repeat=2).execute()
    res = _by_subject(run)
    assert res["has"].status == "ok" and len(res["has"].samples) == 2
    assert res["lacks"].status == "unsupported" and res["lacks"].samples == []
    assert res["lacks"].error == (
        "needs POSIX permissions (chmod), which this mount does not honour (probed: mode ignored)"
    )
    assert ("prepare", "lacks") not in wl.calls and ("run", "lacks") not in wl.calls


def test_unsupported_is_neither_zero_nor_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=100;subj-b=-2;subj-c=10")
    wl = FakeWorkload()
    run = _runner(tmp_path, [wl], repeat=3).execute()
    res = _by_subject(run)
    r = res["subj-b"]
    assert r.status == "unsupported"
    assert r.error == "fake: operation not supported by this file system"
    assert r.samples == [] and r.sample_details == []
    assert r.median is None  # not 0
    assert wl.calls.count(("run", "subj-b")) == 1
    assert all(s.status == "ok" for s in run.subjects)  # the subject itself is fine
    assert res["subj-a"].samples == [100] * 3 and res["subj-c"].samples == [10] * 3


def test_lab_error_in_ensure_fails_that_subject_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner on a fake lab (sampler.Mounted, nothing mounted): one subject's lab fails,
    that subject alone fails, is discarded once and never asked again."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=100;subj-b=5;subj-c=10")
    lab = FakeLab(tmp_path, broken={"subj-b": "fuse daemon for subj-b exited"})
    wl = FakeWorkload()
    sink = Recorder()
    run = Runner(
        Run(run_id="r", started="t"), lab.subjects(*IDS), [wl], repeat=3, sink=sink
    ).execute()

    b = next(s for s in run.subjects if s.id == "subj-b")
    assert b.status == "failed"
    assert b.error == "during fake: fuse daemon for subj-b exited"
    assert ("subject", "subj-b", "failed") in sink.events
    res = _by_subject(run)
    assert res["subj-b"].status == "failed"
    assert res["subj-b"].error == "fuse daemon for subj-b exited"
    assert res["subj-b"].samples == []
    # Never prepared or run, and not tried again in later repeats.
    assert ("prepare", "subj-b") not in wl.calls
    assert lab.calls("ensure", "subj-b") == 1
    assert lab.calls("discard", "subj-b") == 1  # torn down at once, so nothing hangs on it
    assert res["subj-a"].samples == [100] * 3 and res["subj-a"].status == "ok"
    assert res["subj-c"].samples == [10] * 3 and res["subj-c"].status == "ok"
    # ensure is called before prepare and again after the caches were dropped.
    assert lab.calls("ensure", "subj-a") == 6
    assert lab.calls("discard", "subj-a") == lab.calls("discard", "subj-c") == 0
    # Given back after every turn, the failing one's too; a failed subject has no more turns.
    assert [lab.calls("release", sid) for sid in IDS] == [3, 1, 3]


def test_a_driver_that_dies_under_a_workload_fails_its_subject_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload failed and the fake lab's health check says the driver is gone: the subject
    fails with the lab's reason, not the workload's, and is discarded; the others go on."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=100;subj-b=-1;subj-c=10")
    lab = FakeLab(tmp_path)
    subjects = lab.subjects(*IDS)

    class DiesUnderTheRun(FakeMounted):
        def health(self) -> str | None:
            self._log("health")
            return "daemon exited"

    subjects[1] = DiesUnderTheRun(subjects[1].subject, lab)
    run = Runner(Run(run_id="r", started="t"), subjects, [FakeWorkload()], repeat=2).execute()
    b = next(s for s in run.subjects if s.id == "subj-b")
    assert b.status == "failed" and b.error.startswith("daemon exited during fake")
    assert lab.calls("health", "subj-b") >= 1 and lab.calls("discard", "subj-b") == 1
    assert lab.calls("discard", "subj-a") == lab.calls("discard", "subj-c") == 0
    assert [s.status for s in run.subjects if s.id != "subj-b"] == ["ok", "ok"]


def test_a_cold_sample_asks_the_lab_to_evict_then_to_drop_everything(tmp_path: Path) -> None:
    """Cold caches are the lab's to make (Mounted.evict, Mounted.make_cold): the fake lab
    cannot evict, so every sample is made cold the full way, and the sample says why."""
    lab = FakeLab(tmp_path)
    wl = FakeWorkload(cache="cold")
    run = Runner(Run(run_id="r", started="t"), lab.subjects("subj-a"), [wl], repeat=2).execute()
    asked = [what for what, _ in lab.log if what in ("ensure", "evict", "make_cold")]
    assert asked == ["ensure", "evict", "make_cold", "ensure"] * 2
    for s in run.results[0].sample_details:
        assert s.extra["cold_method"] == "full"
        assert s.extra["cold_method_why"] == "the fake lab evicts nothing"


def test_lab_error_stops_the_subjects_remaining_workloads(tmp_path: Path) -> None:
    lab = FakeLab(tmp_path, broken={"subj-a": "mount lost"})
    wls = [FakeWorkload(name="w1"), FakeWorkload(name="w2")]
    run = Runner(Run(run_id="r", started="t"), lab.subjects("subj-a"), wls, repeat=2).execute()
    assert lab.calls("ensure", "subj-a") == 1
    assert run.subjects[0].error == "during w1: mount lost"


# --- the sink sees each sample as soon as it exists -------------------------------------------


def test_recorder_sink_gets_each_sample_before_the_next_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=1,2,3;subj-b=4,5,6;subj-c=7,8,9")
    sink = Recorder()
    wl = FakeWorkload()
    seen: list[list[tuple[str, object]]] = []

    def on_sample() -> None:
        # The sample just measured is already in the sink, and nothing has been aggregated.
        seen.append(sink.samples())
        runs = [c for c in wl.calls if c[0] == "run"]
        assert len(sink.samples()) == len(runs)
        assert sink.samples()[-1][0] == runs[-1][1]
        assert not any(kind == "result" for kind, _, _ in sink.events)

    _runner(tmp_path, [wl], repeat=3, sink=sink, on_sample=on_sample).execute()
    order = [("subj-a", 1.0), ("subj-b", 4.0), ("subj-c", 7.0)]
    order += [("subj-a", 2.0), ("subj-b", 5.0), ("subj-c", 8.0)]
    order += [("subj-a", 3.0), ("subj-b", 6.0), ("subj-c", 9.0)]
    assert seen == [order[: i + 1] for i in range(9)]
    # Aggregates come last, once per result, with the median.
    assert sink.events[-3:] == [
        ("result", "subj-a", 2.0),
        ("result", "subj-b", 5.0),
        ("result", "subj-c", 8.0),
    ]


def test_store_has_each_sample_committed_when_on_sample_fires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=1,2;subj-b=-1;subj-c=7,8")
    db = tmp_path / "results.db"
    run = Run(run_id="20250101-000000-abcd", started="2025-01-01T00:00:00")
    wl = FakeWorkload()
    snapshots: list[dict[str, list[float]]] = []

    with Store(db) as store, Store(db) as reader:
        store.begin_run(run)

        def on_sample() -> None:
            # A second connection sees it: the sample is committed, not merely buffered.
            stored = reader.load_run(run.run_id)
            assert stored.status == "incomplete"
            snapshots.append({r.subject: list(r.samples) for r in stored.results})

        targets = [_target(sid, tmp_path) for sid in IDS]
        Runner(run, targets, [wl], repeat=2, sink=store, on_sample=on_sample).execute()

    assert snapshots == [
        {"subj-a": [1.0]},
        {"subj-a": [1.0]},  # subj-b failed: nothing stored for it
        {"subj-a": [1.0], "subj-c": [7.0]},
        {"subj-a": [1.0, 2.0], "subj-c": [7.0]},
        {"subj-a": [1.0, 2.0], "subj-c": [7.0, 8.0]},
    ]


def test_store_after_finish_holds_one_result_per_subject_and_workload_with_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=1,2,3;subj-b=-1;subj-c=7,8,9")
    db = tmp_path / "results.db"
    run = Run(run_id="20250101-000000-abcd", started="2025-01-01T00:00:00")
    with Store(db) as store:
        store.begin_run(run)
        targets = [_target(sid, tmp_path) for sid in IDS]
        Runner(run, targets, [FakeWorkload()], repeat=3, sink=store).execute()
        run.status = "complete"
        store.finish_run(run)
        stored = store.load_run(run.run_id)
    res = _by_subject(stored)
    assert res["subj-a"].samples == [1.0, 2.0, 3.0] and res["subj-a"].median == 2.0
    assert res["subj-c"].samples == [7.0, 8.0, 9.0] and res["subj-c"].median == 8.0
    assert res["subj-b"].status == "failed" and res["subj-b"].samples == []
    assert [r.subject for r in stored.results if r.median is not None] == ["subj-a", "subj-c"]


def test_store_does_not_duplicate_results_after_aggregation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=1,2,3")
    run = Run(run_id="20250101-000000-abcd", started="2025-01-01T00:00:00")
    with Store(tmp_path / "results.db") as store:
        store.begin_run(run)
        targets = [_target("subj-a", tmp_path)]
        Runner(run, targets, [FakeWorkload()], repeat=3, sink=store).execute()
        run.status = "complete"
        store.finish_run(run)
        stored = store.load_run(run.run_id)
    assert [(r.subject, r.workload, r.samples) for r in stored.results] == [
        ("subj-a", "fake", [1.0, 2.0, 3.0])
    ]


# --- cold caches --------------------------------------------------------------------------------


def test_cold_without_make_cold_is_unverified_and_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=10,20")
    run = _runner(tmp_path, [FakeWorkload(cache="cold")], repeat=2, ids=("subj-a",)).execute()
    r = _by_subject(run)["subj-a"]
    assert r.status == "ok" and r.samples == [10, 20]
    assert [s.cache for s in r.sample_details] == ["cold-unverified"] * 2
    for s in r.sample_details:
        assert [f for f in s.flags if f.startswith("cannot-drop-caches:")] != []
    assert r.cache == "cold-unverified"
    assert any(f.startswith("cannot-drop-caches") for f in r.flags)


def test_make_cold_runs_before_every_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=10;subj-b=20")
    wl = FakeWorkload(cache="cold")

    def cold(sid: str) -> Callable[[], None]:
        return lambda: wl.calls.append(("cold", sid))

    targets = [_target(sid, tmp_path, make_cold=cold(sid)) for sid in ("subj-a", "subj-b")]
    run = Runner(Run(run_id="r", started="t"), targets, [wl], repeat=3).execute()
    one_round = [
        (phase, sid) for sid in ("subj-a", "subj-b") for phase in ("prepare", "cold", "run")
    ]
    assert wl.calls == one_round * 3
    r = _by_subject(run)["subj-a"]
    # Dropped, but with no block device the device can't confirm it: still unverified,
    # now with the reason the check failed rather than "cannot drop".
    assert [s.cache for s in r.sample_details] == ["cold-unverified"] * 3
    for s in r.sample_details:
        assert not any(f.startswith("cannot-drop-caches") for f in s.flags)
        assert f"cold-not-verified: device read 0 B of {SIZE} B" in s.flags


def test_warm_never_drops_caches(tmp_path: Path) -> None:
    dropped: list[str] = []
    targets = [_target("subj-a", tmp_path, make_cold=lambda: dropped.append("x"))]
    run = Runner(Run(run_id="r", started="t"), targets, [FakeWorkload(cache="warm")], repeat=2)
    r = _by_subject(run.execute())["subj-a"]
    assert dropped == []
    assert r.cache == "warm"
    assert not any(f.startswith("cannot-drop-caches") for f in r.flags)


def test_no_cache_policy_never_drops_caches(tmp_path: Path) -> None:
    dropped: list[str] = []
    targets = [_target("subj-a", tmp_path, make_cold=lambda: dropped.append("x"))]
    run = Runner(Run(run_id="r", started="t"), targets, [FakeWorkload()], repeat=2).execute()
    assert dropped == []
    assert _by_subject(run)["subj-a"].cache == "n/a"


@pytest.mark.parametrize("cache", ["none", "warm"])
def test_sync_before_every_sample_without_cold_preparation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str
) -> None:
    """Writeback of the previous workload must land before the next sample, not inside it."""
    import fsbench.schedule.sampler as sampler_mod

    wl = FakeWorkload(cache=cache)
    monkeypatch.setattr(sampler_mod.os, "sync", lambda: wl.calls.append(("sync", "")))
    targets = [_target("subj-a", tmp_path)]
    Runner(Run(run_id="r", started="t"), targets, [wl], repeat=2, warmup=0).execute()
    phases = [phase for phase, _ in wl.calls]
    assert phases == ["prepare", "sync", "run"] * 2


def test_iteration_extras_merge_honestly() -> None:
    """Amounts add up, rates are over the whole sample, percentiles say they are a median over
    iterations, and a figure that is only the last iteration's says so."""
    from fsbench.schedule.merge import merge_extras
    from fsbench.workloads.base import IO_EXTRAS, Measurement

    a = Measurement(
        value=1.0, seconds=1.0, ops=100, app_user_s=0.2, app_sys_s=0.3,
        extra={"iops": 100.0, "lat_us": {"p50": 10.0, "p99": 50.0}, "walk_s": 0.1,
               "lat_max_us": 70.0, "fio_version": "fio-3.33", "threads": 4},
    )  # fmt: skip
    b = Measurement(
        value=1.0, seconds=3.0, ops=500, app_user_s=0.5, app_sys_s=0.5,
        extra={"iops": 166.7, "lat_us": {"p50": 20.0, "p99": 90.0}, "walk_s": 0.4,
               "lat_max_us": 95.0, "fio_version": "fio-3.33", "threads": 8},
    )  # fmt: skip
    c = Measurement(
        value=1.0, seconds=4.0, ops=200, app_user_s=0.1, app_sys_s=0.1,
        extra={"iops": 50.0, "lat_us": {"p50": 30.0, "p99": 60.0}, "walk_s": 0.5,
               "lat_max_us": 80.0, "fio_version": "fio-3.33", "threads": 8},
    )  # fmt: skip
    got = merge_extras([a, b, c], seconds=8.0, rules={**IO_EXTRAS, "walk_s": "sum"})
    assert got["iops"] == pytest.approx(800 / 8.0)
    assert got["walk_s"] == pytest.approx(1.0)
    assert got["lat_max_us"] == 95.0
    assert got["lat_us"] == {"p50": 20.0, "p99": 60.0}
    assert got["merged"] == {"lat_us": "median over iterations"}
    assert got["fio_version"] == "fio-3.33"  # the same in every iteration: nothing to say
    assert got["last_iteration_only"] == ["threads"]
    assert got["threads"] == 8


def test_a_merged_sample_keeps_each_iterations_value() -> None:
    """The sample's rate is total work over total time; each iteration's own rate stays beside
    it, so a stall in one iteration is told from a sample slow throughout."""
    from fsbench.probes.sample import ProbeDelta
    from fsbench.schedule.merge import Iteration, merge_iterations
    from fsbench.workloads.base import Measurement

    runs = [
        Iteration(Measurement(value=v, seconds=s, bytes=int(v * s)), ProbeDelta())
        for v, s in ((2000.0, 0.2), (500.0, 0.4), (2000.0, 0.2))
    ]
    m = merge_iterations(runs, FakeWorkload()).m  # a MiB/s workload (base.Declared)
    assert m.value == pytest.approx((400 + 200 + 400) / 0.8)
    assert m.extra["iterations"] == 3
    assert m.extra["iteration_values"] == [2000.0, 500.0, 2000.0]


def test_adaptive_settling_spends_samples_only_where_the_answer_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """subj-b is clearly half as fast (settled at the look after the first three rounds),
    subj-c wobbles around the baseline (its ratio's interval straddles 1): subj-c and the
    baseline get the samples subj-c's variance plans (fsbench.stats.decide), subj-b none."""
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES",
        "subj-a=100,101,99;subj-b=50,51,49;subj-c=90,112,95,108,100,93,110",
    )
    runner = _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True,
                     max_repeat=8)  # fmt: skip
    res = _by_subject(runner.execute())
    assert len(res["subj-b"].samples) == 3
    planned = runner.planned[("subj-c", "fake")]
    assert 3 < planned <= 8 and runner.planned[("subj-a", "fake")] == planned
    assert len(res["subj-c"].samples) == len(res["subj-a"].samples) == planned
    assert ("subj-b", "fake") in runner.settled and ("subj-c", "fake") not in runner.settled
    assert res["subj-b"].stopped == "settled"
    assert res["subj-c"].stopped == ("planned" if planned < 8 else "max-repeat")


def test_adaptive_settling_stops_when_every_answer_is_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both others settle in the first rounds (one clearly slower, one within ±2 %): nobody,
    the baseline included, gets a sample beyond --repeat."""
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES", "subj-a=100,100.2,99.8;subj-b=50,51,49;subj-c=100.1,99.9,100"
    )
    wl = FakeWorkload()
    runner = _runner(tmp_path, [wl], repeat=3, adaptive=True, max_repeat=10)
    res = _by_subject(runner.execute())
    assert {sid: len(r.samples) for sid, r in res.items()} == dict.fromkeys(IDS, 3)
    assert sum(1 for phase, _ in wl.calls if phase == "run") == 9


def test_adaptive_settling_respects_the_time_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES", "subj-a=100,101,99;subj-b=90,112,95,108;subj-c=50,51,49"
    )
    runner = _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True,
                     max_repeat=50, time_budget_s=0.0)  # fmt: skip
    res = _by_subject(runner.execute())
    assert len(res["subj-b"].samples) == 3  # open, but the budget is spent
    assert res["subj-b"].stopped == "budget"  # open, but no time for another round
    assert res["subj-c"].stopped == "settled"  # clearly slower: settled


class _Clock:
    """time.monotonic for the runner: each fake sample costs `per_run` seconds."""

    def __init__(self, per_run: float) -> None:
        self.now, self.per_run = 0.0, per_run

    def __call__(self) -> float:
        return self.now


def _timed(wl: FakeWorkload, clock: _Clock) -> FakeWorkload:
    run = wl.run

    def costly(target: Target):  # type: ignore[no-untyped-def]
        clock.now += clock.per_run
        return run(target)

    wl.run = costly  # type: ignore[method-assign]
    return wl


def test_adaptive_open_answer_gets_samples_until_the_time_budget_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sample costs 10 s and the budget is 150 s: the three minimum rounds of three
    subjects take 90 s; then subj-b (settled, half as fast) gets nothing more, while subj-c
    (open, so noisy that its variance plans more than fit) and the baseline share what is
    left: 3 more rounds of 20 s, and none that would end after the budget."""
    import fsbench.schedule.runner as runner_mod

    clock = _Clock(10.0)
    monkeypatch.setattr(runner_mod.time, "monotonic", clock)
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES",
        "subj-a=100,101,99;subj-b=50,51,49;subj-c=60,140,70,130,65,135,80",
    )
    etas: list[float | None] = []
    runner = _runner(tmp_path, [_timed(FakeWorkload(), clock)], repeat=3, adaptive=True,
                     max_repeat=50, time_budget_s=150.0,
                     on_eta=etas.append)  # fmt: skip
    run = runner.execute()
    res = _by_subject(run)
    assert {s: len(r.samples) for s, r in res.items()} == {"subj-a": 6, "subj-b": 3, "subj-c": 6}
    assert clock.now == 150.0  # within the budget, and nothing of it left unused
    assert res["subj-b"].stopped == "settled"
    assert res["subj-c"].stopped == "budget" and res["subj-a"].stopped == "budget"
    assert run.schedule is not None and run.schedule.time_budget_s == 150.0
    assert run.schedule.spent_s == 150.0
    # No estimate while the first round learns the costs; then it falls to the end.
    assert etas[:3] == [None] * 3 and all(e is not None for e in etas[3:])
    assert etas[3] == pytest.approx(150 - 30) and etas[-1] == pytest.approx(10.0)


def test_the_time_budget_counts_from_the_commands_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run as above, but 30 s went on images and the noise floor before the first
    sample: of the 150 s budget, 120 are left; the minimum rounds take 90, one more of the open
    answers' (20 s) fits, a second would end at 160 s."""
    import fsbench.schedule.runner as runner_mod

    clock = _Clock(10.0)
    clock.now = 30.0
    monkeypatch.setattr(runner_mod.time, "monotonic", clock)
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES",
        "subj-a=100,101,99;subj-b=50,51,49;subj-c=90,112,95,108,100,93,110",
    )
    runner = _runner(tmp_path, [_timed(FakeWorkload(), clock)], repeat=3, adaptive=True,
                     max_repeat=50, time_budget_s=150.0,
                     budget_origin=0.0)  # fmt: skip
    run = runner.execute()
    res = _by_subject(run)
    assert {s: len(r.samples) for s, r in res.items()} == {"subj-a": 4, "subj-b": 3, "subj-c": 4}
    assert clock.now == 140.0 and res["subj-c"].stopped == "budget"
    assert run.schedule is not None and run.schedule.spent_s == 110.0  # measuring alone


def test_adaptive_settled_answer_ends_the_run_before_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsbench.schedule.runner as runner_mod

    clock = _Clock(10.0)
    monkeypatch.setattr(runner_mod.time, "monotonic", clock)
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES", "subj-a=100,100.1,99.9;subj-b=50,51,49;subj-c=100.05,99.95,100"
    )
    run = _runner(tmp_path, [_timed(FakeWorkload(), clock)], repeat=3, adaptive=True,
                  max_repeat=50, time_budget_s=1000.0).execute()  # fmt: skip
    assert clock.now == 90.0  # the minimum rounds only: every answer was settled by then
    assert {r.stopped for r in run.results} == {"settled"}


def test_fixed_repeat_records_repeat_as_the_reason(tmp_path: Path) -> None:
    run = _runner(tmp_path, [FakeWorkload()], repeat=2).execute()
    assert {(len(r.samples), r.stopped) for r in run.results} == {(2, "repeat")}
    assert run.schedule is not None and not run.schedule.adaptive
    assert run.schedule.time_budget_s is None


def test_settling_compares_with_the_renderers_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """subj-a fails, so subj-b is the baseline (as in the table): subj-c, twice as fast as
    subj-b, is settled after the minimum rounds, and nothing is left open."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=-1;subj-b=50,51,49;subj-c=100,101,99")
    run = _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True,
                  max_repeat=10).execute()  # fmt: skip
    res = _by_subject(run)
    assert res["subj-a"].status == "failed" and res["subj-a"].stopped is None
    assert len(res["subj-b"].samples) == len(res["subj-c"].samples) == 3
    assert res["subj-b"].stopped == res["subj-c"].stopped == "settled"


def test_progress_total_shrinks_as_answers_settle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar's remaining count: the minimum rounds, then only the open pairs' rounds."""
    monkeypatch.setenv(
        "FSBENCH_FAKE_VALUES",
        "subj-a=100,101,99;subj-b=50,51,49;subj-c=90,112,95,108,100,93,110",
    )
    left: list[int] = []
    _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True, max_repeat=5,
            on_remaining=left.append).execute()  # fmt: skip
    assert left[:8] == list(range(8, 0, -1))  # 9 minimum samples, counted down
    assert left[-1] == 0 and len(left) == 9 + 2 * 2  # subj-a and subj-c: 2 more rounds each


def test_a_ratio_is_settled_exactly_when_its_verdict_is_decided() -> None:
    """Settled is the verdict the table prints: ▲/▼ (the interval excludes 1) or ≈ (within
    ±2 %); three wild baseline samples above three others are still open."""
    from fsbench.stats.verdict import verdict

    def ratio_settled(base: Result, res: Result) -> bool:
        return verdict(base.samples, res.samples).decided

    def res(values: list[float]) -> Result:
        return Result(subject="s", workload="w", metric="m", unit="MiB/s", samples=values)

    wild, low = res([100.0, 300.0, 500.0]), res([50.0, 60.0, 70.0])
    assert verdict(wild.samples, low.samples).mark == "open"
    assert not ratio_settled(wild, low)
    assert ratio_settled(res([100.0, 100.5, 99.5]), res([100.2, 99.9, 100.1]))
    assert ratio_settled(res([100.0, 101.0, 99.0]), res([50.0, 51.0, 49.0]))


def test_every_workload_merges_its_extras_by_a_known_rule() -> None:
    """A workload names how its extras merge (hook merge_extra); a rule the sample merge does
    not know would leave the last iteration's value under a merged name."""
    from fsbench.registry import MATRIX_WORKLOADS, WORKLOADS
    from fsbench.workloads.base import MERGE_RULES

    declared = 0
    for wl in [*WORKLOADS.values(), *MATRIX_WORKLOADS.values()]:
        for key, rule in wl.merge_extra.items():
            assert callable(rule) or rule in MERGE_RULES, (wl.id, key, rule)
            declared += 1
    assert declared > 0


def _fake_values(monkeypatch: pytest.MonkeyPatch, vals: dict[str, str]) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", ";".join(f"{k}={v}" for k, v in vals.items()))


# Round 3 at about a third of every subject's speed, then two ordinary rounds.
STALLED = {"s1": "100,102,35,101,99", "s2": "50,51,19,49,50", "s3": "80,79,30,81,80",
           "s4": "20,21,8,20,21"}  # fmt: skip


def test_a_round_that_slowed_every_subject_is_set_aside_and_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 3 at about a third of every subject's speed (run 20261127-110521 had one): its
    samples are set aside, the round is measured again, the verdicts use the 4 others, and
    each result says so in every output's words."""
    ids, vals = tuple(STALLED), STALLED
    _fake_values(monkeypatch, vals)
    rec = Recorder()
    run = _runner(tmp_path, [FakeWorkload()], repeat=4, ids=ids, procfs=ProcFS(), sink=rec,
                  order_seed=5).execute()  # fmt: skip
    by = _by_subject(run)
    for sid, r in by.items():
        want = [float(v) for v in vals[sid].split(",")]
        assert r.samples == [want[0], want[1], want[3], want[4]]
        assert [(s.value, s.extra["round"]) for s in r.set_aside] == [(want[2], 3)]
        assert len(r.sample_details) == 4
        notes = [n for n in r.notes if n.code == "round-set-aside"]
        assert len(notes) == 1 and notes[0].params["round"] == 3
        assert 0.3 < notes[0].params["low"] <= notes[0].params["high"] < 0.6
        assert not any(n.code == "round-shared" for n in r.notes)
        assert any("the round measured again" in w for w in r.warnings)
    # Five rounds ran (the fourth measured round 3 again), each in a recorded order.
    assert run.schedule is not None and len(run.schedule.orders) == 5
    assert sum(1 for e in rec.events if e[0] == "sample") == 4 * 5
    # The verdicts read the kept samples: s2 against s1 is the ratio of their centres.
    assert by["s2"].center == pytest.approx(
        float(np.exp(np.mean(np.log(by["s2"].samples)))), rel=1e-9
    )


def test_a_round_that_only_one_subject_or_a_speed_up_moved_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One subject alone slow in a round is not the round's: only that subject's sample is set
    aside (stalled.slow_sample), the others keep theirs; a round faster for everyone is named
    (round-shared) but never set aside: a stall slows, and from a median two stalled rounds
    pulled down, the one good round looks faster."""
    ids = ("s1", "s2", "s3", "s4")
    vals = {"s1": "100,102,35,101", "s2": "50,51,50,49", "s3": "80,79,81,81", "s4": "20,21,20,20"}
    _fake_values(monkeypatch, vals)
    run = _runner(tmp_path, [FakeWorkload()], repeat=4, ids=ids, procfs=ProcFS()).execute()
    by = {r.subject: r for r in run.results}
    assert [(k.value, k.extra["alone"]) for k in by["s1"].set_aside] == [(35.0, 3)]
    assert not any("round" in k.extra for k in by["s1"].set_aside)
    assert not any(by[s].set_aside for s in ("s2", "s3", "s4"))
    assert not any(n.code.startswith("round-") for r in run.results for n in r.notes)
    vals = {"s1": "35,36,100,35", "s2": "19,18,50,19", "s3": "30,31,80,30", "s4": "8,8,20,8"}
    _fake_values(monkeypatch, vals)
    run = _runner(tmp_path, [FakeWorkload()], repeat=4, ids=ids, procfs=ProcFS()).execute()
    for r in run.results:
        assert len(r.samples) == 4 and not r.set_aside
        assert [n.params["round"] for n in r.notes if n.code == "round-shared"] == [3]


def test_a_stalled_round_that_does_not_fit_the_budget_stays_in_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adaptive run whose budget is spent keeps the stalled round (measuring it again
    would overrun) and names it."""
    ids = ("s1", "s2", "s3", "s4")
    vals = {"s1": "100,102,35", "s2": "50,51,19", "s3": "80,79,30", "s4": "20,21,8"}
    _fake_values(monkeypatch, vals)
    clock = [0.0]

    class Ticking(FakeWorkload):
        def run(self, target):  # type: ignore[no-untyped-def]
            clock[0] += 10.0
            return super().run(target)

    run = _runner(tmp_path, [Ticking()], repeat=3, ids=ids, procfs=ProcFS(), adaptive=True,
                  time_budget_s=125.0, now=lambda: clock[0]).execute()  # fmt: skip
    for r in run.results:
        assert len(r.samples) == 3 and not r.set_aside
        assert [n.params["round"] for n in r.notes if n.code == "round-shared"] == [3]


def test_a_set_aside_round_survives_the_store_and_its_verdicts_reproduce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved sample by sample, then loaded: the kept samples are the result's samples, the
    set-aside ones ride along, and the tables judge the loaded run as they judged it live."""
    from fsbench.records.store import Store
    from fsbench.stats import decide

    ids, vals = tuple(STALLED), STALLED
    _fake_values(monkeypatch, vals)
    with Store(tmp_path / "r.db") as db:
        runner = _runner(tmp_path, [FakeWorkload()], repeat=4, ids=ids, procfs=ProcFS(), sink=db)
        db.begin_run(runner.run)
        run = runner.execute()
        run.status = "complete"
        db.finish_run(run)
        loaded = db.load_run(run.run_id)
    live, back = _by_subject(run), _by_subject(loaded)
    for sid in ids:
        assert back[sid].samples == live[sid].samples and len(back[sid].samples) == 4
        assert [s.value for s in back[sid].set_aside] == [s.value for s in live[sid].set_aside]
        assert len(back[sid].set_aside) == 1
    marks = {w: p.marks() for w, p in decide.printed(run.results, list(ids)).items()}
    again = {w: p.marks() for w, p in decide.printed(loaded.results, list(ids)).items()}
    assert marks == again and marks


def test_an_interrupt_before_the_round_is_measured_again_puts_its_samples_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted as the stalled round is measured again: every cell keeps the samples it
    has (the stalled ones back in their place), nothing is set aside, no note says so."""
    from fsbench.pipeline import Interrupted

    _fake_values(monkeypatch, STALLED)
    calls = [0]

    class Stopping(FakeWorkload):
        def run(self, target):  # type: ignore[no-untyped-def]
            calls[0] += 1
            if calls[0] == 14:  # the second sample of the round measured again
                raise Interrupted("SIGINT")
            return super().run(target)

    runner = _runner(tmp_path, [Stopping()], repeat=4, ids=tuple(STALLED), procfs=ProcFS())
    with pytest.raises(Interrupted):
        runner.execute()
    assert runner.stalled.owed  # the redo had begun: one cell measured again, three owed
    runner.finish()
    by = _by_subject(runner.run)
    for sid, r in by.items():
        want = [float(v) for v in STALLED[sid].split(",")]
        if r.set_aside:  # the one measured again keeps its new sample, the stalled one aside
            assert r.samples == [want[0], want[1], want[3]]
        else:
            assert r.samples == want[:3] and len(r.sample_details) == 3
            assert not any(n.code == "round-set-aside" for n in r.notes)
    assert sum(bool(r.set_aside) for r in by.values()) == 1


@pytest.mark.timeout(30)
def test_a_cell_that_fails_while_its_round_is_measured_again_owes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell that fails in the round measured again is failed, and the run goes on (it
    looped forever waiting for that cell's sample)."""
    from fsbench.errors import WorkloadFailed

    _fake_values(monkeypatch, STALLED)

    class Failing(FakeWorkload):
        def run(self, target):  # type: ignore[no-untyped-def]
            if target.subject_id == "s1" and self._counters.get("s1", 0) == 3:
                raise WorkloadFailed("fake failure: No space left on device")
            return super().run(target)

    run = _runner(tmp_path, [Failing()], repeat=4, ids=tuple(STALLED), procfs=ProcFS()).execute()
    by = _by_subject(run)
    assert by["s1"].status == "failed"
    assert all(len(by[s].samples) == 4 and by[s].set_aside for s in ("s2", "s3", "s4"))


def test_a_noisy_cell_keeps_an_early_sample_at_half_its_median_and_a_tight_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample is judged at every look, not only the newest: a FUSE-like cell 30 % apart
    keeps its second sample at half its median through all six looks (its own spread excuses
    it), while a kernel-like cell 4 % apart sets the same place's 45 aside and measures it
    again in a round of its own."""
    _fake_values(monkeypatch, {"s1": "100,50,160,70,130,90", "s2": "100,45,104,97,102,99,100"})
    run = _runner(tmp_path, [FakeWorkload()], repeat=6, ids=("s1", "s2")).execute()
    by = _by_subject(run)
    assert by["s1"].samples == [100.0, 50.0, 160.0, 70.0, 130.0, 90.0] and not by["s1"].set_aside
    assert not any(n.code == "sample-set-aside" for n in by["s1"].notes)
    # Set aside at the 4th look; the round of its own drew 102, rounds 5 and 6 drew 99, 100.
    assert by["s2"].samples == [100.0, 104.0, 97.0, 102.0, 99.0, 100.0]
    assert [(k.value, k.extra["alone"]) for k in by["s2"].set_aside] == [(45.0, 2)]
    assert "kept" not in by["s2"].set_aside[0].extra  # the runner's bookkeeping, not recorded
    assert [n.params["sample"] for n in by["s2"].notes if n.code == "sample-set-aside"] == [2]


def test_an_interrupt_before_an_early_sample_is_measured_again_puts_it_back_at_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lowntfs-3g's 2nd sample (run 20261205-071044) set aside at the 4th look, interrupted as
    its round of its own begins: the cell keeps its samples in their order, the stalled one
    back at its place with its details, and nothing says a sample was set aside."""
    from fsbench.pipeline import Interrupted

    _fake_values(monkeypatch, {"s1": "430", "s2": "443,148,438,406,427"})
    calls = [0]

    class Stopping(FakeWorkload):
        def run(self, target):  # type: ignore[no-untyped-def]
            calls[0] += 1
            if calls[0] == 9:  # 4 rounds of 2 subjects, then s2's sample measured again
                raise Interrupted("SIGINT")
            return super().run(target)

    runner = _runner(tmp_path, [Stopping()], repeat=4, ids=("s1", "s2"))
    with pytest.raises(Interrupted):
        runner.execute()
    assert runner.stalled.owed == {("s2", "fake")}
    runner.finish()
    s2 = _by_subject(runner.run)["s2"]
    assert s2.samples == [443.0, 148.0, 438.0, 406.0] and not s2.set_aside
    assert [k.value for k in s2.sample_details] == s2.samples
    assert not any({"alone", "kept"} & set(k.extra) for k in s2.sample_details)
    assert not any(n.code == "sample-set-aside" for n in s2.notes)
    assert not any("set aside" in w for w in s2.warnings)


def test_setups_are_dealt_before_every_round_after_the_first_and_a_failed_one_fails_alone(
    tmp_path: Path,
) -> None:
    """The runner's side of file: backing's rotation (targets.Rotation): asked before rounds
    2.., never before the first (prepare dealt it), charged to the 'setup' phase; a subject
    whose setup failed stops with that reason while the others go on."""
    asked: list[tuple[int, int]] = []  # (round, samples taken so far)
    wl = FakeWorkload()

    def setups(rep: int, going: set[str]) -> dict[str, str]:
        assert going == {s.id for s in run.subjects if s.status == "ok"}
        asked.append((rep, sum(1 for c in wl.calls if c[0] == "run")))
        return {IDS[1]: "setting up its image for round 3: disk full"} if rep == 2 else {}

    runner = _runner(tmp_path, [wl], repeat=3, setups=setups)
    run = runner.run
    runner.execute()
    n = len(IDS)
    assert asked == [(1, n), (2, 2 * n)]
    by = _by_subject(run)
    failed = next(s for s in run.subjects if s.id == IDS[1])
    assert failed.status == "failed" and failed.error.endswith("disk full")
    assert len(by[IDS[1]].samples) == 2
    assert all(len(by[sid].samples) == 3 for sid in IDS if sid != IDS[1])
    assert run.schedule is not None and "setup" in run.schedule.phases


def test_the_plan_is_estimated_again_from_the_variances_after_every_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 20261127-153110: btrfs's cold read, planned 4 samples at the interim look from three
    within 1 %, drew a fourth 19 % low and stopped at its plan, 4.4x wide and open with budget
    left. The same first rounds give the same interim plan; a later sample that widens the
    cell now buys it the samples its interval needs (decide.replan); calm ones keep the plan."""
    base, first = "subj-a=100,101,99,100.5,99.5,100,101,99", "90,112,95"

    def run(later: str) -> tuple[int, int]:
        monkeypatch.setenv("FSBENCH_FAKE_VALUES", f"{base};subj-b=50,51,49;subj-c={first},{later}")
        runner = _runner(tmp_path, [FakeWorkload()], repeat=3, adaptive=True,
                         max_repeat=8)  # fmt: skip
        interim: list[int] = []
        replan = runner._replan

        def recorded() -> None:
            replan()
            interim.append(runner.planned[("subj-c", "fake")])

        monkeypatch.setattr(runner, "_replan", recorded)
        res = _by_subject(runner.execute())
        return interim[0], len(res["subj-c"].samples)

    calm_plan, calm_n = run("101,99,100,100,101")
    wild_plan, wild_n = run("70,140,60,150,65")
    assert calm_plan == wild_plan < 8  # the interim look saw the same three rounds
    assert calm_n == calm_plan  # calmer than planned: the plan stands (raised, never lowered)
    assert wild_n > wild_plan  # planned again once the fourth sample widened the cell
