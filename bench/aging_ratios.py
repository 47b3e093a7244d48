"""Aged against fresh for ext4 and ntfs-3g in one invocation: what aging costs each driver.

    flock /tmp/fsbench-heavy.lock uv run python bench/aging_ratios.py [--size 1G] \
        [--age none,light,heavy] [--workloads WORKLOADS] [--drivers ext4,ntfs-3g]

Runs `fsbench compare ext4 ntfs-3g --age ...` twice with a private, empty image cache: the
first run ages every image (its setup cost is the aging), the second reuses them (a checked
copy). Prints, per workload and profile, each driver's aged/fresh ratio with its interval,
whether the ranking changed and what changed with age (without trace probes: CPU, extents),
then each aged image's figures and both runs' setup times. The default workloads write into
the aged free space (seq-write, copy-small, tree-hash/cold's own tree), read their own files
back, and read the aging's files (the `aged` group). It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fsbench.records.schema import Run
from fsbench.report.model.aging import aging_lines, effect_lines


def compare(args: argparse.Namespace, out: Path, cache: Path, workloads: str) -> float:
    argv = [
        sys.executable, "-m", "fsbench", "compare", *args.drivers.split(","), "--age", args.age,
        "--size", args.size, "--workloads", workloads, "--out", str(out), "--no-trace",
        "--repeat", args.repeat,
    ]  # fmt: skip
    t0 = time.monotonic()
    subprocess.run(argv, check=False, env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    return time.monotonic() - t0


def setup_seconds(run: Run) -> dict[str, float]:
    return {s.id: s.aging.setup_seconds for s in run.subjects if s.aging is not None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1G")
    ap.add_argument("--age", default="none,light,heavy")
    ap.add_argument("--drivers", default="ext4,ntfs-3g")
    ap.add_argument("--repeat", default="5")
    ap.add_argument(
        "--workloads",
        default="seq-write/fsync,copy-small/in,tree-hash/cold,seq-read/cold,aged",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fsbench-bench-aging-") as tmp:
        cache = Path(tmp) / "cache"
        first = compare(args, Path(tmp) / "first", cache, args.workloads)
        # The second run measures reuse only: one short workload.
        second = compare(args, Path(tmp) / "second", cache, "seq-write/fsync")
        runs = [
            Run.model_validate(json.loads((Path(tmp) / d / "results.json").read_text()))
            for d in ("first", "second")
        ]
    print(f"images of {args.size}, profiles {args.age}, --repeat {args.repeat}")
    print("\n".join(effect_lines(runs[0])))
    print("\n".join(aging_lines(runs[0])))
    a, b = setup_seconds(runs[0]), setup_seconds(runs[1])
    for sid in a:
        print(f"setup {sid}: aged {a[sid]:.1f} s, reused {b.get(sid, float('nan')):.1f} s")
    print(f"commands: first {first:.0f} s (ages), second {second:.0f} s (reuses)")


if __name__ == "__main__":
    main()
