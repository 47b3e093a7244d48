"""A/A: how often does a default `fsbench compare` mark ▲/▼ where there is no difference, and
how often does it find one that is physical?

    uv run python bench/aa.py [--runs 3] [--fuse-runs 2] [--btrfs-runs 2] [--xfs-runs 2]
                              [--fuse2fs-runs 2] [--known 10]
                              [--lock PATH] [--extra ARGS] [--keep DIR]
                              [--set SUBJECT,SUBJECT,... --set-runs N]
    uv run python bench/aa.py --read DIR     # tally the runs a --keep stored

Each A/A run is a default comparison of subjects that are one driver with default-equivalent
options (every true ratio is 1): `ext4 ext4:relatime ext4:async ext4:barrier ext4:suid`,
`ntfs-3g ntfs-3g:silent ntfs-3g:exec`, `btrfs btrfs:relatime btrfs:suid btrfs:exec`,
`xfs xfs:relatime xfs:suid xfs:exec` and `fuse2fs fuse2fs:nosuid fuse2fs:exec`,
default settings (adaptive repeats, the default budget, the default workloads). The promise is
per table (docs/verdicts.md): a workload's table and its answer line together have at most a
5 % chance of any false ▲/▼. So the script counts tables: one per workload per run, false when
any comparison a renderer prints in it (each against the baseline, each against the fastest)
is ▲/▼; it prints that share with its 95 % Clopper-Pearson interval, and how many of those
comparisons were decided the other way (≈) or left open.
The known difference is `ext4` against `ext4:data=journal` on seq-write/fsync (journalled data
is written twice): the share of default runs that mark it ▼. It also prints, from every
sample, how a subject's rate depends on its place in the round (schedule.orders), and per table
whether its identical subjects differ by more than their samples vary (Welch's ANOVA): a setup
effect (image, loop device, memory) the false-mark count is too coarse to see.

Each run takes the heavy lock on its own (other users of the machine get turns between runs).
Needs root. About 4-5 minutes per A/A run at the default 240 s budget (--extra '--time-budget 120'
for a quicker, harder test: fewer samples) and 1 per known-difference run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scipy.stats import beta, combine_pvalues, f_oneway

from fsbench.records.schema import Run
from fsbench.report.model.comparison import outcome_of
from fsbench.stats import decide
from fsbench.stats.serial import serial

# Options that restate a default: every subject of a set mounts exactly what the first does.
# (fsbench manages rw/ro itself and refuses them in a subject.)
KERNEL_SET = ("ext4", "ext4:relatime", "ext4:async", "ext4:barrier", "ext4:suid")
FUSE_SET = ("ntfs-3g", "ntfs-3g:silent", "ntfs-3g:exec")
BTRFS_SET = ("btrfs", "btrfs:relatime", "btrfs:suid", "btrfs:exec")
# xfs copies of one image share its UUID: the lab mounts them with nouuid.
XFS_SET = ("xfs", "xfs:relatime", "xfs:suid", "xfs:exec")
# (fuse2fs mounts nosuid by default: "fuse2fs:suid" would change its flags.)
FUSE2FS_SET = ("fuse2fs", "fuse2fs:nosuid", "fuse2fs:exec")
KNOWN = ("ext4", "ext4:data=journal")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def compare_run(
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


def tables(run: Run) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per workload table: (workload, [(comparison, outcome)]) for every comparison it prints —
    each subject against the baseline (the table) and against the fastest (the answer line),
    in every column that shows a mark — judged as the run recorded (fsbench.stats.decide.printed,
    what compare, diff and judge print)."""
    order = [s.id for s in run.subjects]
    by_table = decide.tables(run.results)
    out = []
    for wid, p in decide.printed(run.results, order).items():
        rs = by_table.get(wid) or []
        if not rs:
            continue
        hib = rs[0].higher_is_better
        got = {
            f"{col}: {subject} vs {ref}": outcome_of(v, hib)
            for (col, ref, subject), v in p.marks().items()
            if ref != subject
        }
        out.append((wid, list(got.items())))
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


def cells_of(run: Run) -> list[list[list[float]]]:
    """Each workload's table as its subjects' samples in round order (fsbench.stats.serial)."""
    by: dict[str, list[list[float]]] = defaultdict(list)
    for r in run.results:
        if r.status == "ok" and r.samples:
            by[r.workload].append(list(r.samples))
    return list(by.values())


def setup_effect(table: list[list[float]]) -> float | None:
    """Do a table's identical subjects differ by more than their own samples vary? Welch's
    one-way ANOVA of the log samples (a subject's setup, fixed for the run, is its group):
    without a setup effect the p-values of many tables are uniform. A sharper test than the
    false marks, which the family's correction keeps rare even where such an effect exists.
    None where fewer than two subjects have 3 samples."""
    groups = [np.log(np.asarray(c)) for c in table if len(c) >= 3 and min(c) > 0]
    groups = [g for g in groups if np.ptp(g) > 0]
    if len(groups) < 2:
        return None
    return float(f_oneway(*groups, equal_var=False).pvalue)


def _without_workloads(extra: list[str]) -> list[str]:
    out, skip = [], False
    for a in extra:
        if skip:
            skip = False
        elif a == "--workloads":
            skip = True
        elif not a.startswith("--workloads="):
            out.append(a)
    return out


