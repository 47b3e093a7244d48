"""The workloads that read the files an aging left (workloads/agedtree.py), on plain
directories without root: which files they read, the fresh copy, the digests they check, what
they refuse; the tree's record; and what changed with age (report/model/aging_why.py)."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
import xxhash

from fsbench.aging.measure import record_tree
from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.registry import resolve_workloads
from fsbench.workloads.agedtree import AGED_JOBS, MIRROR_DIR, select
from fsbench.workloads.base import AgedTree, Target

KiB, MiB = 1024, 1024 * 1024
# (directory, files as (name, size)): walk order is a directory's files, then its subdirectories.
LAYOUT = {
    "": [("f1", 3 * KiB)],
    "d1": [("f2", 2 * MiB), ("f3", 100)],
    "d1/d3": [("f4", 1500 * KiB)],
    "d2": [("f5", 40 * KiB), ("f6", 0)],
    "d9": [],  # an empty directory: listed as an entry of the root, never read
}


def make_aged(root: Path) -> AgedTree:
    """Write LAYOUT with random content and record it as aging/measure does after aging."""
    rnd = random.Random(1)
    for d, files in LAYOUT.items():
        (root / d).mkdir(parents=True, exist_ok=True)
        for name, size in files:
            (root / d / name).write_bytes(rnd.randbytes(size))
    rec = record_tree(str(root))
    files = tuple((str(f[0]), int(f[1]), str(f[2])) for f in rec["files"])
    return AgedTree("light", str(root), False, files, tuple(rec["dirs"]))


def target(workdir: Path, tree: AgedTree | None, size: int = 64 * MiB) -> Target:
    return Target("s", str(workdir), "kernel", size, fs="ext4", aged_tree=tree)


def test_record_tree_lists_files_in_walk_order_with_digests(tmp_path: Path) -> None:
    tree = make_aged(tmp_path / "aged")
    assert [f[0] for f in tree.files] == ["f1", "d1/f2", "d1/f3", "d1/d3/f4", "d2/f5", "d2/f6"]
    f2 = (tmp_path / "aged" / "d1" / "f2").read_bytes()
    assert tree.files[1] == ("d1/f2", 2 * MiB, xxhash.xxh3_128_hexdigest(f2))
    assert tree.dirs == ("d1", "d1/d3", "d2", "d9")


def test_select_takes_whole_directories_in_walk_order(tmp_path: Path) -> None:
    tree = make_aged(tmp_path / "aged")
    small = select(tree, 1)  # the first directory only, whatever its size
    assert [f[0] for f in small.files] == ["f1"] and small.dirs == ("",)
    assert small.children == ("d1", "d2", "d9")  # listed as the root's entries
    mid = select(tree, 3 * KiB + 1)  # the root's files are 3 KiB: d1 follows, whole
    assert mid.dirs == ("", "d1") and [f[0] for f in mid.files][-1] == "d1/f3"
    assert "d1/d3" in mid.children
    everything = select(tree, 1 << 40)
    assert len(everything.files) == len(tree.files) and everything.bytes == sum(
        f[1] for f in tree.files
    )
    assert select(tree, 3 * KiB + 1) == mid  # deterministic


def test_aged_and_fresh_copy_read_the_same_files(tmp_path: Path) -> None:
    tree = make_aged(tmp_path / "aged")
    mirror = replace(tree, root=str(tmp_path / "fresh" / MIRROR_DIR), mirror=True)
    aged_t, fresh_t = target(tmp_path / "w1", tree), target(tmp_path / "fresh", mirror)
    got = {}
    for wl in AGED_JOBS:
        for name, t in (("aged", aged_t), ("fresh", fresh_t)):
            wl.prepare(t)
            m = wl.run(t)
            assert m.value > 0 and m.seconds > 0
            got[(wl.id, name)] = (m.ops, m.bytes, wl.params(t))
    for wl in AGED_JOBS:
        assert got[(wl.id, "aged")][:2] == got[(wl.id, "fresh")][:2]
    # seq-read/aged reads the files of 1 MiB or more; tree-hash/aged all of them.
    assert got[("seq-read/aged", "aged")][:2] == (2, 2 * MiB + 1500 * KiB)
    assert got[("tree-hash/aged", "aged")][0] == 6
    # metadata/aged lists every directory holding a file: its files and subdirectories.
    assert got[("metadata/aged", "aged")][0] == 6 + 4
    assert got[("tree-hash/aged", "fresh")][2]["tree"] == "fresh copy of the aged:light tree"
    # The copy has the aged tree's paths and sizes (its own content).
    copy = sorted(
        (str(p.relative_to(mirror.root)), p.stat().st_size)
        for p in Path(mirror.root).rglob("*")
        if p.is_file()
    )
    assert copy == sorted((f[0], f[1]) for f in tree.files)


def test_a_changed_aged_file_fails_the_sample(tmp_path: Path) -> None:
    tree = make_aged(tmp_path / "aged")
    t = target(tmp_path / "w", tree)
    path = tmp_path / "aged" / "d1" / "f2"
    data = bytearray(path.read_bytes())
    data[12345] ^= 1
    path.write_bytes(bytes(data))
    wl = AGED_JOBS[0]
    wl.prepare(t)
    with pytest.raises(WorkloadFailed, match="d1/f2: content differs"):
        wl.run(t)
    os.unlink(tmp_path / "aged" / "d2" / "f5")
    with pytest.raises(WorkloadFailed, match="not as recorded"):
        AGED_JOBS[2].run(t)


def test_without_an_aged_image_they_are_unsupported_with_the_reason(tmp_path: Path) -> None:
    for wl in AGED_JOBS:
        with pytest.raises(Unsupported, match=r"no aged ext4 image in this run.*--age"):
            wl.prepare(target(tmp_path, None))
        assert wl.params(target(tmp_path, None))["cache"] == "cold"  # params never raise
        ro = replace(target(tmp_path, make_aged(tmp_path / f"a-{wl.name}")), read_only=True)
        with pytest.raises(Unsupported, match="read-only"):
            wl.prepare(ro)


def test_seq_read_aged_with_no_large_file_says_so(tmp_path: Path) -> None:
    tree = make_aged(tmp_path / "aged")
    with pytest.raises(Unsupported, match="1 MiB or larger"):
        AGED_JOBS[1].prepare(target(tmp_path / "w", tree, size=1))  # the root's 3 KiB only


def test_named_only_by_variant_or_group() -> None:
    assert [w.id for w in resolve_workloads("tree-hash", None)] == [
        "tree-hash/cold",
        "tree-hash/warm",
    ]
    assert [w.id for w in resolve_workloads("aged", None)] == [
        "tree-hash/aged",
        "seq-read/aged",
        "metadata/aged",
    ]
    assert [w.id for w in resolve_workloads("tree-hash/aged,seq-write/fsync", None)] == [
        "tree-hash/aged",
        "seq-write/fsync",
    ]


def test_lab_side_roots_and_integrity(tmp_path: Path) -> None:
    from fsbench.lab.integrity import aged_tree_expected
    from fsbench.lab.lab import LabSubject
    from fsbench.lab.subject import parse_subjects, with_ages
    from fsbench.schedule.targets import aged_tree

    fresh_spec, aged_spec = with_ages(parse_subjects(["ext4"]), ["none", "light"])
    rec = {"profile": "light", "dirs": ["d"], "files": [["d/f", 5, "ab"]]}
    aged = LabSubject(aged_spec, "/m/1", aged_tree=rec)
    fresh = LabSubject(fresh_spec, "/m/0", aged_tree={**rec, "mirror": True})
    a, f = aged_tree(aged), aged_tree(fresh)
    assert a is not None and f is not None
    assert (a.root, a.mirror, a.files) == ("/m/1/aged", False, (("d/f", 5, "ab"),))
    assert (f.root, f.mirror) == (f"/m/0/fsbench/{MIRROR_DIR}", True)
    assert aged_tree(LabSubject(fresh_spec, "/m/2")) is None
    # The integrity check re-reads every aged file; a fresh copy is the workloads' own.
    assert aged_tree_expected(aged) == {"aged/d/f": "ab"}
    assert aged_tree_expected(fresh) == {}


def _result(subject: str, per_gib: dict[str, float], extents: float, reads: int) -> object:
    from fsbench.records.schema import CPU, Result, Sample

    sample = Sample(value=100.0, seconds=1.0, bytes=1 << 30, extra={"extents_per_file": extents})
    return Result(
        subject=subject, workload="tree-hash", workload_id="tree-hash/aged", variant="aged",
        params={}, metric="throughput", unit="MiB/s", samples=[100.0], median=100.0,
        sample_details=[sample], cpu=CPU(per_gib=per_gib),
        trace={"work": {"bytes": 1 << 30, "ops": 10, "seconds": 1.0}, "probes": {"block": "ok"},
               "block": {"requests": {"read": reads}, "bytes": {"read": 1 << 30}}},
    )  # fmt: skip


def test_what_changed_with_age_figure_by_figure() -> None:
    from fsbench.records.schema import Run, Subject
    from fsbench.report.model.aging_why import age_changes, why_line

    run = Run(run_id="r", started="", command=[])
    run.subjects = [Subject(id=s, driver="ext4", fs="ext4", kind="kernel") for s in ("a", "b")]
    fresh = _result("a", {"app": 0.5, "kernel_threads": 0.1}, 1.0, 8192)
    aged = _result("b", {"app": 0.52, "kernel_threads": 0.3}, 1.7, 65536)
    changes = age_changes(fresh, aged, run)  # type: ignore[arg-type]
    keys = [c.key for c in changes]
    # Device requests first (8× as many, an eighth of the size), then CPU, then extents; the
    # app's CPU moved by less than the threshold and is not said.
    assert keys[:2] == ["block.read.count", "block.read.size"]
    assert keys.index("cpu.total") < keys.index("extents") and "cpu.app" not in keys
    count = changes[0]
    assert (count.fresh, count.aged, count.ratio) == (8192, 65536, 8.0)
    line = why_line("a", changes)
    assert line is not None and line.startswith("  a, fresh → aged: device read requests")
    assert "8,192 → 65,536 (8.00×)" in line
    assert age_changes(fresh, fresh, run) == []  # type: ignore[arg-type]
    assert why_line("a", []) is None
