"""Aged images: a deterministic aging workload run once per format through one
reference driver, so every driver of the format is measured on the same aged bytes.

The workload follows Geriatrix (Kadekodi et al., USENIX ATC '18): fill the volume to a stated
utilization with files whose sizes and directory depths follow a published profile, then churn
it (creates, deletes, appends, overwrites, renames) while holding the utilization, until the
bytes written reach a multiple of the volume. The size and depth distributions are Geriatrix's
`agrawal` profile (profiles/agrawal/{size,dir}_distribution.txt in its repository), which
Geriatrix derived from Agrawal et al.'s five-year study of file-system metadata (FAST '07),
the same study Impressions (FAST '09) draws its lognormal-body file sizes from.

Determinism: one thread pinned to one CPU (ext4's per-CPU allocation groups), names from a
counter, sizes and choices from `random.Random(seed)`, content from one seeded buffer, and
the reference mount's options (aging/formats.py): on ext4 blocks are allocated in write()
by the pinned writer, not by writeback whenever it runs, and the journal commits only when the
workload fsyncs (every SYNC_EVERY operations), so blocks freed by deletes become reusable at the
same point every time. What is *not* reproduced between two agings is listed in
docs/aging.md (timestamps, inode generations, journal contents); the layout is.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from fsbench.lab.drivers import DRIVERS, Driver, availability
from fsbench.lab.subject import AGED_DIR, NONE
from fsbench.records.choices import by_name, parse_choices

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Profile:
    name: str
    utilization: float  # live file bytes after the fill, as a share of the volume's capacity
    churn: float  # bytes written while churning, in multiples of the volume's capacity
    description: str


PROFILES: dict[str, Profile] = by_name(
    Profile(NONE, 0.0, 0.0, "today's fresh image: formatted, nothing written"),
    Profile(
        "light",
        0.5,
        1.0,
        "filled to 50 % of the volume, then churned until one volume's worth was written",
    ),
    Profile(
        "heavy",
        0.75,
        3.0,
        "filled to 75 % of the volume (Geriatrix suggests ~80 %), then churned until three "
        "volumes' worth was written",
    ),
)

# Churn operations and their weights while the utilization is within its band (outside it,
# creates or deletes bring it back). Creates and deletes dominate as in Geriatrix; appends,
# overwrites and renames are the rest of what the issue names.
MIX: tuple[tuple[str, float], ...] = (
    ("create", 0.35),
    ("delete", 0.35),
    ("append", 0.12),
    ("overwrite", 0.10),
    ("rename", 0.08),
)
BAND = 0.02  # utilization held within ±2 % of the profile's while churning

# Geriatrix's agrawal profile: (largest size in bytes, weight) per size bucket, and
# (depth, files weight, directories weight) per directory depth. Sizes are drawn log-uniformly
# inside a bucket (from the previous bucket's bound).
SIZE_BUCKETS: tuple[tuple[int, int], ...] = (
    (8, 1), (32, 7), (128, 16), (512, 40), (2048, 50), (8192, 46), (32768, 35),
    (131072, 20), (524288, 10), (2097152, 4), (8388608, 1),
)  # fmt: skip
DEPTHS: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (2, 2, 5), (3, 14, 13), (4, 15, 19), (5, 23, 30), (6, 24, 36), (7, 42, 32),
    (8, 22, 26), (9, 15, 22), (10, 12, 17), (11, 7, 8), (12, 4, 5), (13, 3, 2), (14, 2, 1),
    (15, 1, 1),
)  # fmt: skip
FILES_PER_DIR = 10  # directories made: expected files / this (Agrawal et al.: ~10 per dir)
_BUF = 1 * MiB  # the content buffer; longer writes repeat it

SYNC_EVERY = 64  # operations between two fsyncs of the tree's root (a journal commit on ext4)


def parse_ages(text: str) -> list[str]:
    """`--age none,light` -> the profile names in the order given (UsageError otherwise)."""
    return parse_choices("--age", text, PROFILES, "profile", "none,light")


def reference_driver(fs: str) -> Driver | None:
    """The driver that ages images of `fs`: the kernel's where this machine has one, else the
    first available FUSE driver (ntfs-3g for ntfs on a kernel without ntfs3)."""
    candidates = sorted(
        (d for d in DRIVERS.values() if d.fs == fs), key=lambda d: d.kind != "kernel"
    )
    return next((d for d in candidates if availability(d).available), None)


# -- the distributions ------------------------------------------------------------------------
def _cumulative(weights: list[float]) -> list[float]:
    total, out = 0.0, []
    for w in weights:
        total += w
        out.append(total)
    return out


_SIZE_CUM = _cumulative([w for _, w in SIZE_BUCKETS])
_FILE_DEPTH_CUM = _cumulative([w for _, w, _ in DEPTHS])
_DIR_DEPTH_CUM = _cumulative([w for _, _, w in DEPTHS])


def _pick(rnd: random.Random, cum: list[float]) -> int:
    return bisect.bisect_right(cum, rnd.random() * cum[-1])


def sample_size(rnd: random.Random) -> int:
    i = min(_pick(rnd, _SIZE_CUM), len(SIZE_BUCKETS) - 1)
    hi = SIZE_BUCKETS[i][0]
    lo = SIZE_BUCKETS[i - 1][0] if i else 1
    return int(math.exp(rnd.uniform(math.log(lo), math.log(hi))))


def mean_size() -> float:
    """The distribution's mean (log-uniform within each bucket): sizes the directory tree."""
    total = sum(w for _, w in SIZE_BUCKETS)
    out, lo = 0.0, 1
    for hi, w in SIZE_BUCKETS:
        out += w / total * (hi - lo) / math.log(hi / lo)
        lo = hi
    return out


