"""fsbench beside the tools a user checks it with by hand, in one invocation (issue 37).

    sudo uv run python bench/peers.py [--size 2G] [--drivers ext4,ntfs-3g] [--rounds 6]

One `fsbench compare DRIVERS --workloads seq-write/fsync,seq-read/cold,rand-read/4k-direct,
tree-hash/cold`, and on fresh RAM images of the same size, formatted and mounted by fsbench's
own lab, the peers over files of the sizes that run used (read from its results.json):

    seq-write/fsync      dd if=/dev/zero of=F bs=1M count=N conv=fsync   (dd's own rate)
    seq-read/cold        dd if=F of=/dev/null bs=1M, after sync, drop_caches and (FUSE) a remount
    rand-read/4k-direct  fio --rw=randread --bs=4k --direct=1 --io_size=64M  (fio's own rate)
    tree-hash/cold       xxhsum -H2 over the tree tree-hash reads, cold, in as many processes
                         as tree-hash has threads (xargs -P); one process printed beside it

Half the peer rounds run before the compare and half after, so a machine that changes speed
during the run moves both sides alike; each peer's figure is the median of its rounds. Prints
fsbench/peer per workload and driver, the first driver's ratio to each other driver (and back)
by fsbench and by the peers, the notes, and last `worst agreement R (workload, driver)`: the
row furthest from 1. The target is every row within 0.85-1.18. Needs root; run it under the
shared-machine lock (flock /tmp/fsbench-heavy.lock).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from treehash_vs_xxhsum import run_xxhsum, run_xxhsum_parallel

from fsbench.env import memory_notes
from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import parse_subject
from fsbench.manifest import default_threads, walk_tree
from fsbench.sampler import sized
from fsbench.targets import FILE_FRACTION
from fsbench.workloads.base import Target
from fsbench.workloads.fio import parse_fio_json
from fsbench.workloads.treehash import TREE_DIR, plan_tree, write_tree

MiB = 1024 * 1024
WORKLOADS = ("seq-write/fsync", "seq-read/cold", "rand-read/4k-direct", "tree-hash/cold")
PEER = {
    "seq-write/fsync": "dd conv=fsync",
    "seq-read/cold": "dd (cold)",
    "rand-read/4k-direct": "fio randread 4k direct",
    "tree-hash/cold": "xxhsum -H2 (cold)",
}
LOW, HIGH = 0.85, 1.18
THREADS = default_threads()  # tree-hash's threads (one per CPU), so its peer's processes
Rates = dict[tuple[str, str], list[float]]  # (workload, driver) -> a peer's rates, MiB/s


def run_fsbench(drivers: list[str], size: str, tmp: Path) -> dict[str, Any]:
    out = tmp / "fsbench"
    proc = subprocess.run(
        [
            sys.executable, "-m", "fsbench", "compare", *drivers,
            "--workloads", ",".join(WORKLOADS), "--size", size,
            "--out", str(out), "--db", str(tmp / "results.db"),
        ],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # 1: a workload failed somewhere; the rest is reported
        sys.exit(f"fsbench compare failed: {proc.stderr.strip()[-500:]}")
    return json.loads((out / "results.json").read_text())


def dd(args: list[str]) -> float:
    """dd's own figure (bytes over its own seconds, the line a user reads), in MiB/s."""
    proc = subprocess.run(["dd", *args], capture_output=True, text=True)
    m = re.search(r"^(\d+) bytes .* copied, ([\d.e-]+) s", proc.stderr, re.M)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"dd {' '.join(args)}: {proc.stderr.strip()[-200:]}")
    return int(m.group(1)) / MiB / float(m.group(2))