def measured(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[str, Run]]:
    """("known" | "aa", run) for each comparison as it finishes."""
    extra = args.extra.split()
    for i in range(args.known):
        # Its own workload, whatever --extra names (the other tables are not the question).
        argv = [*_without_workloads(extra), "--workloads", "seq-write/fsync"]
        run = compare_run(KNOWN, argv, tmp, f"known-{i}", args.lock)
        if run is not None:
            yield "known", run
    # Round-robin over the sets: a batch cut short still has runs of each.
    counts = [
        (KERNEL_SET, args.runs),
        (FUSE_SET, args.fuse_runs),
        (BTRFS_SET, args.btrfs_runs),
        (XFS_SET, args.xfs_runs),
        (FUSE2FS_SET, args.fuse2fs_runs),
    ]
    counts += [(tuple(s.split(",")), args.set_runs) for s in args.set]
    sets = [s for k in range(max(n for _, n in counts)) for s, n in counts if k < n]
    for i, subjects in enumerate(sets):
        run = compare_run(subjects, extra, tmp, f"aa-{i}", args.lock)
        if run is not None:
            yield "aa", run


def stored(root: Path) -> Iterator[tuple[str, Run]]:
    """The runs kept under `root` (every results.json or *.json a --keep wrote)."""
    for f in sorted(root.rglob("*.json")):
        run = Run.model_validate(json.loads(f.read_text()))
        yield ("known" if {s.id for s in run.subjects} == set(KNOWN) else "aa"), run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="A/A runs of the ext4 set")
    ap.add_argument("--fuse-runs", type=int, default=2, help="A/A runs of the ntfs-3g set")
    ap.add_argument("--btrfs-runs", type=int, default=2, help="A/A runs of the btrfs set")
    ap.add_argument("--xfs-runs", type=int, default=2, help="A/A runs of the xfs set")
    ap.add_argument("--fuse2fs-runs", type=int, default=2, help="A/A runs of the fuse2fs set")
    ap.add_argument(
        "--set", action="append", default=[], help="an A/A set of your own: SUBJECT,SUBJECT,..."
    )
    ap.add_argument("--set-runs", type=int, default=1, help="runs of each --set")
    ap.add_argument("--known", type=int, default=10, help="known-difference runs")
    ap.add_argument("--lock", default="/tmp/fsbench-heavy.lock", help="'' for none")
    ap.add_argument("--extra", default="", help="more compare options, e.g. '--size 512M'")
    ap.add_argument("--keep", type=Path, help="copy each run's results.json into this directory")
    ap.add_argument("--read", type=Path, help="tally the runs kept in this directory instead")
    args = ap.parse_args()
    all_tables: list[tuple[str, list[tuple[str, str]]]] = []
    pos: dict[int, list[float]] = defaultdict(list)
    kept: list[list[list[float]]] = []
    setup_p: list[float] = []
    found = known_runs = 0
    with tempfile.TemporaryDirectory(prefix="fsbench-aa-") as d:
        source = stored(args.read) if args.read else measured(args, Path(d))
        for kind, run in source:
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"{run.run_id}.json").write_text(run.model_dump_json())
            if kind == "known":
                known_runs += 1
                got = dict(
                    c for t, cs in tables(run) if t.startswith("seq-write/fsync") for c in cs
                )
                mark = got.get(f"rate: {KNOWN[1]} vs {KNOWN[0]}")
                found += mark == "worse"
                print(f"known {run.run_id}: {KNOWN[1]} {mark}", flush=True)
                continue
            positions(run, pos)
            kept += cells_of(run)
            setup_p += [p for p in map(setup_effect, cells_of(run)) if p is not None]
            for title, cs in tables(run):
                all_tables.append((title, cs))
                false = [c for c in cs if c[1] in ("better", "worse")]
                opened = sum(1 for c in cs if c[1] == "open")
                print(f"A/A {run.subjects[0].id} {run.run_id} {title}: {len(cs)} comparisons, "
                      f"{len(false)} false {false or ''}, {opened} open", flush=True)  # fmt: skip
    n = len(all_tables)
    k = sum(1 for _t, cs in all_tables if any(o in ("better", "worse") for _c, o in cs))
    lo, hi = clopper_pearson(k, n)
    print(f"A/A: {k} of {n} tables with any false ▲/▼ = {k / max(n, 1):.1%} "
          f"(95 % interval {lo:.1%}–{hi:.1%}); the promise: ≤ 5 % a table")  # fmt: skip
    tally: dict[str, int] = defaultdict(int)
    for _t, cs in all_tables:
        for _c, o in cs:
            tally[o] += 1
    print("A/A comparisons: " + ", ".join(f"{o} {c}" for o, c in sorted(tally.items())))
    for p in sorted(pos):
        xs = pos[p]
        print(f"position {p + 1} in the round: sample/median {statistics.median(xs):.3f} "
              f"(n = {len(xs)})")  # fmt: skip
    for name, adjust in (("raw", False), ("after the round's shared effect", True)):
        sr = serial(kept, adjust=adjust)
        print(f"lag-1 autocorrelation of a subject's samples, {name}: {sr.r:+.3f} "
              f"± {1 / max(sr.samples, 1) ** 0.5:.3f} ({sr.cells} cells)")  # fmt: skip
    if setup_p:
        ps = np.asarray(setup_p)
        print(f"setup effect (Welch ANOVA of each table's subjects): {(ps < 0.01).sum()} of "
              f"{ps.size} tables at p < 0.01 (1 % expected without one), {(ps < 0.05).sum()} at "
              f"p < 0.05; Fisher's combined p = {combine_pvalues(ps).pvalue:.3g}")  # fmt: skip
    if known_runs:
        lo, hi = clopper_pearson(found, known_runs)
        share = f"{found / known_runs:.0%} (95 % interval {lo:.0%}–{hi:.0%})"
        print(f"known difference ({KNOWN[1]} seq-write/fsync ▼): {found} of {known_runs} = {share}")


if __name__ == "__main__":
    main()
