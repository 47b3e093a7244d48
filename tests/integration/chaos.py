"""Chaos trials: a real `fsbench compare` (a kernel and a FUSE driver, cold reads, so file
systems are frozen and remounted) interrupted at a random moment by SIGINT (to the process
group, as Ctrl-C), SIGTERM (to the process started, as `kill`) or SIGKILL (to fsbench itself,
then `fsbench cleanup`). After each trial the system itself is read (conftest's leftover
checks, every mount namespace) for anything of that run, and results.json must exist whenever
the exit code says the run wrote it.

Seeded: trial i of seed S is always the same signal, moment and delay, so a failure can be
replayed with `bench/chaos.py --seed S --trials N` (or FSBENCH_CHAOS_SEED for the test).
Used by tests/integration/test_chaos.py (quick form) and bench/chaos.py (long form).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from conftest import (
    REPO,
    RunDirs,
    alive,
    cmdline,
    fsbench_argv,
    leftovers_anywhere,
    loops_backed_under,
    mounts_under,
    processes_naming,
    release_leftovers,
    wait_until,
)

# Both kinds of driver and a cold read (ext4 is frozen and thawed before it, ntfs-3g
# remounted), small enough that a whole run takes seconds.
COMPARE = [
    "compare",
    "ext4",
    "ntfs-3g",
    "--size",
    "64M",
    "--workloads",
    # fio's writer (:psync), not the default native loop: the "fio" moment interrupts a child
    # process mid-measurement. Many files: the full cold method (a freeze).
    "seq-write/fsync:psync,metadata/stat-flat-cold",
    "--repeat",
    "2",
    "--warmup",
    "0",
    # Short samples: the moments come sooner (the freeze window after 4 samples of a fifth
    # of a second, not of a second), and each trial costs the suite less.
    "--min-sample-time",
    "0.2",
]
# The FUSE floor over io_uring: the run holds enable_uring on (fuse/transports.py), and a
# SIGKILL mid-sample leaves `fsbench cleanup` to put it back (conftest's "kernel settings").
COMPARE_URING = [*COMPARE[:2], "passthrough_hp:uring", *COMPARE[3:]]
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
# When to interrupt, with weights: the freeze window most, as it is the shortest and worst.
MOMENTS = {
    "start": 1,  # any time in the first 1.5 s (uv, imports, argument checks, formatting)
    "setup": 2,  # while images are made, copied, attached and mounted
    "mount": 2,  # while a mount or unmount tool runs (first mounts, FUSE remounts)
    "fio": 2,  # during a measurement
    "freeze": 4,  # a file system is being frozen for a cold read
    "any": 1,  # any time until the run would have ended
}
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Trial:
    index: int
    seed: int
    signal: str
    moment: str
    delay: float  # seconds after the moment is reached

    def describe(self) -> str:
        return (
            f"trial {self.index} (seed {self.seed}): {self.signal} at {self.moment} "
            f"+{self.delay:.3f} s"
        )


def plan(
    seed: int,
    trials: int,
    signals: tuple[str, ...] = SIGNALS,
    freeze: tuple[str, ...] | None = None,
) -> list[Trial]:
    """The trials of a seed. Every signal of `freeze` (default: every signal) meets the freeze
    window first, whatever the seed; the rest are random among `signals`."""
    rng = random.Random(seed)
    first = signals if freeze is None else freeze
    out = []
    for i in range(trials):
        if i < len(first):
            sig, moment = first[i], "freeze"
        else:
            sig = rng.choice(signals)
            moment = rng.choices(list(MOMENTS), weights=list(MOMENTS.values()))[0]
        delay = {
            "start": rng.uniform(0, 1.5),
            "setup": rng.uniform(0, 0.8),
            "mount": rng.uniform(0, 0.05),
            "fio": rng.uniform(0, 0.3),
            "freeze": 0.0,
            "any": rng.uniform(0, 12),
        }[moment]
        out.append(Trial(i, seed, sig, moment, delay))
    return out


@dataclass
class Outcome:
    trial: Trial
    problems: list[str] = field(default_factory=list)
    exit_code: int | None = None
    reached: bool = False  # the moment was reached while fsbench still ran
    seconds: float = 0.0
    cleanup_output: str = ""

    @property
    def clean(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        head = (
            f"{self.trial.describe()}: exit {self.exit_code}, "
            f"{'moment reached' if self.reached else 'run ended first'}, {self.seconds:.1f} s"
        )
        if self.clean:
            return head + ": nothing left behind"
        return head + "\n    " + "\n    ".join(self.problems)


def _record(state_dir: Path) -> dict | None:
    for p in state_dir.glob("*.json"):
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            continue  # being replaced
    return None


def _record_from_results(out_dir: Path, state_dir: Path) -> dict | None:
    """A run that began and ended between two looks still names itself in results.json."""
    try:
        run_id = json.loads((out_dir / "results.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None
    return {"run_id": run_id, "pid": 0, "path": str(state_dir / f"{run_id}.json")}


def _children(pid: int) -> list[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    kids = []
    for t in tasks:
        try:
            kids += [int(k) for k in (t / "children").read_text().split()]
        except OSError:
            continue
    return kids


def _child_running(pid: int, names: tuple[str, ...], mount_dir: str) -> bool:
    """A child of fsbench, named one of `names`, working on the run's mounts."""
    for kid in _children(pid):
        args = cmdline(kid)
        if args and Path(args[0]).name in names and any(mount_dir in a for a in args):
            return True
    return False