# -- the workload -----------------------------------------------------------------------------
@dataclass
class _File:
    path: str
    size: int


@dataclass
class AgingStats:
    ops: dict[str, int] = field(default_factory=dict)
    bytes_written: int = 0
    files: int = 0
    dirs: int = 0
    live_bytes: int = 0
    seconds: float = 0.0
    enospc: int = 0  # writes the volume refused (the file is dropped; deterministic too)

    def record(self) -> dict[str, Any]:
        return {
            "ops": dict(self.ops),
            "bytes_written": self.bytes_written,
            "files": self.files,
            "dirs": self.dirs,
            "live_bytes": self.live_bytes,
            "seconds": round(self.seconds, 3),
            "enospc": self.enospc,
        }


class Ager:
    """Ages the tree under `root` (a fresh mount's directory) for `profile` and `seed`.

    `capacity` is the volume's size in bytes as statvfs reports it on the fresh mount; the
    targets are logical bytes (sums of file sizes), so the sequence of operations depends only
    on the profile, the seed and that capacity, never on timing."""

    def __init__(self, root: str, profile: Profile, seed: int, capacity: int) -> None:
        self.root = root
        self.profile = profile
        self.rnd = random.Random(f"fsbench aging {profile.name} {seed}")
        self.buf = memoryview(random.Random(seed).randbytes(_BUF))
        self.target = int(profile.utilization * capacity)
        self.churn_budget = int(profile.churn * capacity)
        self.dirs_by_depth: dict[int, list[str]] = {0: [root]}
        self.all_dirs: list[str] = []
        self.files: list[_File] = []
        self.live = 0
        self.counter = 0
        self.n_ops = 0
        self.root_fd = -1
        self.stats = AgingStats(ops={name: 0 for name, _ in MIX})

    # directories -------------------------------------------------------------------------
    def make_dirs(self) -> None:
        n = max(8, int(self.target / mean_size() / FILES_PER_DIR))
        for _ in range(n):
            depth = DEPTHS[min(_pick(self.rnd, _DIR_DEPTH_CUM), len(DEPTHS) - 1)][0]
            while depth - 1 not in self.dirs_by_depth:
                depth -= 1
            parents = self.dirs_by_depth[depth - 1]
            parent = parents[self.rnd.randrange(len(parents))]
            self.counter += 1
            path = os.path.join(parent, f"d{self.counter:06d}")
            os.mkdir(path)
            self.dirs_by_depth.setdefault(depth, []).append(path)
            self.all_dirs.append(path)
        self.stats.dirs = n

    def _dir_for_file(self) -> str:
        depth = DEPTHS[min(_pick(self.rnd, _FILE_DEPTH_CUM), len(DEPTHS) - 1)][0]
        while depth not in self.dirs_by_depth:
            depth -= 1
        dirs = self.dirs_by_depth[depth]
        return dirs[self.rnd.randrange(len(dirs))]

    # operations ---------------------------------------------------------------------------
    def _write(self, fd: int, n: int) -> int:
        done = 0
        while done < n:
            k = min(_BUF, n - done)
            done += os.write(fd, self.buf[:k])
        return done

    def _written(self, fd: int, n: int) -> bool:
        """Write n bytes; False when the volume is full (deterministic as well)."""
        try:
            self.stats.bytes_written += self._write(fd, n)
        except OSError as e:
            if e.errno != 28:  # ENOSPC
                raise
            self.stats.enospc += 1
            return False
        return True

    def create(self) -> None:
        self.counter += 1
        path = os.path.join(self._dir_for_file(), f"f{self.counter:07d}")
        size = sample_size(self.rnd)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            ok = self._written(fd, size)
        finally:
            os.close(fd)
        if not ok:
            os.unlink(path)
            return
        self.files.append(_File(path, size))
        self.live += size
        self.stats.ops["create"] += 1

    def step(self, op: str) -> None:
        getattr(self, op)()
        self.n_ops += 1
        if self.n_ops % SYNC_EVERY == 0:
            os.fsync(self.root_fd)

    def _victim(self) -> int:
        return self.rnd.randrange(len(self.files))

    def delete(self) -> None:
        i = self._victim()
        f = self.files[i]
        os.unlink(f.path)
        self.files[i] = self.files[-1]  # O(1) removal; the order stays deterministic
        self.files.pop()
        self.live -= f.size
        self.stats.ops["delete"] += 1

    def append(self) -> None:
        f = self.files[self._victim()]
        n = min(sample_size(self.rnd), _BUF)
        fd = os.open(f.path, os.O_WRONLY | os.O_APPEND)
        try:
            ok = self._written(fd, n)
        finally:
            os.close(fd)
        if ok:
            f.size += n
            self.live += n
            self.stats.ops["append"] += 1

    def overwrite(self) -> None:
        f = self.files[self._victim()]
        if f.size == 0:
            return
        off = self.rnd.randrange(f.size)
        n = min(sample_size(self.rnd), f.size - off, _BUF)
        fd = os.open(f.path, os.O_WRONLY)
        try:
            self.stats.bytes_written += os.pwrite(fd, self.buf[:n], off)
        finally:
            os.close(fd)
        self.stats.ops["overwrite"] += 1

    def rename(self) -> None:
        f = self.files[self._victim()]
        self.counter += 1
        new = os.path.join(self._dir_for_file(), f"f{self.counter:07d}")
        os.rename(f.path, new)
        f.path = new
        self.stats.ops["rename"] += 1

    # phases -------------------------------------------------------------------------------
    def fill(self) -> None:
        while self.live < self.target:
            before = self.stats.enospc
            self.step("create")
            if self.stats.enospc > before + 8:  # the volume is full below the target
                break

    def churn(self) -> None:
        start = self.stats.bytes_written
        lo, hi = self.target * (1 - BAND), self.target * (1 + BAND)
        names = [n for n, _ in MIX]
        cum = _cumulative([w for _, w in MIX])
        while self.stats.bytes_written - start < self.churn_budget:
            if not self.files or self.live < lo:
                op = "create"
            elif self.live > hi:
                op = "delete"
            else:
                op = names[min(_pick(self.rnd, cum), len(names) - 1)]
            if op != "create" and not self.files:
                op = "create"
            before = self.stats.bytes_written
            self.step(op)
            if op == "create" and self.stats.bytes_written == before and self.stats.enospc > 64:
                break  # nothing fits any more: stop rather than spin

    def run(self) -> AgingStats:
        t0 = time.monotonic()
        os.makedirs(self.root, exist_ok=True)
        self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.make_dirs()
            os.fsync(self.root_fd)
            self.fill()
            self.churn()
            os.fsync(self.root_fd)
        finally:
            os.close(self.root_fd)
        self.stats.files = len(self.files)
        self.stats.live_bytes = self.live
        self.stats.seconds = time.monotonic() - t0
        return self.stats


