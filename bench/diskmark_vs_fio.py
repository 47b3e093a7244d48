"""fsbench's diskmark suite against the same eight KDiskMark jobs as plain fio job files, on
ext4, interleaved in one invocation (fsbench, fio, fio, fsbench, ...).

    sudo uv run python bench/diskmark_vs_fio.py [--rounds 3] [--passes 3] [--size 2G]

- fsbench: `fsbench compare ext4 --suite diskmark --size SIZE --repeat PASSES --warmup 0`,
  PASSES passes per test per round (one sample is one pass: workloads/diskmark.py);
- fio: a RAM image of the same size formatted and mounted by fsbench's own lab, exactly as the
  compare does; on it one file of the size fsbench's results say it used, laid out once, and per
  round each test PASSES times as a job file with KDiskMark 3.3's options (ioengine=libaio direct=1
  randrepeat=0 end_fsync=1 runtime=5, bs/iodepth/numjobs of the test), the caches dropped
  before each pass (the lab's make_cold, as KDiskMark drops them).

Both sides' MB/s are fio's own (io_bytes over runtime), so the ratio is what fsbench adds or
takes away: its scheduling, cache preparation, file layout and the image. A pass lasts 0.05-2 s
here and single passes spread ±25 % on this shared 2-CPU VM, so each side's figure is the
median of rounds × passes. Prints each test's medians and ratio fsbench/fio; the last line is
`worst fsbench/fio ratio R over N tests`, R the ratio farthest from 1 (target 0.8-1.25).
Needs root. Run it under the shared-machine lock.
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

from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subject
from fsbench.workloads.diskmark import DISKMARK_JOBS, RUNTIME_S
from fsbench.workloads.fio import FioJob, fio_binary, parse_fio_json

MB = 1e6
JOBS = {j.variant: j for j in DISKMARK_JOBS}


def fsbench_round(size: str, passes: int, tmp: Path, i: int) -> tuple[dict[str, list[float]], int]:
    """MB/s of each test's passes in one `fsbench compare ext4 --suite diskmark`, and the
    file size its results record."""
    out = tmp / f"fsbench-{i}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsbench",
            "compare",
            "ext4",
            "--suite",
            "diskmark",
            "--size",
            size,
            "--repeat",
            str(passes),
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
    got, file_size = {}, 0
    for r in doc["results"]:
        if r["status"] != "ok":
            sys.exit(f"fsbench: {r['workload_id']} {r['status']}: {r.get('error')}")
        got[r["params"]["variant"]] = [x * 1024 * 1024 / MB for x in r["samples"]]
        file_size = int(r["params"]["file_size"])
    return got, file_size


def job_file(job: FioJob, path: str, size: int) -> str:
    """KDiskMark's fio options for one test, as a plain job file."""
    return "\n".join(
        [
            "[global]",
            "ioengine=libaio",
            "direct=1",
            "randrepeat=0",
            "end_fsync=1",
            f"runtime={RUNTIME_S}",
            f"size={size}",
            f"filename={path}",
            "group_reporting=1",
            "",
            f"[{job.variant}]",
            f"rw={job.rw}",
            f"bs={job.bs}",
            f"iodepth={job.iodepth}",
            f"numjobs={job.numjobs}",
            "",
        ]
    )


def fio_pass(job: FioJob, path: str, size: int, tmp: Path) -> float:
    jf = tmp / f"{job.variant}.fio"
    jf.write_text(job_file(job, path, size))
    proc = subprocess.run(
        [fio_binary(), "--output-format=json", str(jf)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"fio {job.variant} failed: {proc.stderr[-500:]}")
    out = parse_fio_json(proc.stdout, "write" if job.is_write else "read")
    return out["bytes"] / MB / out["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3, help="passes per test per round")
    ap.add_argument("--size", default="2G", help="image size for both (default 2G)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("diskmark_vs_fio: needs root (formats and mounts images)")
    ours: dict[str, list[float]] = {v: [] for v in JOBS}
    raw: dict[str, list[float]] = {v: [] for v in JOBS}
    with tempfile.TemporaryDirectory(prefix="diskmark-vs-fio-") as t:
        tmp = Path(t)
        spec = parse_subject("ext4")
        with Lab(f"bench-diskmark-{os.getpid()}", Backing("ram"), parse_size(args.size)) as lab:
            lab.check([spec])
            (s,) = lab.prepare([spec])
            lab.mount(s)
            path = os.path.join(s.workdir, "diskmark.fio.0")
            size = 0
            for i in range(args.rounds):
                # Alternate which side goes first, so neither always follows the other (fsbench
                # first in round 1: its results give the file size fio's side uses).
                sides = ("fsbench", "fio") if i % 2 == 0 else ("fio", "fsbench")
                for side in sides:
                    if side == "fsbench":
                        got, size = fsbench_round(args.size, args.passes, tmp, i)
                        for v, xs in got.items():
                            ours[v] += xs
                    else:
                        if not os.path.exists(path):
                            # Laid out once, as KDiskMark's prepare does (a plain sequential
                            # write, fsynced).
                            with open(path, "wb") as f:
                                block = os.urandom(1 << 20)
                                for _ in range(size // len(block)):
                                    f.write(block)
                                os.fsync(f.fileno())
                        for _ in range(args.passes):
                            for v, job in JOBS.items():
                                lab.make_cold(s)
                                raw[v].append(fio_pass(job, path, size, tmp))
                print(
                    f"round {i + 1}: "
                    + "  ".join(f"{v} {ours[v][-1]:.0f}/{raw[v][-1]:.0f}" for v in JOBS),
                    flush=True,
                )
            lab.unmount(s)
    print(
        f"\ndiskmark on ext4, {args.size} RAM image, file {size / 2**20:.0f} MiB, "
        f"{args.rounds} rounds x {args.passes} passes (MB/s, medians)"
    )
    print(f"{'test':<18} {'fsbench':>9} {'fio':>9} {'ratio':>6}")
    ratios = {}
    for v in JOBS:
        a, b = statistics.median(ours[v]), statistics.median(raw[v])
        ratios[v] = a / b
        print(f"{v:<18} {a:>9.1f} {b:>9.1f} {ratios[v]:>6.3f}")
    worst = max(ratios.values(), key=lambda r: max(r, 1 / r))
    print(f"worst fsbench/fio ratio {worst:.3f} over {len(ratios)} tests")


if __name__ == "__main__":
    main()
