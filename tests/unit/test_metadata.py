"""The metadata workload and its native loops (fsbench._metaops), on tmp_path.

The native loops are checked by their effects on real files (created, re-moded, renamed, listed,
gone), the workload by running prepare/run for every variant in orders other than the usual
one, and its error paths by file systems that refuse (a full tmpfs, root only) or by loops that
report what a refusing file system would (chmod EPERM, a chmod that changes nothing).
"""

from __future__ import annotations

import errno
import os
import random
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsbench import _metaops
from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.records.schema import Run, Subject
from fsbench.registry import WORKLOADS, resolve_workloads
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads import metadata
from fsbench.workloads.base import Target, unmet_need
from fsbench.workloads.metadata import (
    METADATA_JOBS,
    LoopResult,
    MetadataOp,
    check_loop,
    file_count,
    file_paths,
    timed_loop,
    tree_dirs,
)

N = 300
SCALE = 0.01  # 100 files per variant: the minimum, quick on any disk


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _make_tree(root: Path, dirs: int) -> None:
    for d in _metaops.dir_names(dirs):
        (root / d).mkdir()


def _ordered(res: LoopResult) -> None:
    lat = res.lat_us
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= res.lat_max_us


def _target(tmp_path: Path, **kw) -> Target:
    return Target("t", str(tmp_path / "work"), "directory", 0, scale=SCALE, **kw)


def _job(variant: str) -> MetadataOp:
    job = WORKLOADS[f"metadata/{variant}"]
    assert isinstance(job, MetadataOp)
    return job


# --- native loops -----------------------------------------------------------------------------


@pytest.mark.parametrize("dirs", [0, 7])
def test_each_operation_does_what_it_says(tmp_path: Path, dirs: int) -> None:
    root = str(tmp_path)
    _make_tree(tmp_path, dirs)
    paths = file_paths(root, N, dirs)
    renamed = file_paths(root, N, dirs, renamed=True)
    assert len(set(paths)) == N

    res = timed_loop("create", root, N, dirs, mode=0o644)
    assert (res.op, res.ops, res.failed, res.errno) == ("create", N, 0, 0)
    assert res.seconds > 0 and res.ops > 0
    _ordered(res)
    assert all(os.path.isfile(p) and os.path.getsize(p) == 0 for p in paths)
    if dirs:
        # Every directory of the tree holds a share of the files, none all of them.
        counts = [len(os.listdir(tmp_path / d)) for d in _metaops.dir_names(dirs)]
        assert sum(counts) == N and max(counts) - min(counts) <= 1

    res = timed_loop("stat", root, N, dirs)
    assert (res.ops, res.failed) == (N, 0)
    _ordered(res)

    for mode in (0o600, 0o644):
        res = timed_loop("chmod", root, N, dirs, mode=mode)
        assert (res.ops, res.failed) == (N, 0)
        assert {_mode(p) for p in paths} == {mode}

    res = timed_loop("readdir", root, N, dirs)
    assert (res.ops, res.failed) == (N, 0)  # entries, without . and ..
    _ordered(res)

    res = timed_loop("rename", root, N, dirs)
    assert (res.ops, res.failed) == (N, 0)
    assert not any(os.path.exists(p) for p in paths)
    assert all(os.path.exists(p) for p in renamed)

    res = timed_loop("unrename", root, N, dirs)
    assert (res.ops, res.failed) == (N, 0)
    assert all(os.path.exists(p) for p in paths)
    assert not any(os.path.exists(p) for p in renamed)

    res = timed_loop("unlink", root, N, dirs)
    assert (res.ops, res.failed) == (N, 0)
    _ordered(res)
    assert not any(os.path.exists(p) for p in paths)


def test_create_writes_fill_bytes(tmp_path: Path) -> None:
    res = timed_loop("create", str(tmp_path), 10, fill=4096)
    assert res.ops == 10
    assert all(os.path.getsize(p) == 4096 for p in file_paths(str(tmp_path), 10))


