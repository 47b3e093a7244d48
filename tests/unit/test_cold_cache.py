"""The cold cache's two methods (lab/cold.py, sampler.prepare_cache): which one a sample gets,
the fallback to the full method when an evicted read fails the counter check, and what the
sample's record says. No root: fake targets and a temporary directory; the real eviction on
real mounts is tests/integration/test_cold_evict.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsbench.lab import cold
from fsbench.probes.sample import ProbeDelta
from fsbench.records.schema import Device, Run, Subject
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.schedule.sampler import CacheState, eviction_failed, prepare_cache
from fsbench.workloads.base import Measurement, Target
from fsbench.workloads.fake import FakeWorkload

MiB = 1024 * 1024
SIZE = 64 * MiB


def _target(tmp_path: Path, calls: list[str], evict: str | bool | None = None) -> AlwaysMounted:
    """A fake subject whose make_cold and evict only record that they ran; `evict` is what the
    eviction answers (None: done, a string: why not), False for a subject without one."""

    def do_evict() -> str | None:
        calls.append("evict")
        return evict if isinstance(evict, str) else None

    return AlwaysMounted(
        Subject(id="subj-a", driver="fake", fs="fake", kind="fake"),
        Target("subj-a", str(tmp_path), "fake", SIZE),
        cold=lambda: calls.append("full"),
        evicting=None if evict is False else do_evict,
    )


def test_a_cold_read_is_evicted_when_the_target_can() -> None:
    calls: list[str] = []
    state = prepare_cache(_target(Path("/nonexistent"), calls), FakeWorkload(cache="cold"))
    assert calls == ["evict"]
    assert state.asked == "cold" and state.record == {"cold_method": "evict"}


def test_the_full_method_when_eviction_does_not_fit_and_why() -> None:
    calls: list[str] = []
    why = "more than 64 files under the workdir: their metadata matters"
    state = prepare_cache(_target(Path("/x"), calls, evict=why), FakeWorkload(cache="cold"))
    assert calls == ["evict", "full"]
    assert state.record == {"cold_method": "full", "cold_method_why": why}


def test_a_known_failure_skips_the_eviction() -> None:
    calls: list[str] = []
    failed = "eviction failed the cold check (cold-not-verified: device read 0 B of 9 B)"
    state = prepare_cache(_target(Path("/x"), calls), FakeWorkload(cache="cold"), failed)
    assert calls == ["full"]
    assert state.record["cold_method_why"] == failed


def test_direct_and_targets_without_eviction_use_the_full_method() -> None:
    calls: list[str] = []
    assert prepare_cache(_target(Path("/x"), calls), FakeWorkload(cache="direct")).record == {}
    assert calls == ["full"]  # O_DIRECT's check needs the device's cache empty, not the file's
    calls.clear()
    state = prepare_cache(_target(Path("/x"), calls, evict=False), FakeWorkload(cache="cold"))
    assert calls == ["full"] and state.record["cold_method"] == "full"


def test_warm_and_none_neither_evict_nor_drop() -> None:
    calls: list[str] = []
    for cache in ("warm", "none"):
        assert prepare_cache(_target(Path("/x"), calls), FakeWorkload(cache=cache)).record == {}
    assert calls == []


def _delta(read: int) -> ProbeDelta:
    return ProbeDelta(device=Device(read_bytes=read))


def test_an_evicted_read_is_judged_by_the_device_counter() -> None:
    m = Measurement(value=1.0, seconds=1.0, bytes=100 * MiB)
    evicted = CacheState("cold", record={"cold_method": "evict"})
    assert eviction_failed(evicted, m, _delta(100 * MiB)) is None
    assert eviction_failed(evicted, m, _delta(90 * MiB)) is None  # the check's 90 %
    why = eviction_failed(evicted, m, _delta(10 * MiB))
    assert why is not None and f"device read {10 * MiB} B of {100 * MiB} B" in why
    # A full-method sample is not the eviction's to judge: build_sample flags it as before.
    assert eviction_failed(CacheState("cold", record={"cold_method": "full"}), m, _delta(0)) is None


def test_a_failed_eviction_is_measured_again_by_the_full_method_and_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake target has no device: the evicted read shows 0 B read, fails the check, and the
    same iteration is measured again after the full method; every later sample of that subject
    and workload goes straight to the full method, and its extra says why."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "subj-a=10,11,12,13")
    wl = FakeWorkload(cache="cold")
    calls: list[str] = []
    rt = _target(tmp_path, calls)
    run = Runner(Run(run_id="r", started="t"), [rt], [wl], repeat=3).execute()
    assert calls == ["evict", "full", "full", "full"]
    r = run.results[0]
    assert r.samples == [11, 12, 13]  # the evicted iteration's 10 was not kept
    for s in r.sample_details:
        assert s.extra["cold_method"] == "full"
        assert s.extra["cold_method_why"].startswith("eviction failed the cold check")


def test_workdir_files_lists_a_few_files_and_refuses_many(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"x")
    (tmp_path / "sub" / "g").write_bytes(b"y")
    (tmp_path / "link").symlink_to(tmp_path / "f0")
    got = cold.workdir_files(str(tmp_path))
    assert isinstance(got, list)
    assert sorted(Path(p).name for p in got) == ["f0", "f1", "f2", "g"]  # no symlink
    why = cold.workdir_files(str(tmp_path), limit=2)
    assert isinstance(why, str) and "more than 2 files" in why


def test_eviction_without_a_device_says_why(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 8192)
    assert cold.evict(str(tmp_path), None) == "no block device to flush"
