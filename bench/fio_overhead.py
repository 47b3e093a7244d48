"""fsbench's own overhead on a fio workload: the throughput fsbench reports against the same fio
job run directly, alternated in one invocation (raw, fsbench, raw, fsbench, ...).

    uv run python bench/fio_overhead.py [--rounds 5] [--dir /dev/shm] [--workload W]

Prints the median of each and the ratio fsbench/raw; the target is >= 0.97. The directory is a
tmpfs by default: the fastest place, where any overhead of fsbench would show most.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fsbench.environment import memory_notes
from fsbench.registry import WORKLOADS
from fsbench.workloads.base import Target
from fsbench.workloads.fio import parse_fio_json

MiB = 1024 * 1024


def raw_fio(job, target: Target) -> float:
    job.prepare(target)
    proc = subprocess.run(job.argv(target), capture_output=True, text=True, check=True)
    out = parse_fio_json(proc.stdout, "write" if job.is_write else "read")
    return out["bytes"] / MiB / out["seconds"]


def via_fsbench(workload: str, directory: Path, tmp: Path, i: int) -> float:
    out = tmp / f"fsbench-{i}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsbench",
            "run",
            "--target",
            str(directory),
            "--workloads",
            workload,
            "--repeat",
            "1",
            "--json",
            "--out",
            str(out),
            "--db",
            str(tmp / "b.db"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(proc.stdout)
    return float(doc["results"][0]["median"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--workload", default="seq-write/buffered")
    args = ap.parse_args()
    job = WORKLOADS[args.workload]
    tmp = Path(tempfile.mkdtemp(prefix="fsbench-bench-"))
    work = Path(tempfile.mkdtemp(prefix="fsbench-bench-", dir=args.dir))
    try:
        # The same file size fsbench picks for a directory target: 40 % of free space, <= 1 GiB.
        free = shutil.disk_usage(work).free
        size = min(1024 * MiB, int(free * 0.4)) // MiB * MiB
        target = Target("raw", str(work / "raw"), "directory", size)
        raw, ours = [], []
        for i in range(args.rounds):
            raw.append(raw_fio(job, target))
            ours.append(via_fsbench(args.workload, work, tmp, i))
            print(f"round {i + 1}: raw fio {raw[-1]:9.1f} MiB/s   fsbench {ours[-1]:9.1f} MiB/s")
        r, o = statistics.median(raw), statistics.median(ours)
        print(f"\n{args.workload} on {args.dir}, {size // MiB} MiB, {args.rounds} rounds")
        print(f"median raw fio {r:.1f} MiB/s, fsbench {o:.1f} MiB/s")
        print(f"ratio fsbench/raw = {o / r:.3f}  (target >= 0.97)")
        for note in memory_notes():
            # Freed memory returned to the hypervisor makes the side that frees and reallocates
            # after a pause (fsbench's process start) slower: not fsbench's overhead.
            print(f"note: {note}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