def _freezing(rec_path: Path, pid: int, mount_dir: str) -> bool:
    """Inside the freeze window: the record names a frozen mount (recorded before the freeze)
    or, in versions that freeze through the tool, fsfreeze runs."""
    if _child_running(pid, ("fsfreeze",), mount_dir):
        return True
    try:
        return bool(json.loads(rec_path.read_text()).get("frozen"))
    except (OSError, ValueError):
        return False


def _wait_moment(
    proc: subprocess.Popen, trial: Trial, state_dir: Path, deadline: float
) -> dict | None:
    """Wait for the trial's moment; returns the state record once seen (None if never)."""
    rec = None
    while proc.poll() is None and time.monotonic() < deadline:
        rec = rec or _record(state_dir)
        if trial.moment in ("start", "any"):
            return rec
        if rec is not None:
            pid, mount_dir = rec["pid"], rec["mount_dir"]
            if trial.moment == "setup":
                return rec
            if trial.moment == "mount" and _child_running(
                pid, ("mount", "umount", "ntfs-3g", "passthrough_hp"), mount_dir
            ):
                return rec
            if trial.moment == "fio" and _child_running(pid, ("fio",), mount_dir):
                return rec
            if trial.moment == "freeze" and _freezing(Path(rec["path"]), pid, mount_dir):
                return rec
        time.sleep(0.0005 if trial.moment in ("freeze", "mount") else 0.01)
    return rec


