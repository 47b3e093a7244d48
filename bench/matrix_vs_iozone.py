"""fsbench's iozone-quick matrix against Iozone itself, on the same images, in one invocation.

    sudo uv run python bench/matrix_vs_iozone.py [--size 1G] [--drivers ext4,ntfs-3g]

For each driver:
- fsbench: the whole `fsbench compare DRIVER --suite iozone-quick --repeat 1` command, timed
  from start to exit (process start, image, mount, every cell, report);
- iozone: a RAM image formatted and mounted by fsbench's own lab, exactly as the compare does,
  then `iozone -i 0 -i 1 -i 2 -i 5 -j 8 -e -s FILE -r RECORD` for every (file, record) cell of
  the quick matrix (write, rewrite, read, reread, random read/write, strided read 8 records
  apart, fsync included), timed per process and summed; formatting is not counted;
- the cost of a verified cold read: sync, drop_caches (FUSE: remount) — what fsbench pays
  before each cold cell and Iozone never does (Iozone's "reads" are warm) — measured on the
  mounted image and multiplied by the number of cold cells; stated separately.

Prints per driver: both wall times, the ratio, the cold-cell cost and the ratio without it,
and `cells s`: the compare's own time for the cells (results.json `schedule.spent_s`: the
runner's rounds, cold-cache preparation included; not process start, images, noise floor,
report), which is what Iozone's summed per-cell processes stand against; then the totals, and
`together`: one `fsbench compare` of all the drivers (what a user runs, its fixed costs paid
once) against the same Iozone total. The target is a cells ratio ≤ 2, the verified cold
reads' cost taken out as the issue states it (the last column, estimated; and under each row
the cells without the cache phase the run itself measured, `schedule.phases`). Needs
root and the `iozone3` package (`scripts/setup.sh --test` installs it). Run it under the
shared-machine lock.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subject
from fsbench.schedule.phases import phases_line
from fsbench.workloads.iozone import (
    QUICK_FILE_SIZES,
    QUICK_JOBS,
    QUICK_RECORD_SIZES,
    STRIDE_RECORDS,
    human_size,
)

KiB = 1024


def fsbench_wall(
    drivers: list[str], size: str, tmp: Path
) -> tuple[float, float, int, int, dict[str, float]]:
    """Seconds the whole compare command takes, seconds its cells took (the runner's rounds:
    `schedule.spent_s`, without process start, images, noise floor and report), how many
    cells it reported ok, the bytes its samples moved, and where the cells' time went
    (`schedule.phases`: the timed runs against fsbench's own steps around them)."""
    out = tmp / f"fsbench-{'-'.join(drivers)}"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsbench",
            "compare",
            *drivers,
            "--suite",
            "iozone-quick",
            "--repeat",
            "1",
            "--size",
            size,
            "--out",
            str(out),
            "--db",
            str(tmp / "results.db"),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"fsbench compare {' '.join(drivers)} failed: {proc.stderr.strip()[-500:]}")
    doc = json.loads((out / "results.json").read_text())
    ok = sum(1 for r in doc["results"] if r["status"] == "ok")
    moved = sum(d["bytes"] for r in doc["results"] for d in r["sample_details"])
    phases = doc["schedule"].get("phases") or {}
    return wall, float(doc["schedule"]["spent_s"]), ok, moved, phases


def _without_cache(cells_s: float, phases: dict[str, float], iozone_s: float) -> str:
    """The cells' time less their own measured cache phase (the verified cold reads' sync,
    freeze, drop_caches and FUSE remounts, as this run paid them; the `cold cells s` column
    estimates the same from one driver alone, which undercounts a run of several drivers,
    where drop_caches has every subject's cache to drop)."""
    cache = phases.get("cache")
    if cache is None:
        return "no phases recorded"
    rest = cells_s - cache
    return f"cells without their cache phase ({cache:.1f} s): {rest:.1f} s = {rest / iozone_s:.1f}×"


def cells() -> list[tuple[int, int]]:
    """The quick matrix' (file size, record size) pairs with record ≤ file."""
    return [(f, r) for f in QUICK_FILE_SIZES for r in QUICK_RECORD_SIZES if r <= f]


