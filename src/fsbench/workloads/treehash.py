"""`tree-hash` (`xxhsum -H2` over a whole volume, to compare drivers and to catch bit rot):
walk a tree on the target and XXH128 every file, on native threads.

The tree is laid out once per subject (untimed): a few large files, medium ones and many small
ones in subdirectories, plus edge cases (empty, one byte, exactly one read buffer and one byte
more). Its shape depends only on the byte budget and --scale, so every subject gets the same
tree, and its content is generated from per-file seeds, so every digest is known in advance:
a driver that returns other bytes fails the sample instead of being measured.

The timed part is what a user's `find | xxhsum` does: the directory walk and the hashing. The
hashing runs in this process, so the application's CPU is this process's rusage delta.

On an existing volume (`--read-only`) nothing is written: the files already there are hashed,
the first ones in walk order up to the byte budget, chosen before the sample (so the timed part
is reading and hashing only); their digests cannot be known in advance.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from fsbench.errors import Unsupported, UsageError, WorkloadFailed
from fsbench.treehash.manifest import default_threads, unreadable, walk_tree, write_manifest
from fsbench.treehash.tree import (
    READ_BUFSIZE,
    TREE_DIR,
    TreeFile,
    expected_digests,
    plan_tree,
    signature,
    write_tree,
)
from fsbench.workloads.base import Declared, Measurement, Target, Timed

KiB = 1024
MiB = 1024 * KiB
# --read-only: the existing files each volume root gets hashed, chosen once per process.
_EXISTING: dict[str, list[str]] = {}


def existing_files(root: str, budget: int) -> list[str]:
    """Regular files under root in walk order until their sizes reach the budget."""
    chosen: list[str] = []
    total = 0
    stack = [root]
    while stack and total < budget:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # an unlistable directory of someone's volume: hash the rest
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.path)
                elif e.is_file(follow_symlinks=False) and total < budget:
                    chosen.append(e.path)
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
        stack.extend(reversed(subdirs))
    return chosen


@dataclass(frozen=True)
class TreeHash(Declared):
    """Walk and XXH128 a generated tree; `cache` says what the runner prepares (and verifies)."""

    # How a sample's iterations merge its extras (base.MERGE_RULES).
    merge_extra: ClassVar[dict[str, Any]] = {
        "files": "sum", "walk_s": "sum", "hash_s": "sum",
        "files_per_s": "rate:ops", "cpu_share_of_wall": "rate:cpu",
    }  # fmt: skip

    variant: str = "cold"
    cache: str = "cold"
    description: str = (
        "walk a tree (a few large files, medium ones, many small ones) and XXH128 every file "
        "on native threads, after sync, drop_caches and (FUSE) a remount (seed 000: xxhsum)"
    )
    threads: int | None = None  # None: one per CPU
    manifest: str | None = None  # also write an `xxhsum -H2` manifest of the tree here
    name: str = "tree-hash"

    @property
    def read_only_ok(self) -> bool:
        # On an existing volume it hashes the files already there.
        return True

    def n_threads(self) -> int:
        return self.threads or default_threads()

    def budget(self, target: Target) -> int:
        return max(4 * MiB, target.size) // MiB * MiB

    def layout(self, target: Target) -> list[TreeFile]:
        return plan_tree(self.budget(target), target.scale)

    def params(self, target: Target) -> dict[str, Any]:
        if target.read_only:
            return {
                "engine": "native-xxh128",
                "variant": self.variant,
                "cache": self.cache,
                "files": "existing",
                "byte_budget": target.size,
                "threads": self.n_threads(),
                "read_size": READ_BUFSIZE,
                "timed": "read + hash",
            }
        files = self.layout(target)
        return {
            "engine": "native-xxh128",
            "variant": self.variant,
            "cache": self.cache,
            "files": len(files),
            "tree_bytes": sum(f.size for f in files),
            "threads": self.n_threads(),
            "read_size": READ_BUFSIZE,
            "timed": "walk + read + hash",
        }

    def root(self, target: Target) -> str:
        return os.path.join(target.workdir, TREE_DIR)

    def prepare(self, target: Target) -> None:
        """Untimed: lay the tree out unless this very tree is already there."""
        if target.read_only:
            self._prepare_existing(target)
            return
        files = self.layout(target)
        sig = signature(files)
        root = self.root(target)
        marker = os.path.join(target.workdir, TREE_DIR + ".layout")
        try:
            with open(marker) as f:
                present = json.load(f).get("signature") == sig
        except (OSError, ValueError):
            present = False
        if not present:
            try:
                os.makedirs(target.workdir, exist_ok=True)
                if os.path.lexists(marker):
                    os.unlink(marker)
                shutil.rmtree(root, ignore_errors=True)
                write_tree(root, files)
                with open(marker, "w") as f:
                    # Budget and scale re-plan the tree: the integrity check re-reads it.
                    layout = {"budget": self.budget(target), "scale": target.scale}
                    json.dump({"signature": sig, "files": len(files), **layout}, f)
            except OSError as e:
                # A partial tree would only take the space other workloads need.
                shutil.rmtree(root, ignore_errors=True)
                raise WorkloadFailed(f"laying out the tree: {e.strerror or e}") from e
        expected_digests(files)  # untimed too
        if self.cache == "warm":
            # Read it all once so the measured run finds it cached (the runner verifies).
            from fsbench._xxhtree import hash_files

            hash_files(walk_tree(root)[0], self.n_threads(), READ_BUFSIZE)

    def _existing_root(self, target: Target) -> str:
        return target.mountpoint or target.workdir

    def _prepare_existing(self, target: Target) -> None:
        root = self._existing_root(target)
        if root not in _EXISTING:
            _EXISTING[root] = existing_files(root, target.size)
        if not _EXISTING[root]:
            raise Unsupported("no files on the volume to hash")
        if self.cache == "warm":
            from fsbench._xxhtree import hash_files

            hash_files(_EXISTING[root], self.n_threads(), READ_BUFSIZE)

    def _run_existing(self, target: Target) -> Measurement:
        from fsbench._xxhtree import hash_files

        root = self._existing_root(target)
        paths = _EXISTING.get(root) or existing_files(root, target.size)
        with Timed() as timed:
            results = hash_files(paths, self.n_threads(), READ_BUFSIZE)
        failed = unreadable(paths, results)
        if failed:
            raise WorkloadFailed(failed)
        if self.manifest:
            digests = (d for d, _s, _e in results)
            write_manifest(zip(paths, digests, strict=True), self.manifest, root)
        return self._measurement(paths, results, timed, 0.0)

    def run(self, target: Target) -> Measurement:
        from fsbench._xxhtree import hash_files

        if target.read_only:
            return self._run_existing(target)
        files = self.layout(target)
        expected = expected_digests(files)
        root = self.root(target)
        threads = self.n_threads()
        with Timed() as timed:
            paths, walk_errors = walk_tree(root)
            walked = timed.lap()
            results = hash_files(paths, threads, READ_BUFSIZE)

        if walk_errors:
            p, err = walk_errors[0]
            raise WorkloadFailed(f"listing {p}: {os.strerror(err)}")
        failed = unreadable(paths, results)
        if failed:
            raise WorkloadFailed(failed)
        prefix = len(root) + 1
        got = {
            p[prefix:].replace(os.sep, "/"): d
            for p, (d, _s, _e) in zip(paths, results, strict=True)
        }
        if set(got) != set(expected):
            lost, extra = set(expected) - set(got), set(got) - set(expected)
            what = f"{len(lost)} file(s) missing" if lost else f"{len(extra)} unexpected file(s)"
            raise WorkloadFailed(f"the tree is not as written: {what}, e.g. {min(lost or extra)}")
        bad = sorted(rel for rel, d in got.items() if d != expected[rel])
        if bad:
            raise WorkloadFailed(
                f"content differs from what was written in {len(bad)} file(s), e.g. {bad[0]}"
            )
        if self.manifest:
            write_manifest(
                zip(paths, (d for d, _s, _e in results), strict=True), self.manifest, root
            )

        return self._measurement(paths, results, timed, walked)

    def _measurement(
        self,
        paths: list[str],
        results: list[tuple[str | None, int, int]],
        timed: Timed,
        walk_s: float,
    ) -> Measurement:
        """The first `walk_s` of the timed part the walk (none on an existing volume), the
        rest the hashing."""
        threads = self.n_threads()
        seconds, used = timed.seconds, timed.used
        nbytes = sum(size for _d, size, _e in results)
        return Measurement.rate(
            nbytes / MiB,
            seconds,
            "the tree's read and hash",
            used,
            bytes=nbytes,
            ops=len(paths),
            extra={
                "files": len(paths),
                "walk_s": round(walk_s, 6),
                "hash_s": round(seconds - walk_s, 6),
                "threads": threads,
                # (user + sys) / wall of this process, as `time` reports it; above 1.0 means
                # more than one core was busy.
                "cpu_share_of_wall": round((used.user_s + used.sys_s) / seconds, 4)
                if seconds > 0
                else None,
                "files_per_s": round(len(paths) / seconds, 1) if seconds > 0 else None,
            },
        )


def with_manifest(wl: TreeHash, path: str) -> TreeHash:
    """The same workload, also writing an `xxhsum -H2` manifest (names relative to the tree's
    root; the tree is identical on every subject, verified against the known digests)."""
    return replace(wl, manifest=path)


def apply_manifest(workloads: list[Any], path: str) -> list[Any]:
    """`--manifest FILE` for compare/run: the first tree-hash workload of the list also writes
    FILE after each sample (same content every time). Checked before anything runs."""
    idx = next((i for i, w in enumerate(workloads) if isinstance(w, TreeHash)), None)
    if idx is None:
        raise UsageError("--manifest needs the tree-hash workload (--workloads tree-hash)")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise UsageError(f"--manifest {path}: cannot write a file there")
    out = list(workloads)
    out[idx] = with_manifest(out[idx], os.path.abspath(path))
    return out


TREE_HASH_JOBS: list[TreeHash] = [
    TreeHash(),
    TreeHash(
        variant="warm",
        cache="warm",
        description="walk a tree and XXH128 every file on native threads, the tree just read "
        "(cached): fsbench's hashing and the driver's cached path, not the device",
    ),
]
