"""copy-small's copy loop against `cp -r` on the same tree, alternated in one invocation
(cp, fsbench, cp, fsbench, ...).

    uv run python bench/copy_small_vs_cp.py [--rounds 7] [--files 500] [--src /dev/shm] [--dst DIR]

Both copy the same tree of 1 MiB files (tmpfs → tmpfs by default, where per-file overhead shows
most) into a fresh directory; fsbench's side is the code copy-small/out runs (no fsync; `in`
adds one fsync per file, a no-op on tmpfs). The time of `cp -r` includes starting the cp
process (~1 ms). Prints the median of each and the ratio of throughputs fsbench/cp; it asserts
nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from fsbench.workloads.base import fill_file
from fsbench.workloads.copy import METHODS, CopyState, copy_tree

MiB = 1024 * 1024


def make_tree(root: Path, files: int, per_dir: int = 100) -> None:
    for i in range(files):
        d = root / f"d{i // per_dir:03d}"
        d.mkdir(parents=True, exist_ok=True)
        fill_file(str(d / f"f{i:06d}.bin"), MiB)


def time_cp(src: Path, dst: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    return time.perf_counter() - t0


def time_fsbench(src: Path, dst: Path, method: str) -> tuple[float, str]:
    st = CopyState(method)
    t0 = time.perf_counter()
    copy_tree(str(src), str(dst), st, fsync=False)
    return time.perf_counter() - t0, st.method


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--src", default="/dev/shm", help="where the source tree is made")
    ap.add_argument("--dst", default=None, help="where the copies go (default: --src)")
    args = ap.parse_args()
    src_root = Path(tempfile.mkdtemp(prefix="fsbench-bench-", dir=args.src))
    dst_root = Path(tempfile.mkdtemp(prefix="fsbench-bench-", dir=args.dst or args.src))
    try:
        tree = src_root / "tree"
        make_tree(tree, args.files)
        total = args.files * MiB
        cp_s, ours_s, method = [], [], METHODS[0]
        for i in range(args.rounds):
            a, b = dst_root / f"cp-{i}", dst_root / f"fsbench-{i}"
            cp_s.append(time_cp(tree, a))
            t, method = time_fsbench(tree, b, method)
            ours_s.append(t)
            shutil.rmtree(a)
            shutil.rmtree(b)
        cp_med, ours_med = statistics.median(cp_s), statistics.median(ours_s)
        print(f"tree: {args.files} × 1 MiB, {src_root} → {dst_root}, {args.rounds} rounds")
        print(f"cp -r:      median {cp_med * 1000:8.1f} ms  {total / MiB / cp_med:8.0f} MiB/s")
        print(
            f"copy-small: median {ours_med * 1000:8.1f} ms  {total / MiB / ours_med:8.0f} MiB/s"
            f"  (method: {method})"
        )
        print(f"ratio fsbench/cp (throughput): {cp_med / ours_med:.2f}")
    finally:
        shutil.rmtree(src_root, ignore_errors=True)
        shutil.rmtree(dst_root, ignore_errors=True)


if __name__ == "__main__":
    main()