def _send(proc: subprocess.Popen, trial: Trial, rec: dict | None) -> None:
    sig = signal.Signals[trial.signal]
    try:
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C: uv, fsbench, fio, mount tools all get it
        elif sig == signal.SIGTERM:
            os.kill(proc.pid, sig)  # `kill`: the process started; uv forwards it
        elif rec is not None and alive(rec["pid"]):
            os.kill(rec["pid"], sig)  # fsbench itself: nothing of it runs after this
        else:
            os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def run_trial(
    trial: Trial, work: Path, compare: list[str] = COMPARE, settle: float = 2.0
) -> Outcome:
    """One trial in `work` (its own out dir, db and state dir); releases what it finds left
    so the next trial and other runs on the machine start clean. `settle`: seconds the system
    may take to let go after the run (0: read at once, as `fsbench cleanup` returns)."""
    out = Outcome(trial)
    state_dir = work / "state"
    out_dir = work / "out"
    env = {**os.environ, "FSBENCH_STATE_DIR": str(state_dir)}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        fsbench_argv(*compare, "--out", str(out_dir), "--db", str(work / "results.db")),
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    rec = None
    try:
        deadline = t0 + (3.0 if trial.moment == "start" else 60.0)
        rec = _wait_moment(proc, trial, state_dir, deadline)
        out.reached = proc.poll() is None
        if trial.delay:
            time.sleep(trial.delay)
        rec = rec or _record(state_dir)
        if proc.poll() is None:
            _send(proc, trial, rec)
        try:
            _, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            out.problems.append("fsbench did not exit within 90 s of the signal")
        out.exit_code = proc.returncode
        rec = rec or _record(state_dir)
        if trial.signal == "SIGKILL" and rec is not None:
            wait_until(lambda: not alive(rec["pid"]), 10)
            res = subprocess.run(
                fsbench_argv("cleanup"),
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            out.cleanup_output = res.stdout.strip()
            if res.returncode != 0 or "Traceback" in res.stderr:
                out.problems.append(f"fsbench cleanup failed ({res.returncode}): {res.stderr}")
        out.problems += _check_exit(trial, out.exit_code, err, out_dir)
        rec = rec or _record_from_results(out_dir, state_dir)
        if rec is not None:
            dirs = RunDirs.of(rec["run_id"], state_dir)
            # A lazily unmounted file system may take a moment to let go of its loop.
            if settle:
                wait_until(lambda: not leftovers_anywhere(dirs), settle, interval=0.1)
            for what, items in leftovers_anywhere(dirs).items():
                out.problems.append(f"left behind: {what}: {'; '.join(items)}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rec = rec or _record(state_dir)
        if rec is not None:
            rescue(RunDirs.of(rec["run_id"], state_dir), state_dir)
        out.seconds = time.monotonic() - t0
    return out


def _check_exit(trial: Trial, code: int | None, err: str, out_dir: Path) -> list[str]:
    problems = []
    # A Ctrl-C during the interpreter's own start-up (site, encodings: no fsbench frame yet)
    # prints Python's traceback before any fsbench code can run; from fsbench's first line on
    # it must not.
    if "Traceback" in err and (trial.signal != "SIGINT" or "fsbench" in err.split("Traceback")[1]):
        problems.append("a traceback on stderr: " + err.strip()[-1500:])
    results = out_dir / "results.json"
    if trial.signal == "SIGKILL":
        ok = (0, 1, -9, 137)
    elif out_dir.exists():
        ok = (0, 1, EXIT_INTERRUPTED)  # the run had begun: it ends by writing results.json
    else:  # before the run began: nothing to write
        ok = (EXIT_INTERRUPTED, -signal.SIGTERM, 128 + signal.SIGTERM)
    if code not in ok:
        problems.append(f"exit code {code} after {trial.signal}; stderr: {err.strip()[-500:]}")
    if code in (0, 1, EXIT_INTERRUPTED) and out_dir.exists():
        if not results.exists():
            problems.append(f"exit {code} but no results.json written")
        elif code == EXIT_INTERRUPTED:
            data = json.loads(results.read_text())
            if data.get("status") != "incomplete":
                problems.append(f"interrupted run's results.json says {data.get('status')}")
    return problems


def rescue(dirs: RunDirs, state_dir: Path) -> None:
    """Release what a trial left, without relying on the fsbench under test being right:
    thaw before unmounting, and free loops pinned by a superblock with no mount."""
    for m in reversed(mounts_under(dirs.mount_dir)):
        if not m.fstype.startswith("fuse"):
            subprocess.run(["fsfreeze", "--unfreeze", m.mountpoint], capture_output=True)
    release_leftovers(state_dir)
    for pid in processes_naming(dirs.mount_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for dev, _image in loops_backed_under(dirs.image_dir):
        where = tempfile.mkdtemp(prefix="chaos-rescue-")
        mounted = subprocess.run(["mount", dev, where], capture_output=True).returncode == 0
        if mounted:
            subprocess.run(["fsfreeze", "--unfreeze", where], capture_output=True)
            subprocess.run(["umount", where], capture_output=True)
        os.rmdir(where)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    for d in (dirs.image_dir, dirs.mount_dir):
        shutil.rmtree(d, ignore_errors=True)
    for p in state_dir.glob("*"):
        p.unlink(missing_ok=True)


def run_trials(
    seed: int,
    trials: int,
    work: Path,
    report=print,
    signals: tuple[str, ...] = SIGNALS,
    settle: float = 2.0,
    freeze: tuple[str, ...] | None = None,
) -> list[Outcome]:
    outcomes = []
    for trial in plan(seed, trials, signals, freeze):
        d = work / f"trial-{trial.index}"
        d.mkdir(parents=True, exist_ok=True)
        o = run_trial(trial, d, settle=settle)
        report(o.describe())
        outcomes.append(o)
        shutil.rmtree(d, ignore_errors=True)
    return outcomes


def summary(outcomes: list[Outcome], seed: int) -> str:
    clean = sum(o.clean for o in outcomes)
    return f"chaos: {clean}/{len(outcomes)} trials left nothing behind (seed {seed})"
