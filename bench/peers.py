"""fsbench beside the tools a user checks it with by hand, in one invocation (issue 37).

    sudo uv run python bench/peers.py [--size 2G] [--drivers ext4,ntfs-3g] [--rounds 6]
        [--workloads W,...] [--extra 'COMPARE OPTIONS']

One RAM image per driver, made by fsbench's own lab (its interleaved fill) and attached to a
loop device, serves both sides: per workload and driver, `fsbench compare DRIVER --workloads W
--size SIZE --backing device:LOOP --destroy-data` (all defaults otherwise: its own adaptive
sampling) formats and measures that loop device, and the peers then mount the same device
and run over files of the sizes that run used (checked against its results.json). This VM's
memory is not uniform: two RAM images made one after the other read cold 1.37x apart with dd
and with fsbench's reader alike, so images of their own would compare memory, not readers.

    seq-write/fsync      dd if=/dev/zero of=F bs=1M count=N conv=fsync   (dd's own rate), both
                         sides at --placement same: dd (fsbench's writer) and a FUSE daemon on
                         one CPU (left free, ntfs-3g's rate is one of two 3.4x apart by chance)
    seq-read/cold        dd if=F of=/dev/null bs=1M, after sync, drop_caches and (FUSE) a remount;
                         the loop device's read counter must show the whole file read
    rand-read/4k-direct  fio --rw=randread --bs=4k --direct=1 --io_size=64M  (fio's own rate),
                         after its own cache drop and (FUSE) remount, as fsbench's samples
    tree-hash/cold       the tree's walk and xxhsum -H2 over the files tree-hash reads, cold,
                         in as many processes as tree-hash has threads (xargs -P); one
                         process (seed 000's way) printed beside it

A round of every peer runs before the first compare and after each one, so each workload's
fsbench figure has peer rounds just before and just after it: on a shared machine whose speed
changes by the minute, those two rounds (each read peer 3 times in a round) are its peer's
figure, their median. Prints
fsbench/peer per workload and driver, the first driver's ratio to each other driver (and back)
by fsbench and by the peers, the notes, and last `worst agreement R (workload, driver)`: the
row furthest from 1. The target is every row within 0.85-1.18. Needs root; run it under the
shared-machine lock (flock /tmp/fsbench-heavy.lock).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from treehash_vs_xxhsum import run_xxhsum, run_xxhsum_parallel

from fsbench.environment import memory_notes
from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import parse_subject
from fsbench.probes.procfs import ProcFS
from fsbench.schedule.dimensions.placement import pin
from fsbench.schedule.targets import FILE_FRACTION
from fsbench.treehash.manifest import default_threads, walk_tree
from fsbench.treehash.tree import TREE_DIR, plan_tree, write_tree
from fsbench.workloads.base import Target
from fsbench.workloads.fio import RANDOM_IO_BYTES, parse_fio_json

MiB = 1024 * 1024
WORKLOADS = ("seq-write/fsync", "seq-read/cold", "rand-read/4k-direct", "tree-hash/cold")
PEER = {
    "seq-write/fsync": "dd conv=fsync",
    "seq-read/cold": "dd (cold)",
    "rand-read/4k-direct": "fio randread 4k direct",
    "tree-hash/cold": "xxhsum -H2 (cold)",
}
LOW, HIGH = 0.85, 1.18
# Where the writer and a FUSE daemon run, on both sides (`--placement`, the peer pinned by the
# same `pin`). ntfs-3g writes in 4 KiB FUSE requests, two wake-ups each: dd with the daemon on
# one CPU wrote 233-242 MiB/s, on two 69-71, left free 65-124 (one CPU or two by chance), so
# at `free` two runs of either side differ by up to 3.4x and no ratio of them means anything.
# ntfs-3g's cold read too: at load 1.1-1.3, dd and fsbench's read() loop read 1,850-1,879 MiB/s
# with the daemon on the reader's CPU, 2,410-2,423 on the other, left free 2,121-2,317; the bench's
# ntfs-3g row ran 0.73-1.21 across runs at free. Pinned alike, the readers agree (0.98, 1.01).
# Every workload at "same", fsbench's default on this machine's CPUs (placement.DEFAULT): a peer
# left free beside a pinned fsbench measured ext4's rand-read/4k-direct 1.57x apart (issue 52).
PLACED = dict.fromkeys(WORKLOADS, "same")
THREADS = default_threads()  # tree-hash's threads (one per CPU), so its peer's processes
# (workload, driver) -> a peer's (round, MiB/s) measurements
Rates = dict[tuple[str, str], list[tuple[int, float]]]
ONE_XXHSUM = "tree-hash/cold xxhsum 1 process"
# The tree-hash peer's own fixed cost: xargs and its xxhsum processes over /dev/null (seconds),
# which every peer run pays and fsbench's in-process hasher does not.
XXHSUM_START = "tree-hash/cold xxhsum start"
# Its CPU per GiB hashed (the processes' user + system time): on a driver the hash keeps busy,
# the rate follows it, so this against fsbench's app CPU says which hasher does more per byte.
XXHSUM_CPU = "tree-hash/cold xxhsum CPU"
# Its context switches per GiB (its processes' and the FUSE daemon's threads'), against the
# switches of fsbench's application and daemon (subject_ctx_switches_per_gib).
XXHSUM_CTX = "tree-hash/cold xxhsum switches"
GiB = 1024 * MiB


def base(spec: str) -> str:
    """The workload of `NAME/VARIANT:params` (what the peers and the results key on)."""
    return spec.split(":")[0]


# More compare options for every run (--extra), e.g. CI's smoke: a fixed handful of samples.
EXTRA: list[str] = []


def compare_argv(
    drivers: list[str], workload: str, size: str, out: Path, db: Path, device: str | None = None
) -> list[str]:
    """fsbench's run of `workload`; on `device` (the peers' loop device, over the peers' RAM
    image) when given, which it formats as its lab formats a RAM image (the same mkfs)."""
    placed = PLACED.get(base(workload))
    return [
        sys.executable, "-m", "fsbench", "compare", *drivers,
        "--workloads", workload, "--size", size,
        *(["--placement", placed] if placed else []),
        *(["--backing", f"device:{device}", "--destroy-data"] if device else []),
        "--out", str(out), "--db", str(db), *EXTRA,
    ]  # fmt: skip


def run_fsbench(
    drivers: list[str], workload: str, size: str, tmp: Path, device: str | None = None
) -> dict[str, Any]:
    out = tmp / "-".join([workload.replace("/", "-").replace(":", "-"), *drivers])
    proc = subprocess.run(
        compare_argv(drivers, workload, size, out, tmp / "results.db", device),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
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


def device_read(s: LabSubject) -> int:
    """Bytes read so far from the subject's loop device (its /sys/block counter)."""
    return ProcFS().block_stat(s.block_device or "").read_bytes