def fio_randread(path: str, file_size: int, io_bytes: int) -> float:
    proc = subprocess.run(
        [
            "fio", "--output-format=json", "--name=peer", f"--filename={path}",
            "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=psync",
            f"--size={file_size}", f"--io_size={io_bytes}", "--randrepeat=1",
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"fio: {(proc.stderr or proc.stdout).strip()[-200:]}")
    out = parse_fio_json(proc.stdout, "read")
    return out["bytes"] / MiB / out["seconds"]


def timed(fn: Callable[[], None], nbytes: int) -> float:
    t0 = time.perf_counter()
    fn()
    return nbytes / MiB / (time.perf_counter() - t0)


class Peers:
    """The peers of one driver on a fresh image of its own, mounted by fsbench's lab."""

    def __init__(self, lab: Lab, s: LabSubject, seq_size: int, budget: int, threads: int) -> None:
        self.lab, self.s, self.seq_size, self.threads = lab, s, seq_size, threads
        self.file = os.path.join(s.workdir, "peer.seq")
        root = os.path.join(s.workdir, TREE_DIR)
        layout = plan_tree(budget, 1.0)  # the tree tree-hash lays out for this budget
        write_tree(root, layout)
        self.files = walk_tree(root)[0]
        self.tree_bytes = sum(f.size for f in layout)
        self.rand_unsupported: str | None = None

    def round(self, rates: Rates, driver: str) -> None:
        if os.path.exists(self.file):
            os.unlink(self.file)
        os.sync()
        count = self.seq_size // MiB
        rates[("seq-write/fsync", driver)].append(
            dd(["if=/dev/zero", f"of={self.file}", "bs=1M", f"count={count}", "conv=fsync"])
        )
        self.lab.make_cold(self.s)
        rates[("seq-read/cold", driver)].append(dd([f"if={self.file}", "of=/dev/null", "bs=1M"]))
        try:
            r = fio_randread(self.file, self.seq_size, min(64 * MiB, self.seq_size))
            rates[("rand-read/4k-direct", driver)].append(r)
        except RuntimeError as e:
            self.rand_unsupported = str(e)
        self.lab.make_cold(self.s)
        threads = self.threads
        rates[("tree-hash/cold", driver)].append(
            timed(lambda: run_xxhsum_parallel(self.files, threads), self.tree_bytes)
        )
        self.lab.make_cold(self.s)
        rates[("tree-hash/cold xxhsum 1 process", driver)].append(
            timed(lambda: run_xxhsum(self.files), self.tree_bytes)
        )


def by_result(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["workload_id"] or r["workload"], r["subject"]): r for r in doc["results"]}