def test_failures_are_counted_with_the_first_errno(tmp_path: Path) -> None:
    root = str(tmp_path)
    timed_loop("create", root, 50)
    os.unlink(file_paths(root, 50)[10])
    res = timed_loop("create", root, 50)  # 49 exist already
    assert (res.ops, res.failed, res.errno, res.skipped) == (1, 49, errno.EEXIST, 0)
    res = timed_loop("stat", root, 60)  # ten more than there are
    assert (res.ops, res.failed, res.errno) == (50, 10, errno.ENOENT)
    # An ignored errno is skipped, not failed: how prepare tolerates what is already done.
    res = timed_loop("unlink", root, 60, ignore_errno=errno.ENOENT)
    assert (res.ops, res.failed, res.skipped) == (50, 0, 10)


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown operation"):
        timed_loop("chown", str(tmp_path), 10)
    with pytest.raises(ValueError):
        timed_loop("stat", str(tmp_path), 0)
    with pytest.raises(ValueError):
        timed_loop("stat", str(tmp_path), 10, dirs=11)
    with pytest.raises(FileNotFoundError):
        timed_loop("stat", str(tmp_path / "missing"), 10)
    with pytest.raises(FileNotFoundError):
        timed_loop("stat", str(tmp_path), 10, dirs=2)  # the tree's directories do not exist


def test_the_loop_releases_the_gil(tmp_path: Path) -> None:
    """Another Python thread keeps running while a native loop does: the loop holds no GIL."""
    root = str(tmp_path)
    n = 20_000
    window: list[float] = []

    def loop() -> None:
        window.append(time.monotonic())
        timed_loop("create", root, n)  # one native call: a held GIL would stop us throughout
        window.append(time.monotonic())

    ticks: list[float] = []  # one per millisecond this (Python) thread got to run
    t = threading.Thread(target=loop)
    t.start()
    last = 0.0
    while t.is_alive():
        now = time.monotonic()
        if now - last >= 0.001:
            ticks.append(now)
            last = now
    t.join()
    start, end = window
    # Leave the thread start and finish out: only ticks well inside the native calls count.
    margin = (end - start) / 4
    inside = [x for x in ticks if start + margin < x < end - margin]
    assert len(inside) > 10, (len(inside), end - start)


# --- sizes ------------------------------------------------------------------------------------


def test_default_file_count_scales_with_at_least_100() -> None:
    assert file_count(Target("t", "/x", "directory", 0)) == 10_000
    assert file_count(Target("t", "/x", "directory", 0, scale=2.5)) == 25_000
    assert file_count(Target("t", "/x", "directory", 0, scale=0.001)) == 100
    assert tree_dirs(10_000) == 100
    assert tree_dirs(100) == 10
    assert tree_dirs(10**7) == metadata.MAX_TREE_DIRS


# --- the workload -----------------------------------------------------------------------------


def test_registered_variants() -> None:
    ids = [j.id for j in METADATA_JOBS]
    for op in metadata.OPERATIONS:
        for layout in metadata.LAYOUTS:
            assert f"metadata/{op}-{layout}" in ids
    assert "metadata/stat-flat-cold" in ids and "metadata/stat-tree-cold" in ids
    assert all(WORKLOADS[i] is j for i, j in zip(ids, METADATA_JOBS, strict=True))
    assert [getattr(w, "id", "") for w in resolve_workloads("metadata", None)] == ids
    got = resolve_workloads("metadata/chmod-flat,metadata/stat-tree", None)
    assert [w.variant for w in got] == ["chmod-flat", "stat-tree"]  # type: ignore[attr-defined]
    for j in METADATA_JOBS:
        assert (j.name, j.metric, j.unit, j.higher_is_better) == ("metadata", "ops", "ops/s", True)
        assert j.cache == ("cold" if j.variant.endswith("-cold") else "warm")
        assert "warm" in j.description or "cold" in j.description