def age_tree(mountpoint: str, profile: Profile, seed: int) -> AgingStats:
    """Age a fresh mount in place, single-threaded on one CPU (restored after). Run it through
    `main` (its own process) for a reproducible layout: see PID_COLOUR."""
    st = os.statvfs(mountpoint)
    capacity = st.f_blocks * st.f_frsize
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        stats = Ager(os.path.join(mountpoint, AGED_DIR), profile, seed, capacity).run()
        os.sync()
    finally:
        os.sched_setaffinity(0, before)
    return stats


# ext4 without delayed allocation starts a file's block goal at a "colour" of its group chosen
# by the writer's pid % 16 (ext4_inode_to_goal_block), so the writer's pid is part of the layout:
# the aging process forks until it has a child whose pid is 0 modulo 16, and that child ages.
PID_COLOUR = 16
_RETRY = 99


def main(argv: list[str]) -> int:
    """`python -m fsbench.aging.recipe MOUNTPOINT PROFILE SEED`: prints the stats as JSON."""
    mountpoint, name, seed = argv[0], argv[1], int(argv[2])
    while True:
        pid = os.fork()
        if pid == 0:
            if os.getpid() % PID_COLOUR:
                os._exit(_RETRY)
            try:
                stats = age_tree(mountpoint, PROFILES[name], seed)
                sys.stdout.write(json.dumps(stats.record()) + "\n")
                sys.stdout.flush()
                os._exit(0)
            except BaseException as e:
                sys.stderr.write(f"aging failed: {e}\n")
                sys.stderr.flush()
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != _RETRY:
            return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