def planned_sizes(size: int) -> tuple[int, int]:
    """The seq file and tree budget the compare gives these workloads, as its planner does:
    the file budget (FILE_FRACTION of the image) split between the workloads whose files stay
    (the fio jobs' one file, the tree), whole MiB. Checked against its results.json after."""
    budget = max(MiB, int(size * FILE_FRACTION) // MiB * MiB)
    share = sized(Target("x", "", "kernel", budget), 0.5).size
    return share, share


def run_peers(
    drivers: list[str], size: int, run_id: str, rounds: int, rates: Rates, notes: list[str]
) -> dict[str, dict[str, Any]]:
    """`rounds` rounds of every peer per driver; what each driver's tree was."""
    seq, budget = planned_sizes(size)
    trees = {}
    for i, driver in enumerate(drivers):
        with Lab(f"{run_id}-{i}", Backing("ram"), size) as lab:
            spec = parse_subject(driver)
            lab.check([spec])
            (s,) = lab.prepare([spec])
            lab.mount(s)
            peers = Peers(lab, s, seq, budget, THREADS)
            for _ in range(rounds):
                peers.round(rates, driver)
            if peers.rand_unsupported:
                notes.append(f"{driver}: the fio 4k direct peer fails: {peers.rand_unsupported}")
            trees[driver] = {"seq": seq, "files": len(peers.files), "tree_bytes": peers.tree_bytes}
            lab.unmount(s)
    return trees


def check_same_work(results: dict, trees: dict[str, dict[str, Any]]) -> None:
    """The peers moved what fsbench moved: the same file size and the same tree."""
    for d, t in trees.items():
        seq = results[("seq-read/cold", d)]["params"]["file_size"]
        th = results[("tree-hash/cold", d)]["params"]
        if (seq, th["files"], th["tree_bytes"], th["threads"]) != (
            t["seq"],
            t["files"],
            t["tree_bytes"],
            THREADS,
        ):
            sys.exit(f"peers: {d}'s work differs from fsbench's ({seq}, {th}) vs {t}")


def agreement(r: float) -> float:
    """How far a ratio is from 1, either way (1.25 and 0.8 are as far)."""
    return abs(math.log(r))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="2G", help="image size (default 2G, as the issue's)")
    ap.add_argument("--drivers", default="ext4,ntfs-3g")
    ap.add_argument("--rounds", type=int, default=6, help="peer rounds per driver (half before)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("peers: needs root (formats and mounts images)")
    for tool in ("dd", "fio", "xxhsum"):
        if shutil.which(tool) is None:
            sys.exit(f"peers: {tool} not found; run scripts/setup.sh")
    drivers = [d for d in args.drivers.split(",") if d]
    size = parse_size(args.size)
    rates: Rates = {(w, d): [] for w in [*WORKLOADS, "tree-hash/cold xxhsum 1 process"]
                    for d in drivers}  # fmt: skip
    notes: list[str] = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as t:
        tmp = Path(t)
        before = args.rounds // 2
        run_id = f"bench-peers-{os.getpid()}"
        trees = run_peers(drivers, size, f"{run_id}-a", before, rates, notes)
        doc = run_fsbench(drivers, args.size, tmp)
        results = by_result(doc)
        check_same_work(results, trees)
        run_peers(drivers, size, f"{run_id}-b", args.rounds - before, rates, notes)
    load1 = os.getloadavg()[0]
    report(doc, results, drivers, rates, notes, args, (load0, load1))


def report(
    doc: dict[str, Any],
    results: dict,
    drivers: list[str],
    rates: Rates,
    notes: list[str],
    args: argparse.Namespace,
    loads: tuple[float, float],
) -> None:
    print(
        f"fsbench compare {' '.join(drivers)} --size {args.size} beside its peers, "
        f"{args.rounds} peer rounds per driver (half before, half after); load average "
        f"{loads[0]:.1f} -> {loads[1]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'workload':<20} {'driver':<8} {'fsbench':>9} {'n':>3} {'peer':<24} {'peer':>9} "
        f"{'spread':>11} {'fsbench/peer':>12}"
    )
    ratios: dict[tuple[str, str], float] = {}
    fsb: dict[tuple[str, str], float] = {}
    peer: dict[tuple[str, str], float] = {}
    for w in WORKLOADS:
        for d in drivers:
            r = results.get((w, d))
            got = rates[(w, d)]
            ok = r is not None and r["status"] == "ok" and r["median"]
            f_text = f"{r['median']:9,.0f}" if ok else f"{'—':>9}"
            p_text = f"{statistics.median(got):9,.0f}" if got else f"{'—':>9}"
            spread = f"{min(got):,.0f}–{max(got):,.0f}" if got else ""
            if ok and got:
                fsb[(w, d)], peer[(w, d)] = r["median"], statistics.median(got)
                ratios[(w, d)] = fsb[(w, d)] / peer[(w, d)]
                mark = "" if LOW <= ratios[(w, d)] <= HIGH else "  outside 0.85–1.18"
                q = f"{ratios[(w, d)]:12.2f}{mark}"
            else:
                why = (r or {}).get("error") or "no peer figure" if r else "no fsbench result"
                q = f"{'n/a':>12}  ({why})"
            n = len(r["samples"]) if r else 0
            print(f"{w:<20} {d:<8} {f_text} {n:>3} {PEER[w]:<24} {p_text} {spread:>11} {q}")
    one = rates.get(("tree-hash/cold xxhsum 1 process", drivers[0]))
    if one:
        print(
            "tree-hash/cold: xxhsum in one process (seed 000's way) "
            + ", ".join(
                f"{d} {statistics.median(rates[('tree-hash/cold xxhsum 1 process', d)]):,.0f}"
                for d in drivers
            )
            + " MiB/s"
        )
    if len(drivers) > 1:
        a = drivers[0]
        print("\nratio between drivers, by fsbench and by the peers (agreement = fsbench/peers)")
        for b in drivers[1:]:
            for w in WORKLOADS:
                if (w, a) in ratios and (w, b) in ratios:
                    fr, pr = fsb[(w, a)] / fsb[(w, b)], peer[(w, a)] / peer[(w, b)]
                    print(
                        f"  {w:<20} {a}/{b} fsbench {fr:6.2f} peers {pr:6.2f} ({fr / pr:4.2f})"
                        f"   {b}/{a} fsbench {1 / fr:6.2f} peers {1 / pr:6.2f} ({pr / fr:4.2f})"
                    )
    for note in [*notes, *doc.get("notes", []), *memory_notes()]:
        print(f"note: {note}")
    if not ratios:
        print("worst agreement n/a (no row had both figures)")
        return
    (w, d), r = max(ratios.items(), key=lambda kv: agreement(kv[1]))
    print(f"worst agreement {r:.2f} ({w}, {d})")


if __name__ == "__main__":
    main()
