"""The generated tree tree-hash reads, and every digest in it known from its layout: a few large
files, medium ones and many small ones in directories, with edge sizes (empty, one byte, one
read buffer and one more), each file's content its seed's random block repeated. The workload
(workloads/treehash.py) writes and hashes it; the integrity check (lab/integrity.py) re-reads
it against the same digests."""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
from typing import Any

import xxhash

KiB = 1024
MiB = 1024 * KiB
READ_BUFSIZE = 256 * KiB  # the native hasher's read size (its default)
BLOCK = 64 * KiB  # the random block each file's content repeats
SMALL_FILES = 1000  # at --scale 1
SMALL_RANGE = (512, 64 * KiB)
MEDIUM_RANGE = (256 * KiB, 8 * MiB)
SMALL_SHARE, MEDIUM_SHARE = 0.2, 0.3  # of the byte budget; large files take the rest
LARGE_FILES = 4
PER_DIR = 50  # small files per directory
TREE_DIR = "tree-hash"


@dataclass(frozen=True)
class TreeFile:
    rel: str  # path below the tree's root, "/"-separated
    size: int
    seed: int


def plan_tree(budget: int, scale: float = 1.0) -> list[TreeFile]:
    """The tree for a byte budget: deterministic (a string seed goes through SHA-512)."""
    rnd = random.Random(f"fsbench tree-hash {budget} {scale}")
    files: list[TreeFile] = []

    def add(rel: str, size: int) -> None:
        files.append(TreeFile(rel, size, rnd.getrandbits(64)))

    for rel, size in (
        ("edge/empty", 0),
        ("edge/one-byte", 1),
        ("edge/one-buffer", READ_BUFSIZE),
        ("edge/one-buffer-plus-one", READ_BUFSIZE + 1),
    ):
        add(rel, size)
    used = sum(f.size for f in files)

    def log_uniform(lo: int, hi: int) -> int:
        return int(lo * (hi / lo) ** rnd.random())

    small_budget = int(budget * SMALL_SHARE)
    n_small = max(1, round(SMALL_FILES * scale))
    small_used = 0
    for i in range(n_small):
        size = log_uniform(*SMALL_RANGE)
        if small_used + size > small_budget:
            break
        add(f"small/d{i // PER_DIR:04d}/f{i:06d}.bin", size)
        small_used += size
    medium_budget = int(budget * MEDIUM_SHARE)
    medium_used = 0
    i = 0
    while True:
        size = log_uniform(*MEDIUM_RANGE)
        if medium_used + size > medium_budget:
            break
        add(f"medium/m{i:04d}.bin", size)
        medium_used += size
        i += 1
    rest = budget - used - small_used - medium_used
    each = max(0, rest // LARGE_FILES) // (4 * KiB) * (4 * KiB)
    if each:
        for k in range(LARGE_FILES):
            add(f"large/l{k}.bin", each)
    return files


def signature(files: list[TreeFile]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.rel}\0{f.size}\0{f.seed}\n".encode())
    return h.hexdigest()


def _chunks(f: TreeFile) -> Any:
    """The file's content in pieces of at most 1 MiB: its random block, repeated."""
    if f.size == 0:
        return
    block = random.Random(f.seed).randbytes(min(f.size, BLOCK))
    chunk = block * max(1, MiB // len(block))
    left = f.size
    while left > 0:
        piece = chunk if left >= len(chunk) else chunk[:left]
        yield piece
        left -= len(piece)


def expected_digest(f: TreeFile) -> str:
    h = xxhash.xxh3_128()
    for piece in _chunks(f):
        h.update(piece)
    return h.hexdigest()


# Digests by tree signature: computed once per process, shared by every subject and sample.
_EXPECTED: dict[str, dict[str, str]] = {}


def expected_digests(files: list[TreeFile]) -> dict[str, str]:
    sig = signature(files)
    if sig not in _EXPECTED:
        _EXPECTED[sig] = {f.rel: expected_digest(f) for f in files}
    return _EXPECTED[sig]


def write_tree(root: str, files: list[TreeFile]) -> None:
    made: set[str] = set()
    for f in files:
        path = os.path.join(root, f.rel)
        d = os.path.dirname(path)
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            for piece in _chunks(f):
                view = memoryview(piece)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