def fio_randread_argv(path: str, file_size: int, io_bytes: int) -> list[str]:
    """The fio command a user types for rand-read/4k-direct: fio's defaults otherwise."""
    return [
        "fio", "--output-format=json", "--name=peer", f"--filename={path}",
        "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=psync",
        f"--size={file_size}", f"--io_size={io_bytes}", "--randrepeat=1",
    ]  # fmt: skip


def fio_randread(path: str, file_size: int, io_bytes: int) -> float:
    proc = subprocess.run(
        fio_randread_argv(path, file_size, io_bytes), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"fio: {(proc.stderr or proc.stdout).strip()[-200:]}")
    out = parse_fio_json(proc.stdout, "read")
    return out["bytes"] / MiB / out["seconds"]


def children_cpu() -> float:
    """This process's CPU and its children's: the peer's walk (here) and its xxhsum processes,
    as fsbench's application CPU holds its walk and its hashing threads."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def switches(daemon_pid: int | None) -> int:
    """Context switches so far of this process's children and of the daemon's threads."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = kids.ru_nvcsw + kids.ru_nivcsw
    for task in Path(f"/proc/{daemon_pid}/task").glob("*") if daemon_pid else ():
        with contextlib.suppress(OSError):
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    n += int(line.split(":")[1])
    return n


def timed(fn: Callable[[], None], nbytes: int) -> float:
    t0 = time.perf_counter()
    fn()
    return nbytes / MiB / (time.perf_counter() - t0)