def _check_measurement(job: MetadataOp, target: Target) -> None:
    m = job.run(target)
    n = job.files(target)
    assert m.ops == n, job.id
    assert m.seconds > 0 and m.value == pytest.approx(n / m.seconds)
    assert m.bytes == 0
    assert m.extra["failed"] == 0 and m.extra["files"] == n
    lat = m.extra["lat_us"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= m.extra["lat_max_us"], job.id
    assert m.app_user_s + m.app_sys_s > 0  # this process's CPU for the loop, from rusage


def _state(job: MetadataOp, target: Target) -> tuple[int, int]:
    root, n, dirs = job.set_dir(target), job.files(target), job.dirs(target)
    base = sum(os.path.exists(p) for p in file_paths(root, n, dirs))
    renamed = sum(os.path.exists(p) for p in file_paths(root, n, dirs, renamed=True))
    return base, renamed


def test_every_variant_prepares_and_runs_in_the_usual_order(tmp_path: Path) -> None:
    target = _target(tmp_path)
    for _round in range(2):
        for job in METADATA_JOBS:
            job.prepare(target)
            n = job.files(target)
            before = _state(job, target)
            if job.operation == "create":
                assert before == (0, 0)
            elif job.operation != "readdir":
                assert before == (n, 0), job.id
            _check_measurement(job, target)
            after = _state(job, target)
            expect = {"create": (n, 0), "rename": (0, n), "unlink": (0, 0)}
            assert after == expect.get(job.operation, before), job.id


def test_every_variant_prepares_from_any_state(tmp_path: Path) -> None:
    """Each prepare reaches its own state whatever ran before (a random order, twice over)."""
    target = _target(tmp_path)
    jobs = METADATA_JOBS * 2
    random.Random(4).shuffle(jobs)
    for job in jobs:
        job.prepare(target)
        _check_measurement(job, target)


def test_prepare_repairs_a_half_done_set(tmp_path: Path) -> None:
    target = _target(tmp_path)
    job = _job("stat-tree")
    job.prepare(target)
    root, n, dirs = job.set_dir(target), job.files(target), job.dirs(target)
    paths = file_paths(root, n, dirs)
    for p in paths[::3]:
        os.unlink(p)
    for p in paths[1::3]:
        os.rename(p, p + ".r")
    job.prepare(target)
    assert _state(job, target) == (n, 0)
    create = _job("create-tree")
    for p in paths[::2]:
        os.rename(p, p + ".r")
    create.prepare(target)
    assert _state(create, target) == (0, 0)


def test_chmod_really_changes_the_mode_every_sample(tmp_path: Path) -> None:
    target = _target(tmp_path)
    job = _job("chmod-flat")
    job.prepare(target)
    paths = file_paths(job.set_dir(target), job.files(target))
    seen = []
    for _ in range(3):
        job.prepare(target)
        before = _mode(paths[0])
        m = job.run(target)
        assert m.extra["mode"] == f"{_mode(paths[0]):04o}"
        assert {_mode(p) for p in paths} == {int(m.extra["mode"], 8)} != {before}
        seen.append(m.extra["mode"])
    assert seen[0] != seen[1] and seen[0] == seen[2]


def test_params_state_the_work(tmp_path: Path) -> None:
    p = _job("rename-tree").params(_target(tmp_path))
    assert p == {
        "engine": "native",
        "variant": "rename-tree",
        "operation": "rename",
        "layout": "tree",
        "files": 100,
        "dirs": 10,
        "cache": "warm",
    }
    assert _job("chmod-flat").params(_target(tmp_path))["modes"] == "0644<->0600"


def test_runner_reports_every_variant_ok(tmp_path: Path) -> None:
    target = _target(tmp_path)
    subject = Subject(id="t", driver="directory", fs="unknown", kind="directory")
    run = Runner(
        Run(run_id="r", started="t"),
        [AlwaysMounted(subject, target)],
        list(METADATA_JOBS),
        repeat=2,
    ).execute()
    assert len(run.results) == len(METADATA_JOBS)
    for r in run.results:
        assert r.status == "ok", (r.params["variant"], r.error)
        assert (r.workload, r.unit) == ("metadata", "ops/s")
        assert len(r.samples) == 2 and all(v > 0 for v in r.samples)
        assert all(
            s.ops == 100 * s.extra.get("iterations", 1) and s.bytes == 0 for s in r.sample_details
        )


# --- what a file system cannot do -------------------------------------------------------------


def test_chmod_without_posix_permissions_is_unsupported(tmp_path: Path) -> None:
    target = _target(tmp_path, capabilities={"posix_permissions": False}, fs="vfat")
    job = _job("chmod-flat")
    # Declared, not checked inside: the runner reads `needs` before anything is set up.
    assert unmet_need(job, target) == (
        "needs POSIX permissions (chmod): vfat has none (driver capability)"
    )
    probed = _target(
        tmp_path,
        capabilities={"posix_permissions": False, "posix_permissions_detail": "mode ignored"},
    )
    assert "does not honour (probed: mode ignored)" in (unmet_need(job, probed) or "")
    assert unmet_need(job, _target(tmp_path, capabilities={"posix_permissions": True})) is None
    assert unmet_need(job, _target(tmp_path, capabilities={})) is None  # unknown: it finds out
    # The other operations do not need permissions.
    stat_job = _job("stat-flat")
    assert unmet_need(stat_job, target) is None
    stat_job.prepare(target)
    assert stat_job.run(target).ops == 100


def _refusing_chmod(monkeypatch: pytest.MonkeyPatch, err: int | None) -> None:
    """Make the chmod loop behave like a file system that refuses it (err) or ignores it."""
    real = metadata.timed_loop

    def fake(op: str, root: str, n: int, dirs: int = 0, mode: int = 0o644, *a, **kw):
        if op != "chmod":
            return real(op, root, n, dirs, mode, *a, **kw)
        res = real("stat", root, n, dirs)  # touch every file, change nothing
        if err is None:
            return LoopResult("chmod", res.seconds, n, 0, 0, 0, res.lat_us, res.lat_max_us)
        return LoopResult("chmod", res.seconds, 0, n, err, 0, {}, 0.0)

    monkeypatch.setattr(metadata, "timed_loop", fake)


@pytest.mark.parametrize("err", [errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS])
def test_chmod_refused_is_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    target = _target(tmp_path)
    job = _job("chmod-flat")
    job.prepare(target)
    _refusing_chmod(monkeypatch, err)
    with pytest.raises(Unsupported, match=os.strerror(err)):
        job.run(target)


def test_chmod_silently_ignored_is_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """exfat-fuse and ntfs-3g (without -o permissions) return 0 from chmod and change nothing."""
    target = _target(tmp_path)
    job = _job("chmod-tree")
    job.prepare(target)
    _refusing_chmod(monkeypatch, None)
    with pytest.raises(Unsupported, match="accepts chmod but ignores it"):
        job.run(target)


def test_loop_failures_map_to_one_line_reasons() -> None:
    def res(op: str, err: int) -> LoopResult:
        return LoopResult(op, 1.0, 90, 10, err, 0, {}, 0.0)

    with pytest.raises(WorkloadFailed, match=r"^create: No space left on device \(ENOSPC\) on 10 "):
        check_loop(res("create", errno.ENOSPC), "create", 100)
    # EPERM is "unsupported" only from chmod; from unlink it is a failure.
    with pytest.raises(WorkloadFailed, match="Operation not permitted"):
        check_loop(res("unlink", errno.EPERM), "unlink", 100)
    with pytest.raises(Unsupported):
        check_loop(res("rename", errno.ENOSYS), "rename", 100)
    check_loop(LoopResult("stat", 1.0, 100, 0, 0, 0, {}, 0.0), "stat", 100)


def test_missing_workdir_parent_is_a_failure(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    target = Target("t", str(tmp_path / "file" / "work"), "directory", 0, scale=SCALE)
    with pytest.raises(WorkloadFailed, match="preparing metadata/stat-flat"):
        _job("stat-flat").prepare(target)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs with room for 50 inodes: creating 100 files runs out of space."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=50", "fsbench-test", str(mnt)],
        check=True,
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert str(mnt) not in Path("/proc/self/mounts").read_text()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tiny tmpfs")
def test_no_space_is_a_one_line_failure(tiny_tmpfs: Path) -> None:
    target = Target("t", str(tiny_tmpfs / "work"), "directory", 0, scale=SCALE)
    create = _job("create-flat")
    create.prepare(target)
    with pytest.raises(WorkloadFailed, match="No space left on device") as exc:
        create.run(target)
    assert "\n" not in str(exc.value)
    # A variant that needs the files fails while preparing them, with the same reason.
    with pytest.raises(WorkloadFailed, match=r"preparing metadata/stat-tree: .*No space") as exc:
        _job("stat-tree").prepare(target)
    assert "\n" not in str(exc.value)
