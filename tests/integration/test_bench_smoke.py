"""Every bench/ script at its smallest size (issue 53): it starts, measures a little and prints
its ratio line, so a change that breaks a bench turns CI red (bench/diskmark_vs_fio.py died
on the MIX tests for weeks with nothing running it). The figures at this size mean nothing
and are not judged; the full-size runs stay by hand (each script's docstring).

Each script is a subprocess of the venv's Python, in a working directory of the test's own
(its scratch trees there, not /dev/shm's), without the machine's heavy lock (`--lock ''`: the
suite holds the machine already). The scripts that format and mount need root, and run in the
lab scope with every other integration test. The simulations (no file system, no I/O: only the
runner's and the verdict's code on made-up samples), and the scripts whose I/O stays in their
own directory (no mount, no drop_caches), run beside the lab scope, from
test_bench_smoke_simulated.py, as the unit tests do.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

BENCH = REPO / "bench"
TMP = "{tmp}"  # replaced by the test's own directory
SHM = "{shm}"  # replaced by a tmpfs the test mounts in its own directory (Smoke.tmpfs)
# Fixed, short, untraced compares: what the full runs vary is not what a smoke checks.
QUICK = "--warmup 0 --min-sample-time 0 --no-trace"


@dataclass(frozen=True)
class Smoke:
    args: tuple[str, ...]
    line: str  # a regular expression its ratio (or summary) line matches
    root: bool = False
    # Exit codes that still mean "it ran": a statistical promise a smoke's handful of tables
    # cannot judge (its line is printed either way).
    codes: tuple[int, ...] = (0,)
    # No file system and no I/O: CPU only, run beside the lab scope (see above).
    simulated: bool = False
    # I/O in the test's own directory only, no loop device, mount, drop_caches or page
    # reporting: beside the lab scope too, as the simulations (its figure is not judged).
    beside: bool = False
    # A tmpfs of this size mounted for the script at {shm} (root): a script that sizes its
    # files by the free space (fio_overhead: 40 % of it, up to 1 GiB) writes a few MiB there.
    tmpfs: str = ""


SMOKES: dict[str, Smoke] = {
    "aa.py": Smoke(
        ("--runs", "0", "--fuse-runs", "0", "--btrfs-runs", "0", "--xfs-runs", "0",
         "--fuse2fs-runs", "0", "--known", "0", "--set", "ext4,ext4:relatime", "--lock", "",
         "--extra", f"--size 64M --workloads seq-write/fsync --repeat 2 {QUICK}"),
        r"^A/A: \d+ of \d+ tables with any false", root=True,
    ),
    "aging_ratios.py": Smoke(
        ("--size", "64M", "--age", "none,light", "--repeat", "1", "--drivers", "ext4",
         "--workloads", "seq-write/fsync"),
        r"^commands: first \d+ s \(ages\), second \d+ s \(reuses\)", root=True,
    ),
    # Trial 0 is a SIGINT in the freeze window, read at once: test_chaos leaves it to this
    # smoke, which must reach the window while the run still ran.
    "chaos.py": Smoke(
        ("--trials", "1", "--seed", "7", "--settle", "0"),
        r"^trial 0 \(seed 7\): SIGINT at freeze \S+ s: exit \d+, moment reached, .*: nothing "
        r"left behind\n(?:.*\n)*chaos: 1/1 trials left nothing behind", root=True,
    ),
    "copy_small_vs_cp.py": Smoke(
        ("--rounds", "1", "--files", "20", "--src", TMP),
        r"^ratio fsbench/cp \(throughput\): \d",
        beside=True,
    ),
    "decisive.py": Smoke(
        ("--runs", "2"), r"^\s*1\.2x at .* samples a side .*× the bound$", codes=(0, 1),
        simulated=True,
    ),
    # One test of each kind (a sequential read, a random write, a MIX): each kind has its own
    # path through both sides (the MIX's KeyError was one); all twelve by hand (~14 s here).
    "diskmark_vs_fio.py": Smoke(
        ("--smoke", "--tests", "seq1m-q8t1-read,rnd4k-q32t1-write,seq1m-q1t1-mix"),
        r"^worst fsbench/fio ratio [\d.]+ over 3 tests", root=True,
    ),
    "family_choice.py": Smoke(
        ("--runs", "1", "--smoke"), r"^3-3 rounds, bonferroni: any interval > 5x ",
        simulated=True,
    ),
    "tune_null.py": Smoke(
        ("--tunes", "2"), r"^[\d.]+ % of tunes recommend a change \(95 % Monte-Carlo interval",
        simulated=True,
    ),
    # On a tmpfs of its own (its default is /dev/shm, 1 GiB a side: ~16 s): no loop device,
    # no cold read, so beside the lab scope.
    "fio_overhead.py": Smoke(
        ("--rounds", "1", "--dir", SHM), r"^ratio fsbench/raw = [\d.]+", root=True,
        beside=True, tmpfs="96m",
    ),
    "fuse_transports.py": Smoke(
        ("--size", "64M", "--repeat", "1", "--placement", "same", "--extra", QUICK),
        r"^seq-write/fsync\s+passthrough_hp\S*\s+\S+\s+[\d,.]+\s+[\d.]+×", root=True,
    ),
    "matrix_vs_iozone.py": Smoke(
        ("--size", "128M", "--drivers", "ext4"),
        r"^all\s+[\d.]+\s+[\d.]+\s+[\d.]+×", root=True,
    ),
    "metadata_vs_c.py": Smoke(
        ("--files", "500", "--rounds", "1", "--dir", TMP),
        r"^ratio fsbench / C \(same calls\):\s+[\d.]+",
        beside=True,
    ),
    "one_stall.py": Smoke(
        ("--runs", "3"), r"^  wider than 2x: [\d.]+ of the reference's", simulated=True
    ),
    "peers.py": Smoke(
        ("--size", "64M", "--drivers", "ext4", "--workloads", "seq-write/fsync",
         "--extra", f"--repeat 2 {QUICK}"),
        r"^worst agreement ", root=True,
    ),
    "probe_overhead.py": Smoke(
        ("--rounds", "1", "--repeat", "1", "--size", "64M", "--scale", "0.05",
         "--drivers", "ext4"),
        r"^summary: worst on/off ratio [\d.]+", root=True,
    ),
    "treehash_vs_xxhsum.py": Smoke(
        ("--size-mib", "4", "--rounds", "1", "--dir", TMP),
        r"^speed ratio fsbench/xxhsum",
        beside=True,
    ),
    "verdict_corners.py": Smoke(
        ("--runs", "1", "--only", "c2"), r"^c2 .*\d+(\.\d+)? %", simulated=True
    ),
    "verdict_designs.py": Smoke(
        ("--runs", "50", "--only", "2 subjects, 2 cells, n=3"),
        r"^worst upper end [\d.]+ %", codes=(0, 1), simulated=True,
    ),
    "verdict_readme.py": Smoke(("--runs", "2"), r"^quiet: any interval > 5x ", simulated=True),
}  # fmt: skip


def test_every_bench_script_has_a_smoke() -> None:
    scripts = sorted(p.name for p in BENCH.glob("*.py"))
    assert scripts == sorted(SMOKES), "a bench/ script without its smoke here, or one gone"


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(s, marks=pytest.mark.root) if SMOKES[s].root else s
        for s in sorted(SMOKES)
        if not (SMOKES[s].simulated or SMOKES[s].beside)
    ],
)
def test_the_bench_runs_at_its_smallest_size(script: str, tmp_path: Path) -> None:
    run_smoke(script, tmp_path)


def run_smoke(script: str, tmp_path: Path) -> None:
    smoke = SMOKES[script]
    shm = tmp_path / "shm"
    if smoke.tmpfs:
        shm.mkdir()
        mount = ["mount", "-t", "tmpfs", "-o", f"size={smoke.tmpfs}", "fsbench-smoke", str(shm)]
        subprocess.run(mount, check=True)
    try:
        _run(script, smoke, tmp_path, shm)
    finally:
        if smoke.tmpfs:
            subprocess.run(["umount", str(shm)], check=True)


def _run(script: str, smoke: Smoke, tmp_path: Path, shm: Path) -> None:
    args = [a.replace(TMP, str(tmp_path)).replace(SHM, str(shm)) for a in smoke.args]
    t0 = time.monotonic()
    ran = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    took = time.monotonic() - t0
    said = f"{script} ({took:.0f} s, exit {ran.returncode}):\n{ran.stdout[-3000:]}\n"
    said += ran.stderr[-3000:]
    assert ran.returncode in smoke.codes, said
    assert re.search(smoke.line, ran.stdout, re.MULTILINE), said
    assert "Traceback" not in ran.stderr, said