class Peers:
    """The peers of one driver on a fresh image of its own, mounted by fsbench's lab."""

    def __init__(self, lab: Lab, s: LabSubject, seq_size: int, budget: int, threads: int) -> None:
        self.lab, self.s, self.seq_size, self.threads = lab, s, seq_size, threads
        self.budget = budget
        self.file = os.path.join(s.workdir, "peer.seq")
        self.root = os.path.join(s.workdir, TREE_DIR)
        self.rand_unsupported: str | None = None
        # What the loop device's counter moved per byte of each cold dd read (1.0: all of it).
        self.from_device: list[float] = []
        self.lay_out()

    def lay_out(self) -> None:
        """The tree tree-hash lays out for this budget, on the volume as it is now (each
        compare formats the device anew)."""
        layout = plan_tree(self.budget, 1.0)
        write_tree(self.root, layout)
        os.sync()  # its writeback done before anything is timed
        self.files = walk_tree(self.root)[0]
        self.tree_bytes = sum(f.size for f in layout)

    def compare(self, workload: str, size: str, tmp: Path) -> dict[str, Any]:
        """fsbench's run of `workload` on this driver's own device (the peers' image): the
        peers' mount is taken down for it and put back after, with the tree laid out again."""
        self.lab.unmount(self.s)
        try:
            return run_fsbench([self.s.spec.id], workload, size, tmp, self.s.device)
        finally:
            self.lab.mount(self.s)
            # fsbench's files stay on the volume it formatted: room for the peers' again.
            shutil.rmtree(self.s.workdir)
            os.makedirs(self.s.workdir)
            self.lay_out()

    @contextlib.contextmanager
    def placed(self, workload: str) -> Iterator[None]:
        """This thread (so the peer it starts) and the daemon where fsbench's run of
        `workload` puts its application and daemon (PLACED), by fsbench's own `pin`."""
        s = self.s
        target = Target(
            s.spec.id, s.workdir, s.spec.driver.kind, self.seq_size, daemon_pid=s.daemon_pid
        )
        pinned = pin(PLACED.get(workload, "free"), target)
        try:
            yield
        finally:
            if pinned is not None:
                pinned.restore()

    def round(self, k: int, rates: Rates, writes: int = 2, reads: int = 3) -> None:
        """Round k of every peer: the write `writes` times, each read `reads` times."""
        d = self.s.spec.id
        count = self.seq_size // MiB
        for _ in range(writes):
            if os.path.exists(self.file):
                os.unlink(self.file)
            os.sync()  # a new file, as fsbench's seq-write/fsync writes one
            args = ["if=/dev/zero", f"of={self.file}", "bs=1M", f"count={count}", "conv=fsync"]
            with self.placed("seq-write/fsync"):
                rates[("seq-write/fsync", d)].append((k, dd(args)))
        for _ in range(reads):
            self.lab.make_cold(self.s)
            before = device_read(self.s)
            with self.placed("seq-read/cold"):
                r = dd([f"if={self.file}", "of=/dev/null", "bs=1M"])
            self.from_device.append((device_read(self.s) - before) / self.seq_size)
            rates[("seq-read/cold", d)].append((k, r))
            # Cold again, as fsbench starts every O_DIRECT sample: right after dd's read a FUSE
            # daemon finds the file in the loop device's page cache (it reads the device
            # buffered), and ntfs-3g's 4 KiB direct reads then read 0 bytes from the device.
            self.lab.make_cold(self.s)
            try:
                with self.placed("rand-read/4k-direct"):
                    r = fio_randread(self.file, self.seq_size, min(RANDOM_IO_BYTES, self.seq_size))
                rates[("rand-read/4k-direct", d)].append((k, r))
            except RuntimeError as e:
                self.rand_unsupported = str(e)
            self.lab.make_cold(self.s)
            # The walk is timed too, as tree-hash times its own and `find | xxhsum` pays it.
            cpu0, sw0 = children_cpu(), switches(self.s.daemon_pid)
            with self.placed("tree-hash/cold"):
                r = timed(
                    lambda: run_xxhsum_parallel(walk_tree(self.root)[0], self.threads),
                    self.tree_bytes,
                )
            rates[("tree-hash/cold", d)].append((k, r))
            gib = self.tree_bytes / GiB
            rates[(XXHSUM_CPU, d)].append((k, (children_cpu() - cpu0) / gib))
            rates[(XXHSUM_CTX, d)].append((k, (switches(self.s.daemon_pid) - sw0) / gib))
        self.lab.make_cold(self.s)
        with self.placed("tree-hash/cold"):
            r = timed(lambda: run_xxhsum(walk_tree(self.root)[0]), self.tree_bytes)
        rates[(ONE_XXHSUM, d)].append((k, r))
        for _ in range(reads):
            t0 = time.perf_counter()
            run_xxhsum_parallel([os.devnull] * self.threads, self.threads)
            rates[(XXHSUM_START, d)].append((k, time.perf_counter() - t0))


