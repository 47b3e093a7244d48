"""Aged images on real loop devices and mounts, at a small scale (128 MiB, light).

One test walks the whole life of a cache entry: aged once through ext4 (every subject's image
byte-identical to it), reused by a lab session (its digest checked; the workloads that read the
aging's files run on the aged subject and on a fresh copy of them on the fresh one, and the
integrity check re-reads every aged file), aged again when the cached image is corrupted, with
the same files as the first aging. Then an ntfs-3g aging run is interrupted while the image is
being aged: nothing of it may remain, and no image in the cache.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import xxhash
from conftest import (
    REPO,
    RunDirs,
    fsbench_argv,
    leftovers_anywhere,
    mounts_under,
    need_drivers,
    read_record,
    release_leftovers,
    wait_until,
)

from fsbench.aging import imagecache, prepare
from fsbench.lab.backing import Backing
from fsbench.lab.integrity import Guard
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subjects, with_ages
from fsbench.records.schema import Subject
from fsbench.schedule.targets import _lab_target, aged_tree
from fsbench.workloads.agedtree import AGED_JOBS

pytestmark = pytest.mark.root
SIZE = 128 * 1024 * 1024


def digest(path: Path) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def prepare_once(run_id: str) -> list:
    specs = with_ages(parse_subjects(["ext4", "ext4:noatime"]), ["light"])
    with Lab(run_id, Backing("ram"), SIZE, tune_memory=False, aged_images=prepare) as lab:
        lab.check(specs)
        subjects = lab.prepare(specs)
        images = [digest(s.image) for s in subjects]
        return [dict(s.aging or {}) for s in subjects] + images


def aged_workloads(run_id: str) -> tuple[dict, dict, dict]:
    """The aged-tree workloads once on each subject, cold, then the integrity check."""
    specs = with_ages(parse_subjects(["ext4"]), ["none", "light"])
    guard = Guard()
    got = {}
    with Lab(run_id, Backing("ram"), SIZE, tune_memory=False, aged_images=prepare) as lab:
        lab.check(specs)
        subjects = lab.prepare(specs)
        for ls in subjects:
            rec = Subject(id=ls.spec.id, driver="ext4", fs="ext4", kind="kernel")
            guard.before_mount(ls, rec)
            lab.mount(ls)
            guard.after_mount(ls, read_only=False)
            t = _lab_target(lab, ls, 16 * 1024 * 1024, tree=aged_tree(ls))
            for wl in AGED_JOBS:
                wl.prepare(t)
                lab.make_cold(ls)
                got[(ls.spec.id, wl.id)] = (wl.run(t), wl.params(t))
        guard.check_all(lab)
        integrity = {ls.spec.id: guard.watches[ls.spec.id].rec.integrity for ls in subjects}
        return got, integrity, dict(subjects[1].aging or {})


def test_aged_image_cache_determinism_and_interrupt(
    run_id: str, dirs: RunDirs, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_drivers("ext4", "ntfs-3g")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a1, a1b, img1, img1b = prepare_once(run_id)
    assert not a1["reused"] and a1 == a1b  # one aging per format and profile
    assert img1 == img1b == a1["image_digest"]  # every subject's copy is the aged image
    assert a1["reference_driver"] == "ext4" and 0.4 < a1["utilization"] < 0.7
    assert a1["files"]["files"] > 100 and a1["files"]["extents_per_file_mean"] >= 1
    assert a1["free_space"]["free_extents"] > 1

    # Reused (a checked copy, not another aging) by a lab that runs the workloads reading the
    # aging's files on the aged subject and on a fresh copy of them on the fresh one, then
    # checks integrity. In process, not a whole run: a run's fixed costs (noise floor, wake-up
    # probe, start-up) would double this test's time; `compare` itself is in the docs' run.
    got, integrity, a2 = aged_workloads(run_id)
    assert a2["reused"] and a2["image_digest"] == a1["image_digest"]
    assert "tree" not in a2  # thousands of paths stay in the cache's record
    for wl in AGED_JOBS:
        (mf, pf), (ma, pa) = got[("ext4", wl.id)], got[("ext4 (aged:light)", wl.id)]
        assert mf.value > 0 and ma.value > 0 and mf.ops == ma.ops > 0  # the same files
        assert pf.get("files") == pa.get("files") and pf.get("entries") == pa.get("entries")
    (mf, pf), (ma, pa) = (
        got[("ext4", "tree-hash/aged")],
        got[("ext4 (aged:light)", "tree-hash/aged")],
    )
    assert pa["tree"] == "the aged:light tree" and pf["tree"].startswith("fresh copy")
    assert ma.extra["extents_per_file"] >= 1 and mf.extra["extents_per_file"] >= 1  # FIEMAP
    # Integrity on the aged image re-read every file the aging left, besides its own set.
    assert integrity["ext4 (aged:light)"].status == "ok" and integrity["ext4"].status == "ok"
    assert integrity["ext4 (aged:light)"].digest_files > a1["workload"]["files"]

    cached = imagecache.cache_root() / f"{a1['key']}.img"
    with open(cached, "r+b") as f:  # a flipped byte in the metadata area
        f.seek(1024 + 100)
        b = f.read(1)
        f.seek(1024 + 100)
        f.write(bytes([b[0] ^ 0xFF]))
    a3, _, img3, _ = prepare_once(run_id)
    assert not a3["reused"] and "digest" in (a3["note"] or "")
    assert img3 == a3["image_digest"] == digest(cached)  # the corrupt bytes were never used
    # Two independent agings, same profile and seed: the same files. Their physical layout
    # matched when run alone but not under the full suite's load (CI, 00:47 on 2026-11-25: a
    # different layout digest), so it is not asserted: the cache (one aging, reused with its
    # digest checked) is what gives every driver identical bytes.
    assert a3["files"]["files"] == a1["files"]["files"]
    assert not dirs.leftovers()

    # An aging run interrupted while it ages: nothing left, no image in the cache.
    cache2 = tmp_path / "cache2"
    argv = fsbench_argv(
        "compare", "ntfs-3g", "--age", "light", "--size", "128M", "--workloads",
        "seq-write/fsync", "--no-trace", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    env = {**os.environ, "XDG_CACHE_HOME": str(cache2)}
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        rec = read_record(state_dir)
        other = RunDirs.of(rec["run_id"], state_dir)
        assert wait_until(
            lambda: any("aging-" in m.mountpoint for m in mounts_under(other.mount_dir)), 60
        )
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
        assert leftovers_anywhere(other) == {}
        aged = cache2 / "fsbench" / "aged"
        entries = list(aged.iterdir()) if aged.exists() else []
        assert [p for p in entries if p.suffix == ".img" or p.name.startswith("fsbench-")] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        release_leftovers(state_dir)
