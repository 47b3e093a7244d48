"""Workloads that meet the aged layout (docs/aging.md): they read the files an aging
left on the image, not files of their own written into its free space.

- `tree-hash/aged`: XXH128 of the aged tree's files on native threads, from a cold start;
- `seq-read/aged`: those of its files of 1 MiB or more, read one after another on one thread
  in 1 MiB reads, cold: a sequential read of files whose extents the churn scattered;
- `metadata/aged`: `ls -l` of the tree's directories (open, read every entry, lstat each; timed
  in C), cold.

Which files: whole directories of the tree, in walk order, until their files reach the
workload's byte budget, which is the same on every subject, so every subject reads the same
paths and sizes. On a fresh subject of the format the tree is not there: the same paths and
sizes (and the same subdirectories, so listings agree) are written fresh first, untimed, with
content from per-file seeds like tree-hash's. The aged/fresh ratio then compares the same files
laid out by a long history against laid out at once, as Conway et al. (FAST '17) compare an aged
tree with its fresh copy. With several aged profiles in a run the fresh copy is of the first.
Without an aged image of the format in the run (no `--age`, `--age none`, a directory target)
they are unsupported, with the reason.

Every byte read is checked: aged files against the digests the reference mount read right after
aging (aging/measure.record_tree), fresh copies against their seeds. The variants are named only
as NAME/VARIANT or by the group `aged`: a bare `tree-hash` keeps meaning its own tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, ClassVar

import xxhash

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.treehash.manifest import default_threads, unreadable
from fsbench.treehash.tree import READ_BUFSIZE, TreeFile, expected_digests, write_tree
from fsbench.workloads.base import OPS, AgedTree, Declared, Measurement, Target, Timed

MiB = 1024 * 1024
MIRROR_DIR = "aged-tree"  # the fresh copy's root in a fresh subject's workdir
SPACE_GROUP = "aged-tree"  # one budget share for the three: they read the same files
LARGE = MiB  # seq-read/aged reads the selected files at least this large
SEQ_BUFSIZE = MiB  # and in reads of this size, as fio's seq-read does
GROUP = "aged"  # `--workloads aged`: every workload of this module

AgedFile = tuple[str, int, str]  # (path below the tree's root, size, XXH3-128)


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


@dataclass(frozen=True)
class Selection:
    """The part of an aged tree a workload reads at a byte budget."""

    files: tuple[AgedFile, ...]
    dirs: tuple[str, ...]  # the directories holding them ("" is the tree's root)
    children: tuple[str, ...]  # those directories' subdirectories (listed as entries)

    @property
    def bytes(self) -> int:
        return sum(f[1] for f in self.files)

    def signature(self) -> str:
        h = hashlib.sha256()
        for rel, size, _ in self.files:
            h.update(f"{rel}\0{size}\n".encode())
        for d in self.children:
            h.update(f"{d}/\n".encode())
        return h.hexdigest()


def select(tree: AgedTree, budget: int) -> Selection:
    """Whole directories in walk order (the order of their first file in the record) until
    their files reach `budget`: deterministic, and a directory is listed with all its files."""
    by_dir: dict[str, list[AgedFile]] = {}
    for f in tree.files:
        by_dir.setdefault(_parent(f[0]), []).append(f)
    files: list[AgedFile] = []
    dirs: list[str] = []
    total = 0
    for d, fs in by_dir.items():
        if total >= budget:
            break
        dirs.append(d)
        files += fs
        total += sum(f[1] for f in fs)
    chosen = set(dirs)
    children = tuple(d for d in tree.dirs if _parent(d) in chosen)
    return Selection(tuple(files), tuple(dirs), children)


def mirror_files(sel: Selection) -> list[TreeFile]:
    """The fresh copy: the same paths and sizes, content from a seed per path."""
    return [TreeFile(rel, size, xxhash.xxh64_intdigest(rel.encode())) for rel, size, _ in sel.files]


def _marker(target: Target) -> str:
    return os.path.join(target.workdir, MIRROR_DIR + ".layout")


def write_mirror(target: Target, root: str, sel: Selection) -> None:
    """Untimed: lay the fresh copy out unless this very copy is already there."""
    sig = sel.signature()
    try:
        with open(_marker(target)) as f:
            if json.load(f).get("signature") == sig:
                return
    except (OSError, ValueError):
        pass
    try:
        os.makedirs(target.workdir, exist_ok=True)
        if os.path.lexists(_marker(target)):
            os.unlink(_marker(target))
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        for d in sel.children:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        write_tree(root, mirror_files(sel))
        with open(_marker(target), "w") as f:
            json.dump({"signature": sig, "files": len(sel.files)}, f)
    except OSError as e:
        shutil.rmtree(root, ignore_errors=True)  # a partial copy only takes others' space
        raise WorkloadFailed(f"writing the fresh copy of the aged tree: {e.strerror or e}") from e


def expected(tree: AgedTree, sel: Selection) -> dict[str, str]:
    if not tree.mirror:
        return {rel: dig for rel, _, dig in sel.files}
    return expected_digests(mirror_files(sel))


# Extents per file of a subject's selection, measured once (FIEMAP; None where there is none).
_EXTENTS: dict[tuple[str, str], dict[str, float] | None] = {}


def extents_of(root: str, files: list[AgedFile]) -> dict[str, float] | None:
    """Mean extents per (non-empty) file and the share in more than one, by FIEMAP; None where
    the mount has no FIEMAP (FUSE)."""
    from fsbench.aging.measure import fiemap

    key = (root, hashlib.sha256("\n".join(f[0] for f in files).encode()).hexdigest())
    if key not in _EXTENTS:
        counts = []
        try:
            for rel, size, _ in files:
                if size:
                    counts.append(len(fiemap(os.path.join(root, rel))))
        except OSError:
            counts = []
        _EXTENTS[key] = (
            {
                "extents_per_file": round(sum(counts) / len(counts), 3),
                "fragmented_share": round(sum(c > 1 for c in counts) / len(counts), 4),
            }
            if counts
            else None
        )
    return _EXTENTS[key]


def tree_of(target: Target) -> AgedTree:
    if target.read_only:
        raise Unsupported("reads the files an aging left: a --read-only volume has none")
    if target.aged_tree is None:
        fs = target.fs or "this file system"
        raise Unsupported(
            f"no aged {fs} image in this run: it reads the files an aging left (add --age "
            "light or heavy; fresh subjects then read a fresh copy of them)"
        )
    return target.aged_tree


@dataclass(frozen=True)
class AgedRead(Declared):
    """tree-hash/aged and seq-read/aged: read and XXH128 the selected files, cold."""

    cache = "cold"
    merge_extra: ClassVar[dict[str, Any]] = {"files": "sum"}

    name: str
    description: str
    threads: int | None  # None: one per CPU
    bufsize: int
    min_size: int = 0  # only the selected files at least this large
    variant: str = "aged"
    space_group: str = SPACE_GROUP
    by_name: bool = False

    def n_threads(self) -> int:
        return self.threads or default_threads()

    def params(self, target: Target) -> dict[str, Any]:
        p: dict[str, Any] = {
            "engine": "native-xxh128",
            "threads": self.n_threads(),
            "read_size": self.bufsize,
            "cache": self.cache,
            "min_file_size": self.min_size,
            "timed": "read + hash",
        }
        tree = target.aged_tree
        if tree is not None and not target.read_only:
            sel = select(tree, target.size)
            files = self.files(sel)
            p |= {
                "tree": f"fresh copy of the aged:{tree.profile} tree"
                if tree.mirror
                else f"the aged:{tree.profile} tree",
                "files": len(files),
                "tree_bytes": sum(f[1] for f in files),
            }
        return p

    def files(self, sel: Selection) -> list[AgedFile]:
        return [f for f in sel.files if f[1] >= self.min_size]

    def prepare(self, target: Target) -> None:
        tree = tree_of(target)
        sel = select(tree, target.size)
        if not self.files(sel):
            raise Unsupported(
                f"none of the aged tree's files read at this budget is {self.min_size // MiB} "
                "MiB or larger (a larger --size or --scale reads more of it)"
            )
        if tree.mirror:
            write_mirror(target, tree.root, sel)
        expected(tree, sel)  # the fresh copy's digests: computed untimed, once
        extents_of(tree.root, self.files(sel))

    def run(self, target: Target) -> Measurement:
        from fsbench._xxhtree import hash_files

        tree = tree_of(target)
        sel = select(tree, target.size)
        files = self.files(sel)
        paths = [os.path.join(tree.root, rel) for rel, _, _ in files]
        with Timed() as timed:
            results = hash_files(paths, self.n_threads(), self.bufsize)
        failed = unreadable([rel for rel, _, _ in files], results)
        if failed:
            raise WorkloadFailed(failed)
        want = expected(tree, sel)
        for (rel, _, _), (dig, _size, _err) in zip(files, results, strict=True):
            if dig != want[rel]:
                raise WorkloadFailed(f"{rel}: content differs from what was written")
        nbytes = sum(size for _d, size, _e in results)
        return Measurement.rate(
            nbytes / MiB,
            timed.seconds,
            f"reading {len(paths)} aged files",
            timed.used,
            bytes=nbytes,
            ops=len(paths),
            extra={
                "files": len(paths),
                "threads": self.n_threads(),
                **(extents_of(tree.root, files) or {}),
            },
        )


@dataclass(frozen=True)
class AgedListing(Declared):
    """metadata/aged: `ls -l` of the selected directories, cold."""

    cache = "cold"
    metric, unit, higher_is_better = OPS
    merge_extra: ClassVar[dict[str, Any]] = {"files": "sum"}

    name: str = "metadata"
    variant: str = "aged"
    description: str = (
        "with --age: ls -l of the aged tree's directories (open, read every entry, lstat "
        "each; in C), after sync, drop_caches and (FUSE) a remount; fresh subjects list a "
        "fresh copy"
    )
    space_group: str = SPACE_GROUP
    by_name: bool = False

    def params(self, target: Target) -> dict[str, Any]:
        p: dict[str, Any] = {"engine": "native", "operation": "list+lstat", "cache": self.cache}
        tree = target.aged_tree
        if tree is not None and not target.read_only:
            sel = select(tree, target.size)
            p |= {"dirs": len(sel.dirs), "entries": len(sel.files) + len(sel.children)}
        return p

    def prepare(self, target: Target) -> None:
        tree = tree_of(target)
        if tree.mirror:
            write_mirror(target, tree.root, select(tree, target.size))

    def run(self, target: Target) -> Measurement:
        from fsbench import _metaops

        tree = tree_of(target)
        sel = select(tree, target.size)
        try:
            with Timed() as timed:
                res = _metaops.list_dirs(tree.root, list(sel.dirs))
        except OSError as e:
            raise WorkloadFailed(f"listing the aged tree: {e.strerror} ({e.filename})") from None
        if res["failed"]:
            raise WorkloadFailed(
                f"listing the aged tree: {res['failed']} failure(s), the first "
                f"{os.strerror(res['errno'])}"
            )
        want = len(sel.files) + len(sel.children)
        if res["entries"] != want:
            raise WorkloadFailed(
                f"the aged tree is not as recorded: {res['entries']} entries listed, {want} "
                "expected"
            )
        return Measurement.rate(
            res["entries"],
            res["ns"] / 1e9,
            "listing the aged tree",
            timed.used,
            bytes=0,  # no data moves: the runner's byte-based cache checks do not apply
            ops=res["entries"],
            extra={"dirs": res["dirs"], "files": len(sel.files)},
        )


AGED_JOBS: list[Any] = [
    AgedRead(
        "tree-hash",
        "with --age: XXH128 of the files an aging left (whole directories in walk order up "
        "to the byte budget) on native threads, cold; fresh subjects read a fresh copy of "
        "the same files",
        threads=None,
        bufsize=READ_BUFSIZE,
    ),
    AgedRead(
        "seq-read",
        "with --age: the aging's files of 1 MiB or more read one after another on one "
        "thread in 1 MiB reads, cold: a sequential read of fragmented files (fresh "
        "subjects: a fresh copy)",
        threads=1,
        bufsize=SEQ_BUFSIZE,
        min_size=LARGE,
    ),
    AgedListing(),
]