def by_result(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Results by (workload, subject); a placed workload's id (`W@same`) is keyed as W."""
    return {
        ((r["workload_id"] or r["workload"]).split("@")[0], r["subject"]): r for r in doc["results"]
    }


def planned_sizes(size: int) -> int:
    """The seq file and the tree budget a one-workload compare gives, as its planner does:
    FILE_FRACTION of the image, whole MiB (checked against its results.json after)."""
    return max(MiB, int(size * FILE_FRACTION) // MiB * MiB)


def check_same_work(w: str, results: dict, peers: dict[str, Peers]) -> None:
    """The peers moved what fsbench moved: the same file size, the same tree."""
    for d, p in peers.items():
        r = results.get((w, d))
        if r is None or not r["params"]:
            continue
        got = r["params"]
        if w == "tree-hash/cold":
            same = (got["files"], got["tree_bytes"], got["threads"]) == (
                len(p.files),
                p.tree_bytes,
                p.threads,
            )
        else:
            same = got["file_size"] == p.seq_size
        if not same:
            sys.exit(f"peers: {w} on {d} is not the peers' work: fsbench params {got}")


def agreement(r: float) -> float:
    """How far a ratio is from 1, either way (1.25 and 0.8 are as far)."""
    return abs(math.log(r))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="2G", help="image size (default 2G, as the issue's)")
    ap.add_argument("--drivers", default="ext4,ntfs-3g")
    ap.add_argument("--keep", help="keep each compare's results.json and report here")
    ap.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="some of the four, each may carry parameters (seq-read/cold:psync: fio's reader)",
    )
    ap.add_argument("--extra", default="", help="more compare options, e.g. '--repeat 2'")
    args = ap.parse_args()
    EXTRA[:] = args.extra.split()
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in chosen:
        if base(w) not in WORKLOADS:
            sys.exit(f"peers: {w}: not one of {', '.join(WORKLOADS)}")
    if os.geteuid() != 0:
        sys.exit("peers: needs root (formats and mounts images)")
    for tool in ("dd", "fio", "xxhsum"):
        if shutil.which(tool) is None:
            sys.exit(f"peers: {tool} not found; run scripts/setup.sh")
    drivers = [d for d in args.drivers.split(",") if d]
    size = parse_size(args.size)
    extra = [ONE_XXHSUM, XXHSUM_START, XXHSUM_CPU, XXHSUM_CTX]
    rates: Rates = {(w, d): [] for w in [*WORKLOADS, *extra] for d in drivers}
    notes: list[str] = []
    results: dict[tuple[str, str], dict[str, Any]] = {}
    run_notes: list[str] = []
    load0 = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory(prefix="bench-peers-") as t,
        Lab(f"bench-peers-{os.getpid()}", Backing("ram"), size) as lab,
    ):
        tmp = Path(args.keep) if args.keep else Path(t)
        specs = [parse_subject(d) for d in drivers]
        lab.check(specs)
        peers: dict[str, Peers] = {}
        for s in lab.prepare(specs):
            lab.mount(s)
            n = planned_sizes(size)
            peers[s.spec.id] = Peers(lab, s, n, n, default_threads())
        # The 1-minute load average as each peer round and each compare starts: a row whose
        # sides saw different machines says so in its note.
        at_round = {0: os.getloadavg()[0]}
        at_compare: dict[int, float] = {}
        for p in peers.values():
            p.round(0, rates)
        for k, w in enumerate(chosen, start=1):
            at_compare[k] = os.getloadavg()[0]
            for p in peers.values():
                doc = p.compare(w, args.size, tmp)
                got = by_result(doc)
                check_same_work(base(w), got, peers)
                # Keyed by what was asked: seq-read/cold and seq-read/cold:psync are both there.
                results.update({(w, d): r for (_, d), r in got.items()})
                run_notes += [n for n in doc.get("notes", []) if n not in run_notes]
            at_round[k] = os.getloadavg()[0]
            for p in peers.values():
                p.round(k, rates)
        for d, p in peers.items():
            if p.rand_unsupported:
                notes.append(f"{d}: the fio 4k direct peer fails: {p.rand_unsupported}")
            notes += device_notes(d, p.from_device, results.get(("seq-read/cold", d)))
        # Read while the peers' lab holds what it tuned (as each compare's does), not after
        # it put it back: the peers ran in the state these notes describe.
        notes += [f"peers: {t}" for t in lab.tuned] + memory_notes()
    load1 = os.getloadavg()[0]
    machine = {
        k: f"load average {at_round[k - 1]:.1f} at the peers before, {at_compare[k]:.1f} -> "
        f"{at_round[k]:.1f} across the compare"
        for k in at_compare
    }
    report(results, chosen, drivers, rates, [*notes, *run_notes], args, (load0, load1), machine)