def iozone_bytes() -> int:
    """What Iozone moves over the quick cells: each op passes over its file once."""
    n = 0
    for fsize, rsize in cells():
        n += fsize * (6 + (fsize // rsize >= 2 * STRIDE_RECORDS))
    return n


def iozone_wall(driver: str, size: int, run_id: str) -> tuple[float, float]:
    """Seconds Iozone takes over the quick cells on a fresh image of this driver, and the
    seconds one verified-cold preparation (make_cold) takes there (median of 5)."""
    spec = parse_subject(driver)
    with Lab(run_id, Backing("ram"), size) as lab:
        lab.check([spec])
        (s,) = lab.prepare([spec])
        lab.mount(s)
        path = os.path.join(s.workdir, "iozone.tmp")
        total = 0.0
        for fsize, rsize in cells():
            argv = ["iozone", "-i", "0", "-i", "1", "-i", "2"]
            if fsize // rsize >= 2 * STRIDE_RECORDS:  # fsbench's valid strided cells
                argv += ["-i", "5", "-j", str(STRIDE_RECORDS)]
            argv += ["-e", "-s", f"{fsize // KiB}k", "-r", f"{rsize // KiB}k", "-f", path]
            t0 = time.monotonic()
            proc = subprocess.run(argv, capture_output=True, text=True)
            total += time.monotonic() - t0
            if proc.returncode != 0:
                sys.exit(f"iozone on {driver} failed: {proc.stdout[-300:]}{proc.stderr[-300:]}")
        # What a verified cold cell pays first: a file of the matrix' largest size, read, then
        # made cold.
        with open(path, "wb") as f:
            f.write(os.urandom(max(QUICK_FILE_SIZES)))
        cold = []
        for _ in range(5):
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
            t0 = time.monotonic()
            lab.make_cold(s)
            cold.append(time.monotonic() - t0)
            path = os.path.join(s.workdir, "iozone.tmp")  # a remount keeps the path
        os.unlink(path)
        lab.unmount(s)
    cold.sort()
    return total, cold[len(cold) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="1G", help="image size for both (default 1G)")
    ap.add_argument("--drivers", default="ext4,ntfs-3g")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("matrix_vs_iozone: needs root (formats and mounts images)")
    if shutil.which("iozone") is None:
        sys.exit("matrix_vs_iozone: iozone not found; run scripts/setup.sh --test")
    size = parse_size(args.size)
    drivers = [d for d in args.drivers.split(",") if d]
    n_cold = sum(1 for j in QUICK_JOBS if j.cache == "cold")
    print(
        f"iozone-quick: {len(QUICK_JOBS)} cells per driver ({n_cold} cold); files "
        f"{', '.join(human_size(x) for x in QUICK_FILE_SIZES)}; records "
        f"{', '.join(human_size(x) for x in QUICK_RECORD_SIZES)}; {args.size} RAM images"
    )
    print(
        f"{'driver':<10} {'fsbench s':>10} {'iozone s':>9} {'ratio':>6} "
        f"{'cold cells s':>13} {'ratio w/o cold':>15} {'cells s':>8} {'cells ratio':>12} "
        f"{'w/o cold':>9}"
    )
    tot_f = tot_i = tot_c = tot_cells = 0.0
    moved_f = 0
    with tempfile.TemporaryDirectory(prefix="matrix-vs-iozone-") as t:
        tmp = Path(t)
        for i, d in enumerate(drivers):
            fs_wall, cells_s, ok, moved, phases = fsbench_wall([d], args.size, tmp)
            tot_cells += cells_s
            moved_f += moved
            io_wall, cold_one = iozone_wall(d, size, f"bench-iozone-{os.getpid()}-{i}")
            cold = cold_one * n_cold
            tot_f, tot_i, tot_c = tot_f + fs_wall, tot_i + io_wall, tot_c + cold
            print(
                f"{d:<10} {fs_wall:>10.1f} {io_wall:>9.1f} {fs_wall / io_wall:>5.1f}× "
                f"{cold:>13.1f} {(fs_wall - cold) / io_wall:>14.1f}× {cells_s:>8.1f} "
                f"{cells_s / io_wall:>11.1f}× {(cells_s - cold) / io_wall:>8.1f}×"
                + ("" if ok == len(QUICK_JOBS) else f"  ({ok}/{len(QUICK_JOBS)} cells ok)")
            )
            print(f"{'':<10} {phases_line(phases, cells_s)}")
            print(f"{'':<10} {_without_cache(cells_s, phases, io_wall)}")
        print(
            f"{'all':<10} {tot_f:>10.1f} {tot_i:>9.1f} {tot_f / tot_i:>5.1f}× "
            f"{tot_c:>13.1f} {(tot_f - tot_c) / tot_i:>14.1f}× {tot_cells:>8.1f} "
            f"{tot_cells / tot_i:>11.1f}× {(tot_cells - tot_c) / tot_i:>8.1f}×"
        )
        if len(drivers) > 1:
            # What a user runs: one compare of every driver, its fixed costs (image formats,
            # tracer, noise floor, report) paid once rather than once per driver.
            one, one_cells, ok, _, phases = fsbench_wall(drivers, args.size, tmp)
            print(
                f"{'together':<10} {one:>10.1f} {tot_i:>9.1f} {one / tot_i:>5.1f}× "
                f"{tot_c:>13.1f} {(one - tot_c) / tot_i:>14.1f}× {one_cells:>8.1f} "
                f"{one_cells / tot_i:>11.1f}× {(one_cells - tot_c) / tot_i:>8.1f}×"
                + ("" if ok == len(QUICK_JOBS) * len(drivers) else f"  ({ok} cells ok)")
            )
            print(f"{'':<10} {phases_line(phases, one_cells)}")
            print(f"{'':<10} {_without_cache(one_cells, phases, tot_i)}")
    # Not quite the same work: a sample moves at least 8 MiB (several files of a small cell's
    # size, or passes over a reread's file); Iozone passes over each file once.
    mib = 1024 * 1024
    print(
        f"bytes moved: fsbench {moved_f / mib:,.0f} MiB, iozone "
        f"{iozone_bytes() * len(drivers) / mib:,.0f} MiB"
    )


if __name__ == "__main__":
    main()
