"""The kernel trace probes' cost: seq-write rate with probes on divided by the rate with them
off, for ext4 and ntfs-3g, alternated in one invocation (off, on, off, on, ...).

    flock /tmp/fsbench-heavy.lock uv run python bench/probe_overhead.py [--rounds 3]

Each round is one `fsbench compare ext4 ntfs-3g` with and one with `--no-trace`, on a RAM
image; the ratio per driver is the median of all its "on" samples over the median of all its
"off" samples, with its bootstrap 95 % interval and each side's CV, so a reader sees whether
3 % is resolved at all. `--placement same` takes FUSE's CPU-placement spread out of it.
Target: >= 0.97. Needs root (lab mounts) and bpftrace.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fsbench.stats import compare

DRIVERS = ("ext4", "ntfs-3g")
TARGET = 0.97


def one(tmp: Path, i: int, trace: bool, args: argparse.Namespace) -> dict[str, list[float]]:
    out = tmp / f"run-{i}-{'on' if trace else 'off'}"
    argv = [
        sys.executable, "-m", "fsbench", "compare", *DRIVERS,
        "--size", args.size, "--scale", str(args.scale),
        "--workloads", args.workload, "--repeat", str(args.repeat),
        "--out", str(out), "--db", str(tmp / "b.db"), "--json",
    ]  # fmt: skip
    if not trace:
        argv.append("--no-trace")
    if args.placement:
        argv += ["--placement", args.placement]
    env = dict(os.environ, FSBENCH_TRACE_OFF=",".join(args.off))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    results = out / "results.json"
    if not results.is_file():
        sys.exit(f"fsbench exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    doc = json.loads(results.read_text())
    bad = [f"{r['subject']} {r['workload_id']}: {r.get('error')}" for r in doc["results"]
           if r["status"] != "ok"]  # fmt: skip
    bad += [f"{s['id']}: {s.get('error')}" for s in doc["subjects"] if s["status"] != "ok"]
    if proc.returncode != 0 or bad:
        sys.exit(f"fsbench exited {proc.returncode} ({'trace on' if trace else 'off'}): {bad}")
    probes = doc["environment"].get("trace_probes", {})
    if trace and any(v != "ok" and not v.startswith("off") for v in probes.values()):
        sys.exit(f"probes not all available, nothing to measure: {probes}")
    return {r["subject"]: r["samples"] for r in doc["results"] if r["status"] == "ok"}


def _cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--workload", default="seq-write/fsync")
    ap.add_argument("--off", default="", help="probes left off, e.g. sched (their cost)")
    ap.add_argument(
        "--placement",
        default="",
        help="e.g. same: pin app and daemon to one CPU, so FUSE's free-placement spread "
        "(tens of %% here) does not hide a cost of a few %%",
    )
    args = ap.parse_args()
    args.off = [n for n in args.off.split(",") if n]
    samples: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="fsbench-probe-overhead-") as d:
        for i in range(args.rounds):
            for trace in (False, True):
                for subject, values in one(Path(d), i, trace, args).items():
                    samples.setdefault((subject, trace), []).extend(values)
    ratios = []
    for drv in DRIVERS:
        on, off = samples.get((drv, True)), samples.get((drv, False))
        if not on or not off:
            print(f"{drv}: no samples (driver unavailable?)")
            continue
        c = compare(off, on)  # fsbench's own statistics: ratio of medians, bootstrap CI
        ratio = c.ratio or 0.0
        ratios.append(ratio)
        ci = f"95 % CI {c.ratio_ci95[0]:.3f}–{c.ratio_ci95[1]:.3f}" if c.ratio_ci95 else "no CI"
        print(
            f"{drv:8} {args.workload}: probes on {statistics.median(on):8.1f} MiB/s, off "
            f"{statistics.median(off):8.1f} MiB/s, on/off = {ratio:.3f} ({ci}; "
            f"CV on {_cv(on):.1%}, off {_cv(off):.1%}; {len(on)} + {len(off)} samples)"
            + (f" [probes off: {','.join(args.off)}]" if args.off else "")
            + (f" [placement {args.placement}]" if args.placement else "")
        )
    if not ratios:
        return 1
    worst = min(ratios)
    verdict = "meets" if worst >= TARGET else "misses"
    print(f"summary: worst on/off ratio {worst:.3f} {verdict} the target {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