def device_notes(d: str, peer: list[float], r: dict | None) -> list[str]:
    """How much of each cold read came from the device, by the loop device's read counter, on
    both sides (fsbench's samples record it): a read served from a cache is not cold."""
    if not peer or r is None or not r.get("sample_details"):
        return []
    ours = [
        s["device"]["read_bytes"] / s["bytes"]
        for s in r["sample_details"]
        if s.get("device") and s.get("bytes")
    ]
    if not ours:
        return []
    return [
        f"seq-read/cold on {d}: read from the device per byte read (the loop device's "
        f"counter): fsbench {min(ours):.3f}–{max(ours):.3f}, dd {min(peer):.3f}–{max(peer):.3f}"
    ]


def outside_note(spec: str, d: str, ours: list[float], theirs: list[float]) -> str:
    """Why a row is outside the target, from what was measured: whether fsbench's samples and
    the peer's runs overlap (the machine's speed decided the row) or not (a difference of
    method, or of moment, that this run cannot tell apart)."""
    lo, hi = min(ours), max(ours)
    plo, phi = min(theirs), max(theirs)
    head = (
        f"{spec} on {d}: fsbench's samples {lo:,.0f}–{hi:,.0f} ({hi / lo:.1f}× apart), "
        f"the peer's runs {plo:,.0f}–{phi:,.0f} ({phi / plo:.1f}×)"
    )
    if lo <= phi and plo <= hi:
        return head + ": they overlap; the machine's speed, not the method, decided the row"
    return head + ": they do not overlap"


def tree_hash_notes(d: str, r: dict | None, rates: Rates, k: int) -> list[str]:
    """What the tree-hash peer pays that fsbench's hasher does not, measured: its processes'
    start, as a share of its run, and its CPU per GiB against fsbench's application CPU."""
    start, cpu = adjacent(rates[(XXHSUM_START, d)], k), adjacent(rates[(XXHSUM_CPU, d)], k)
    got = adjacent(rates[("tree-hash/cold", d)], k)
    if not (start and cpu and got and r and r["params"].get("tree_bytes")):
        return []
    run_s = r["params"]["tree_bytes"] / MiB / statistics.median(got)
    ours = (r.get("cpu") or {}).get("per_gib", {}).get("app")
    theirs = statistics.median(cpu)
    notes = []
    one = adjacent(rates[(ONE_XXHSUM, d)], k)
    if one and r.get("median"):
        # Measured beside it every round: the same tree hashed by one xxhsum process, as
        # seed 000 runs it. Where that agrees and the parallel peer does not, the parallel
        # peer's processes are what the row measures, not fsbench's hasher.
        many, single = statistics.median(got), statistics.median(one)
        notes.append(
            f"tree-hash/cold on {d}: one xxhsum process reads {single:,.0f} MiB/s, "
            f"{THREADS} in parallel {many:,.0f} ({single / many:.2f}×); fsbench against one "
            f"process {r['median'] / single:.2f}"
        )
    ctx = adjacent(rates.get((XXHSUM_CTX, d), []), k)
    mine = r.get("subject_ctx_switches_per_gib")
    if ctx and mine:
        notes.append(
            f"tree-hash/cold on {d}: the peer's processes and the daemon switched "
            f"{statistics.median(ctx):,.0f} times per GiB, fsbench's hasher and the daemon "
            f"{mine:,.0f} ({statistics.median(ctx) / mine:.2f}×)"
        )
    notes.append(
        f"tree-hash/cold on {d}: the peer's processes start in "
        f"{statistics.median(start) * 1000:.0f} ms (xargs -P {THREADS} xxhsum over {os.devnull}), "
        f"{statistics.median(start) / run_s:.0%} of its {run_s * 1000:.0f} ms run; they use "
        f"{theirs:.2f} CPU s/GiB"
        + (f", fsbench's hasher {ours:.2f} ({theirs / ours:.2f}× as much per byte)" if ours else "")
    )
    return notes


