"""tree-hash's native hasher vs `xxhsum -H2` on the same warm trees, alternated.

Three trees in /dev/shm (page cache only, so this measures hashing and copying, not a disk):
many small files, a few big files, and one big file. Each round runs, per tree, `xxhsum -H2`
over the file list (one process, as a user runs it; seed 000) and fsbench's
`_xxhtree.hash_files` over the same list (in-process: no interpreter start-up is charged to
either side), in alternating order. Prints medians of wall time, speed and CPU, and the ratio
fsbench/xxhsum of speeds (the target is >= 1.0). Also `xargs -P N xxhsum` for reference: the
fairest parallel use of xxhsum. Prints, never asserts.

    uv run python bench/treehash_vs_xxhsum.py [--size-mib 256] [--rounds 7] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from fsbench import _xxhtree
from fsbench.treehash.manifest import default_threads, walk_tree
from fsbench.treehash.tree import TreeFile, write_tree

MiB = 1024 * 1024
KiB = 1024


def small_tree(total: int) -> list[TreeFile]:
    # Sizes cycle over 4..124 KiB (mean 64 KiB): thousands of files per 256 MiB.
    files, used, i = [], 0, 0
    while used < total:
        size = (4 + (i * 40) % 124) * KiB
        files.append(TreeFile(f"d{i // 100:03d}/f{i:06d}", size, i))
        used += size
        i += 1
    return files


def big_tree(total: int, n: int) -> list[TreeFile]:
    return [TreeFile(f"big{k}", total // n, 1000 + k) for k in range(n)]


def cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_xxhsum(files: list[str]) -> None:
    # One process over the whole list, like `xxhsum -H2 -- files...`; via xargs only when the
    # list would not fit one command line (xargs then starts as few processes as it can).
    proc = subprocess.run(
        ["xargs", "-0", "xxhsum", "-H2", "--"],
        input=b"\0".join(os.fsencode(f) for f in files),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"xxhsum failed with exit code {proc.returncode}")


def run_xxhsum_parallel(files: list[str], n: int) -> None:
    # Split the list across n xxhsum processes (round-robin, so big files spread out).
    per_process = max(1, -(-len(files) // n))
    subprocess.run(
        ["xargs", "-0", "-P", str(n), "-n", str(per_process), "xxhsum", "-H2", "--"],
        input=b"\0".join(os.fsencode(f) for k in range(n) for f in files[k::n]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def measure(fn: Callable[[], None], child: bool) -> tuple[float, float]:
    c0 = cpu_children() if child else cpu_self()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    c1 = cpu_children() if child else cpu_self()
    return wall, c1 - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=256, help="bytes per tree (MiB)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default="/dev/shm", help="where the trees go (default /dev/shm)")
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--bufsize", type=int, default=256 * KiB, help="fsbench's read size")
    ap.add_argument("--overlap", action="store_true", help="double-buffer within a file")
    args = ap.parse_args()
    if shutil.which("xxhsum") is None:
        sys.exit("xxhsum not found; apt-get install xxhash")
    total = args.size_mib * MiB
    base = tempfile.mkdtemp(prefix="fsbench-bench-treehash-", dir=args.dir)
    trees = {
        "small files": small_tree(total),
        "4 big files": big_tree(total, 4),
        "1 big file": big_tree(total, 1),
    }
    try:
        lists: dict[str, list[str]] = {}
        for name, layout in trees.items():
            root = os.path.join(base, name.replace(" ", "-"))
            write_tree(root, layout)
            lists[name] = walk_tree(root)[0]
        ways: dict[str, tuple[Callable[[list[str]], None], bool]] = {
            "xxhsum": (run_xxhsum, True),
            f"xxhsum xargs -P{args.threads}": (
                lambda f: run_xxhsum_parallel(f, args.threads),
                True,
            ),
            "fsbench": (
                lambda f: _xxhtree.hash_files(f, args.threads, args.bufsize, args.overlap),
                False,
            ),
        }
        # Warm: every file read once before anything is timed (tmpfs is memory anyway).
        for files in lists.values():
            _xxhtree.hash_files(files, args.threads)
        wall: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for tree, files in lists.items():
                order = list(ways) if r % 2 == 0 else list(reversed(ways))
                for way in order:
                    fn, child = ways[way]
                    w, c = measure(lambda fn=fn, files=files: fn(files), child)
                    wall.setdefault((tree, way), []).append(w)
                    cpu.setdefault((tree, way), []).append(c)
        load = os.getloadavg()[0]
        print(
            f"{args.rounds} rounds, {args.size_mib} MiB per tree in {args.dir}, "
            f"{args.threads} fsbench threads, read size {args.bufsize // KiB} KiB"
            f"{', overlap' if args.overlap else ''}, "
            f"load average {load:.1f} on {os.cpu_count()} CPUs"
        )
        head = f"{'tree':<13} {'files':>6} {'way':<18} {'median s':>9} {'MiB/s':>8} {'CPU s':>7}"
        print(head)
        for tree, files in lists.items():
            for way in ways:
                med = statistics.median(wall[(tree, way)])
                print(
                    f"{tree:<13} {len(files):>6} {way:<18} {med:>9.3f} "
                    f"{args.size_mib / med:>8.0f} {statistics.median(cpu[(tree, way)]):>7.3f}"
                )
        print("\nspeed ratio fsbench/xxhsum (target >= 1.0), median and best-of rounds:")
        for tree in lists:
            x, f = wall[(tree, "xxhsum")], wall[(tree, "fsbench")]
            par = wall[(tree, f"xxhsum xargs -P{args.threads}")]
            print(
                f"  {tree:<13} {statistics.median(x) / statistics.median(f):5.2f}  "
                f"(best {min(x) / min(f):4.2f}; vs xargs -P{args.threads}: "
                f"{statistics.median(par) / statistics.median(f):4.2f})"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
