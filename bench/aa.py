"""A/A: how often does a default `fsbench compare` mark ▲/▼ where there is no difference, and
how often does it find one that is physical?

    uv run python bench/aa.py [--runs 3] [--fuse-runs 2] [--known 10] [--lock PATH]

Each A/A run is a default comparison of subjects that are one driver with default-equivalent
options (every true ratio is 1): `ext4 ext4:relatime ext4:async ext4:barrier ext4:suid
ext4:exec ext4:dev` and `ntfs-3g ntfs-3g:silent ntfs-3g:relatime`, default settings
(adaptive repeats, the 285 s budget, the default workloads). Every pair of subjects in every
workload is one comparison (the run's family); the script prints the share marked ▲/▼ with
its 95 % Clopper-Pearson interval and the share of runs with any (the family-wise rate the
legend promises to keep under 5 %).
The known difference is `ext4` against `ext4:data=journal` on seq-write/fsync (journalled data
is written twice): the share of default runs that mark it ▼. It also prints, from every
sample, how a subject's rate depends on its place in the round (schedule.orders): the position
effect the seeded order turns into noise.

Each run takes the heavy lock on its own (other users of the machine get turns between runs).
Needs root. Takes about 5 minutes per A/A run and 1 per known-difference run; the default
(3 kernel and 2 FUSE runs: 3 × 42 + 2 × 6 = 138 comparisons) about 35 minutes on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from itertools import combinations
from pathlib import Path

from scipy.stats import beta

from fsbench.report.naming import outcome
from fsbench.schema import Run
from fsbench.verdict import judge

# Options that restate a default: every subject of a set mounts exactly what the first does.
# (fsbench manages rw/ro itself and refuses them in a subject.)
KERNEL_SET = ("ext4", "ext4:relatime", "ext4:async", "ext4:barrier", "ext4:suid", "ext4:exec",
              "ext4:dev")  # fmt: skip
FUSE_SET = ("ntfs-3g", "ntfs-3g:silent", "ntfs-3g:relatime")
KNOWN = ("ext4", "ext4:data=journal")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def compare(
    subjects: tuple[str, ...], extra: list[str], tmp: Path, tag: str, lock: str
) -> Run | None:
    """One default comparison; None (with the reason printed) when it left no results."""
    out = tmp / tag
    argv = [sys.executable, "-m", "fsbench", "compare", *subjects, *extra, "--out", str(out)]
    argv += ["--db", str(tmp / "aa.db"), "--json"]
    if lock:
        argv = ["flock", lock, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    results = out / "results.json"
    if done.returncode not in (0, 1) or not results.exists():
        print(f"{tag}: fsbench exited {done.returncode}, no results: "
              f"{done.stderr.strip()[-400:]}", flush=True)  # fmt: skip
        return None
    return Run.model_validate(json.loads(results.read_text()))


def marks(run: Run) -> list[tuple[str, str, str]]:
    """(workload, "a vs b", outcome) of every pair of subjects in a workload: the run's family
    (fsbench.verdict), since the answer line compares each subject with the fastest."""
    by_wl: dict[str, list] = defaultdict(list)
    for r in run.results:
        if r.status == "ok" and r.samples:
            by_wl[r.workload_id or r.workload].append(r)
    order = [s.id for s in run.subjects]
    out = []
    for wl, rs in by_wl.items():
        rs.sort(key=lambda r: order.index(r.subject))
        out += [
            (wl, f"{b.subject} vs {a.subject}", outcome(judge(a, b), b.higher_is_better))
            for a, b in combinations(rs, 2)
        ]
    return out


def positions(run: Run, acc: dict[int, list[float]]) -> None:
    """Each sample over its result's median, by the subject's place in that round."""
    orders = run.schedule.orders if run.schedule else []
    for r in run.results:
        if r.status != "ok" or not r.median:
            continue
        for k, v in enumerate(r.samples):
            if k < len(orders) and r.subject in orders[k]:
                acc[orders[k].index(r.subject)].append(v / r.median)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="A/A runs of the kernel set")
    ap.add_argument("--fuse-runs", type=int, default=2, help="A/A runs of the FUSE set")
    ap.add_argument("--known", type=int, default=10, help="known-difference runs")
    ap.add_argument("--lock", default="/tmp/fsbench-heavy.lock", help="'' for none")
    args = ap.parse_args()
    comps: list[tuple[str, str, str]] = []
    runs_with_false = runs = 0
    pos: dict[int, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="fsbench-aa-") as d:
        tmp = Path(d)
        found = known_runs = 0
        for i in range(args.known):
            run = compare(KNOWN, ["--workloads", "seq-write/fsync"], tmp, f"known-{i}", args.lock)
            if run is None:
                continue
            known_runs += 1
            got = {s.split(" vs ")[0]: o for _w, s, o in marks(run)}
            found += got.get(KNOWN[1]) == "worse"
            print(f"known #{i + 1}: {KNOWN[1]} {got.get(KNOWN[1])}", flush=True)
        sets = [KERNEL_SET] * args.runs + [FUSE_SET] * args.fuse_runs
        for i, subjects in enumerate(sets):
            run = compare(subjects, [], tmp, f"aa-{i}", args.lock)
            if run is None:
                continue
            got = marks(run)
            positions(run, pos)
            comps += got
            runs += 1
            runs_with_false += any(m[2] in ("better", "worse") for m in got)
            line = ", ".join(f"{s} {w}: {o}" for w, s, o in got)
            print(f"A/A {subjects[0]} #{i + 1}: {line}", flush=True)
    n = len(comps)
    k = sum(1 for *_x, o in comps if o in ("better", "worse"))
    lo, hi = clopper_pearson(k, n)
    rate = f"{k / max(n, 1):.1%} (95 % interval {lo:.1%}–{hi:.1%})"
    print(
        f"A/A: {k} false ▲/▼ in {n} comparisons = {rate}; "
        f"runs with any: {runs_with_false} of {runs}"
    )
    tally = defaultdict(int)
    for *_x, o in comps:
        tally[o] += 1
    print("A/A outcomes: " + ", ".join(f"{o} {c}" for o, c in sorted(tally.items())))
    for p in sorted(pos):
        xs = pos[p]
        print(f"position {p + 1} in the round: sample/median {statistics.median(xs):.3f} "
              f"(n = {len(xs)})")  # fmt: skip
    if known_runs:
        lo, hi = clopper_pearson(found, known_runs)
        share = f"{found / known_runs:.0%} (95 % interval {lo:.0%}–{hi:.0%})"
        print(f"known difference ({KNOWN[1]} seq-write/fsync ▼): {found} of {known_runs} = {share}")


if __name__ == "__main__":
    main()