def adjacent(rates: list[tuple[int, float]], k: int) -> list[float]:
    """The peer's figures from the rounds just before and just after compare k."""
    return [v for r, v in rates if r in (k - 1, k)]


def report(
    results: dict,
    chosen: list[str],
    drivers: list[str],
    rates: Rates,
    notes: list[str],
    args: argparse.Namespace,
    loads: tuple[float, float],
    machine: dict[int, str],
) -> None:
    print(
        f"fsbench compare DRIVER --size {args.size} --workloads W --backing device:LOOP, one "
        f"compare per workload and driver on the peers' own loop device ({', '.join(drivers)}), "
        f"a round of peers before and after each workload; load average "
        f"{loads[0]:.1f} -> {loads[1]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'workload':<20} {'driver':<8} {'fsbench':>8} {'n':>3}  {'peer':<23} {'peer':>8} "
        f"{'spread':>13} {'fsbench/peer':>12}"
    )
    ratios: dict[tuple[str, str], float] = {}
    fsb: dict[tuple[str, str], float] = {}
    peer: dict[tuple[str, str], float] = {}
    for k, spec in enumerate(chosen, start=1):
        w = base(spec)
        for d in drivers:
            r = results.get((spec, d))
            got = adjacent(rates[(w, d)], k)
            ok = r is not None and r["status"] == "ok" and bool(r["median"])
            f_text = f"{r['median']:8,.0f}" if ok else f"{'—':>8}"
            p_text = f"{statistics.median(got):8,.0f}" if got else f"{'—':>8}"
            spread = f"{min(got):,.0f}–{max(got):,.0f}" if got else ""
            if ok and got:
                fsb[(spec, d)], peer[(spec, d)] = r["median"], statistics.median(got)
                ratios[(spec, d)] = fsb[(spec, d)] / peer[(spec, d)]
                mark = "" if LOW <= ratios[(spec, d)] <= HIGH else "  outside 0.85–1.18"
                q = f"{ratios[(spec, d)]:12.2f}{mark}"
            else:
                why = "no fsbench result" if r is None else (r.get("error") or "no peer figure")
                q = f"{'n/a':>12}  ({why})"
            n = len(r["samples"]) if r else 0
            label = f"{spec}@{PLACED[w]}" if w in PLACED else spec
            print(f"{label:<20} {d:<8} {f_text} {n:>3}  {PEER[w]:<23} {p_text} {spread:>13} {q}")
            if (spec, d) in ratios and not LOW <= ratios[(spec, d)] <= HIGH:
                notes.append(f"{outside_note(spec, d, r['samples'], got)} ({machine[k]})")
    if "tree-hash/cold" in map(base, chosen):
        k_tree = [base(w) for w in chosen].index("tree-hash/cold") + 1
        one = {d: adjacent(rates[(ONE_XXHSUM, d)], k_tree) for d in drivers}
        print(
            "  tree-hash/cold: xxhsum in one process (seed 000's way): "
            + ", ".join(f"{d} {statistics.median(v):,.0f}" for d, v in one.items() if v)
            + " MiB/s"
        )
        for d in drivers:
            notes += tree_hash_notes(d, results.get(("tree-hash/cold", d)), rates, k_tree)
    if len(drivers) > 1:
        a = drivers[0]
        print("ratio between drivers by fsbench and by the peers (agreement: fsbench/peers)")
        for b in drivers[1:]:
            for w in chosen:
                if (w, a) in ratios and (w, b) in ratios:
                    fr, pr = fsb[(w, a)] / fsb[(w, b)], peer[(w, a)] / peer[(w, b)]
                    print(
                        f"  {w:<20} {a}/{b} {fr:6.2f} vs {pr:6.2f} ({fr / pr:4.2f})"
                        f"   {b}/{a} {1 / fr:6.2f} vs {1 / pr:6.2f} ({pr / fr:4.2f})"
                    )
    for note in notes:
        print(f"note: {note}")
    if not ratios:
        print("worst agreement n/a (no row had both figures)")
        return
    (w, d), r = max(ratios.items(), key=lambda kv: agreement(kv[1]))
    print(f"worst agreement {r:.2f} ({w}, {d})")


if __name__ == "__main__":
    main()
