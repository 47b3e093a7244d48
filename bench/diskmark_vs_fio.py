"""fsbench's diskmark-mix suite (KDiskMark's eight tests and each one's MIX) against the same
twelve KDiskMark jobs as plain fio job files, on ext4, interleaved in one invocation (fsbench,
fio, fio, fsbench, ...).

    sudo uv run python bench/diskmark_vs_fio.py [--rounds 5] [--passes 2] [--size 2G]
        [--mode shared|own] [--tests T,...] [--lock PATH] [--runtime S] [--file-size SIZE]
    sudo uv run python bench/diskmark_vs_fio.py --smoke   # CI: 1 round, 1 s passes, 8 MiB

Per round, a RAM lab (fsbench's own `Lab`) makes two ext4 images of SIZE from one interleaved
fill, as it does for the subjects of one compare (`lab.fill_interleaved`, the pristine copied
over each), and mounts both:
- fsbench: `fsbench run --target MOUNT --suite diskmark-mix --repeat PASSES --warmup 0` on one,
  PASSES passes per test (one sample is one pass: workloads/diskmark.py), its sampler, cache
  preparation and counters as in a compare;
- fio: on the other, one file of the size fsbench's results say it used, laid out as
  KDiskMark lays its file out (`fio --create_only=1`), then each test PASSES times as a job
  file with KDiskMark 3.3's options (helper.cpp: ioengine=libaio direct=1 randrepeat=0
  refill_buffers end_fsync=1 runtime=5, bs/iodepth/numjobs of the test; a MIX rw/randrw at
  rwmixread=70, its figure KDiskMark's (R*70 + W*30) / 100 of the two directions' rates, as
  fsbench's), the caches dropped
  before each pass (the lab's make_cold; KDiskMark writes 1 to drop_caches, which O_DIRECT on
  ext4 does not notice).
Which image each side gets alternates every two rounds, which side goes first every round.

Why one fill: RAM on this VM is not uniform (docs/verdicts.md: an image's memory can read 40 %
slower than another's for as long as it lives, and which image gets the slow part depends on
what was allocated and freed before). Each side on an image of its own (`--mode own`: fsbench's
`compare ext4` makes its image, the fio side a fresh one made the same way) compares two
draws of memory, not two runners: there a side's writes swing 2x from round to round. Each
round prints both images' memory speed (the image file read whole from /dev/shm, GB/s). Every
read pass of both sides is checked to have read the device (its read counter over the bytes
fio read, printed as `dev`): O_DIRECT on ext4 goes to the loop device, and a cold read no
counter proves is refused.

Both sides' MB/s are fio's own (io_bytes over fio's runtime, which includes the final fsync;
KDiskMark reads fio's `bw`, the same quotient in KiB/s), so the ratio is what fsbench adds or
takes away: its scheduling, cache preparation, file layout, probes around each pass.

The machine's speed drifts by tens of percent within minutes on this shared 2-CPU VM (the
noise floor fsbench measures at a run's start and end moved +42 % in one), and a sequential
pass lasts only 0.1-0.3 s. So each round pairs the two sides measured within about a minute of
each other, the order alternating: a test's ratio is the median over rounds of (fsbench's
median pass / fio's median pass in that round). The pooled medians are printed too.
The last line is `worst fsbench/fio ratio R over N tests`, R the test ratio farthest from 1
(target 0.8-1.25). Needs root. Each round (both sides) takes the shared machine's heavy lock
(`--lock`), so a long run leaves others their turns.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import parse_subject
from fsbench.probes.procfs import ProcFS
from fsbench.workloads.diskmark import DISKMARK_JOBS, RUNTIME_S, DiskmarkTest
from fsbench.workloads.fio import fio_binary, parse_fio_json

MB = 1e6
JOBS = {j.variant: j for j in DISKMARK_JOBS}


def fsbench_round(
    where: list[str], args: argparse.Namespace, tmp: Path, i: int, tests: list[str]
) -> tuple[dict[str, list[float]], int, dict[str, list[float]]]:
    """MB/s of each test's passes in one `fsbench WHERE --suite diskmark-mix` (WHERE: `compare
    ext4 --size S` or `run --target DIR`; `--workloads diskmark/TEST,...` when some tests are
    asked), the file size its results record, and for reads each pass's device read bytes over
    the bytes fio read (fsbench's own counters around the pass)."""
    out = tmp / f"fsbench-{i}"
    which = (
        ["--suite", "diskmark-mix"]
        if len(tests) == len(JOBS)
        else ["--workloads", ",".join(f"diskmark/{v}" for v in tests)]
    )
    # KDiskMark's "Measure" and "Test" choices, when the bench is asked for other than its own.
    if args.runtime != RUNTIME_S:
        which += ["--diskmark-runtime", str(args.runtime)]
    if args.file_size_arg:
        which += ["--diskmark-size", args.file_size_arg]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsbench",
            *where,
            *which,
            "--repeat",
            str(args.passes),
            "--warmup",
            "0",
            "--json",
            "--out",
            str(out),
            "--db",
            str(tmp / "bench.db"),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"fsbench failed ({proc.returncode}): {proc.stderr[-500:]}")
    doc = json.loads(proc.stdout)
    got, file_size, dev = {}, 0, {}
    for r in doc["results"]:
        if r["status"] != "ok":
            sys.exit(f"fsbench: {r['workload_id']} {r['status']}: {r.get('error')}")
        if r["params"].get("refill_buffers") is not True:
            sys.exit(f"fsbench: {r['workload_id']} ran without KDiskMark's refill_buffers")
        v = r["params"]["variant"]
        got[v] = [x * 1024 * 1024 / MB for x in r["samples"]]
        file_size = int(r["params"]["file_size"])
        if bad := [d["cache"] for d in r["sample_details"] if d["cache"] != "direct"]:
            sys.exit(f"fsbench: {v} passes not proven O_DIRECT by the counters: {bad}")
        dev[v] = (
            []
            if JOBS[v].is_write
            else [d["device"]["read_bytes"] / d["bytes"] for d in r["sample_details"]]
        )
    return got, file_size, dev


def job_file(job: DiskmarkTest, path: str, size: int, runtime: int) -> str:
    """KDiskMark's fio options for one test (helper.cpp's startBenchmarkTest), as a plain job
    file; zero_buffers=0 is left out (fio's default), rwmixread only on a MIX."""
    mix = [f"rwmixread={job.rwmixread}"] if job.rwmixread is not None else []
    return "\n".join(
        [
            "[global]",
            "ioengine=libaio",
            "direct=1",
            "randrepeat=0",
            "refill_buffers",
            "end_fsync=1",
            f"runtime={runtime}",
            f"size={size}",
            f"filename={path}",
            "",
            f"[{job.variant}]",
            f"rw={job.rw}",
            f"bs={job.bs}",
            f"iodepth={job.iodepth}",
            f"numjobs={job.numjobs}",
            *mix,
            "",
        ]
    )


def fio_run(argv: list[str], what: str) -> str:
    proc = subprocess.run([fio_binary(), *argv], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"fio {what} failed: {proc.stderr[-500:]}")
    return proc.stdout


def lay_out(path: str, size: int) -> None:
    """KDiskMark's prepareBenchmarkFile: fio writes the file (create_only), and no extent may
    stay unwritten, or O_DIRECT reads of it would return zeros without touching the device."""
    fio_run(["--create_only=1", f"--filename={path}", f"--size={size}", "--name=prepare"], "layout")
    frag = subprocess.run(["filefrag", "-v", path], capture_output=True, text=True).stdout
    if os.path.getsize(path) < size or "unwritten" in frag:
        sys.exit(f"prepare: {path} is not fully written ({os.path.getsize(path)} of {size} B)")


def fio_pass(job: DiskmarkTest, path: str, size: int, tmp: Path, runtime: int) -> tuple[float, int]:
    """MB/s of one pass and the bytes fio moved; a MIX's MB/s is KDiskMark's figure,
    (R*p + W*(100-p)) / 100 of its two directions' rates (p its read share)."""
    jf = tmp / f"{job.variant}.fio"
    jf.write_text(job_file(job, path, size, runtime))
    stdout = fio_run(["--output-format=json", str(jf)], job.variant)
    if job.rwmixread is not None:
        r, w = (parse_fio_json(stdout, d) for d in ("read", "write"))
        p = job.rwmixread
        rate = (_mbps(r) * p + _mbps(w) * (100 - p)) / 100
        return rate, r["bytes"] + w["bytes"]
    out = parse_fio_json(stdout, "write" if job.is_write else "read")
    return _mbps(out), out["bytes"]


def _mbps(part: dict[str, float]) -> float:
    return part["bytes"] / MB / part["seconds"] if part["seconds"] > 0 else 0.0


def device_read(dev: str) -> int:
    return ProcFS().block_stat(os.path.basename(dev)).read_bytes


def fio_passes(
    lab: Lab, s: LabSubject, tests: list[str], size: int, args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The fio side on a mounted lab subject: its file laid out as KDiskMark lays it out, then
    PASSES passes of each test, pass-major as fsbench's rounds run its workloads, the caches
    dropped before each. MB/s of each pass, and for reads the device's read bytes over fio's
    (the proof that each pass read the device)."""
    assert s.device is not None
    got: dict[str, list[float]] = {v: [] for v in tests}
    dev_share: dict[str, list[float]] = {v: [] for v in tests}
    path = os.path.join(s.workdir, "diskmark.fio.0")
    os.makedirs(s.workdir, exist_ok=True)
    lay_out(path, size)
    for _ in range(args.passes):
        for v in tests:
            lab.make_cold(s)
            before = device_read(s.device)
            mbps, moved = fio_pass(JOBS[v], path, size, tmp, args.runtime)
            got[v].append(mbps)
            if not JOBS[v].is_write:
                dev_share[v].append((device_read(s.device) - before) / moved)
    os.unlink(path)
    return got, dev_share


Side = tuple[dict[str, list[float]], dict[str, list[float]]]
MEMORY: list[tuple[float, float]] = []  # per shared round: (fsbench's image, fio's) GB/s


def memory_gbps(path: Path) -> float:
    """How fast the RAM under an image reads: the image file read whole from /dev/shm (a copy
    out of its own pages; no device, no file system)."""
    buf = memoryview(bytearray(16 << 20))
    n, t0 = 0, time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(buf):
            n += k
    return n / 1e9 / (time.perf_counter() - t0)


def own_round(
    args: argparse.Namespace, tests: list[str], sides: tuple[str, str], tmp: Path, i: int
) -> tuple[Side, Side, int]:
    """--mode own: fsbench's `compare ext4` makes its image in its own lab; the fio side's is
    made fresh for the round by the lab exactly so (one image: the same RAM fill, pristine,
    copy_over, attach, mount). Each image's memory is its own draw."""
    ours: Side = ({}, {})
    theirs: Side = ({}, {})
    size = args.file_size
    for side in sides:
        if side == "fsbench":
            where = ["compare", "ext4", "--size", args.size]
            got, size, dev = fsbench_round(where, args, tmp, i, tests)
            ours = (got, dev)
            continue
        with Lab(f"bench-diskmark-{os.getpid()}-{i}", Backing("ram"), parse_size(args.size)) as lab:
            (s,) = lab.prepare([parse_subject("ext4")])
            lab.mount(s)
            theirs = fio_passes(lab, s, tests, size, args, tmp)
            lab.unmount(s)
    return ours, theirs, size


def shared_round(
    args: argparse.Namespace, tests: list[str], sides: tuple[str, str], tmp: Path, i: int
) -> tuple[Side, Side, int]:
    """--mode shared (default): one lab makes two ext4 images from one interleaved fill (its
    way for several subjects), mounts both; fsbench runs on one (`fsbench run --target`: its
    sampler, cache preparation and counters, no lab of its own), fio on the other. Which image
    each side gets alternates every two rounds, the order every round."""
    ours: Side = ({}, {})
    theirs: Side = ({}, {})
    size = args.file_size
    spec = parse_subject("ext4")
    with Lab(f"bench-diskmark-{os.getpid()}-{i}", Backing("ram"), parse_size(args.size)) as lab:
        a, b = lab.prepare([spec, spec])
        for s in (a, b):
            lab.mount(s)
        mine, fio_s = (a, b) if (i // 2) % 2 == 0 else (b, a)
        assert mine.image is not None and fio_s.image is not None
        MEMORY.append((memory_gbps(mine.image), memory_gbps(fio_s.image)))
        for side in sides:
            if side == "fsbench":
                where = ["run", "--target", mine.mountpoint]
                got, size, dev = fsbench_round(where, args, tmp, i, tests)
                ours = (got, dev)
            else:
                theirs = fio_passes(lab, fio_s, tests, size, args, tmp)
        for s in (a, b):
            lab.unmount(s)
    return ours, theirs, size


@contextmanager
def heavy_lock(path: str) -> Iterator[None]:
    """The shared machine's lock, held for one round (both sides) so others get turns."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def span(xs: list[float]) -> str:
    return f"{min(xs) * 100:.0f}-{max(xs) * 100:.0f} %" if xs else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=2, help="passes per test per round per side")
    ap.add_argument("--size", default="2G", help="image size for both (default 2G)")
    ap.add_argument("--tests", help="a comma list of the tests to run (default: all twelve)")
    ap.add_argument("--runtime", type=int, default=RUNTIME_S, help="a pass's limit, s")
    ap.add_argument(
        "--file-size", dest="file_size_arg", help="the test file (default: fsbench's choice)"
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CI's smoke: 1 round of 1 pass, 1 s passes over an 8 MiB file on 128M images",
    )
    ap.add_argument(
        "--lock", default="/tmp/fsbench-heavy.lock", help="taken per round ('' for none)"
    )
    ap.add_argument(
        "--mode",
        choices=("shared", "own"),
        default="shared",
        help="shared: both sides' images from one interleaved fill per round; own: fsbench's "
        "compare makes its own image, the fio side a fresh one the same way",
    )
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.passes, args.size, args.runtime = 1, 1, "128M", 1
        args.file_size_arg, args.lock = "8M", ""
    tests = args.tests.split(",") if args.tests else list(JOBS)
    if unknown := [v for v in tests if v not in JOBS]:
        sys.exit(f"diskmark_vs_fio: no test {', '.join(unknown)}; the tests: {', '.join(JOBS)}")
    if os.geteuid() != 0:
        sys.exit("diskmark_vs_fio: needs root (formats and mounts images)")
    # [round][test] -> that round's passes
    ours: list[dict[str, list[float]]] = []
    raw: list[dict[str, list[float]]] = []
    # test -> device read bytes / bytes read, every read pass of each side
    ours_dev: dict[str, list[float]] = {v: [] for v in tests}
    raw_dev: dict[str, list[float]] = {v: [] for v in tests}
    loads: list[float] = []
    args.file_size = 0  # fsbench's results say it (fsbench goes first in round 1)
    with tempfile.TemporaryDirectory(prefix="diskmark-vs-fio-") as t:
        tmp = Path(t)
        for i in range(args.rounds):
            # Alternate which side goes first, so neither always follows the other (fsbench
            # first in round 1: its results give the file size fio's side uses).
            sides = ("fsbench", "fio") if i % 2 == 0 else ("fio", "fsbench")
            mine: dict[str, list[float]] = {}
            theirs: dict[str, list[float]] = {}
            with heavy_lock(args.lock):
                t0 = time.monotonic()
                loads.append(os.getloadavg()[0])
                run_round = shared_round if args.mode == "shared" else own_round
                (mine, dev_o), (theirs, dev_f), args.file_size = run_round(
                    args, tests, sides, tmp, i
                )
                loads.append(os.getloadavg()[0])
                for v in tests:
                    ours_dev[v] += dev_o[v]
                    raw_dev[v] += dev_f[v]
                held = time.monotonic() - t0
            ours.append(mine)
            raw.append(theirs)
            mem = f", memory {MEMORY[-1][0]:.1f}/{MEMORY[-1][1]:.1f} GB/s" if MEMORY else ""
            print(
                f"round {i + 1} {sides[0]} first, {held:.0f} s{mem} "
                f"(load {loads[-2]:.1f}/{loads[-1]:.1f}): "
                + "  ".join(
                    f"{v} {statistics.median(mine[v]):.0f}/{statistics.median(theirs[v]):.0f}"
                    for v in tests
                ),
                flush=True,
            )
    print(
        f"\ndiskmark on ext4, {args.size} RAM images made fresh per round "
        + ("from one interleaved fill" if args.mode == "shared" else "by each side")
        + f", file {args.file_size / 2**20:.0f} MiB, {args.rounds} rounds x {args.passes} passes "
        f"a side, load "
        f"average {min(loads):.1f}-{max(loads):.1f} (MB/s; device read / bytes read)"
    )
    print(
        f"{'test':<18} {'fsbench':>9} {'fio':>9} {'pooled':>7} {'ratio':>6}  "
        f"{'dev fsbench':>11} {'dev fio':>11}  per round"
    )
    ratios = {}
    for v in tests:
        a = statistics.median(x for r in ours for x in r[v])
        b = statistics.median(x for r in raw for x in r[v])
        per = [
            statistics.median(o[v]) / statistics.median(f[v])
            for o, f in zip(ours, raw, strict=True)
        ]
        ratios[v] = statistics.median(per)
        mine_all = [x for r in ours for x in r[v]]
        fio_all = [x for r in raw for x in r[v]]
        print(
            f"{v:<18} {a:>9.1f} {b:>9.1f} {a / b:>7.3f} {ratios[v]:>6.3f}  "
            f"{span(ours_dev[v]):>11} {span(raw_dev[v]):>11}  "
            + " ".join(f"{x:.2f}" for x in per)
            + f"  (passes {min(mine_all):.0f}-{max(mine_all):.0f} / "
            f"{min(fio_all):.0f}-{max(fio_all):.0f})"
        )
    worst = max(ratios.values(), key=lambda r: max(r, 1 / r))
    print(f"worst fsbench/fio ratio {worst:.3f} over {len(ratios)} tests")


if __name__ == "__main__":
    main()
