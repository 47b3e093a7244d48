"""Integration tests: real loop devices, real mounts, real FUSE daemons.

Tests that need root carry `@pytest.mark.root`; the autouse fixture below skips them, with the
reason, when this process is not root or the machine lacks /dev/loop-control or /dev/fuse.

Every check of "what is left behind" here reads the system directly (/sys/block/loop*,
/proc/self/mountinfo, /proc/*/cmdline), never through fsbench's own helpers, so a bug in those
helpers cannot hide itself. Other fsbench runs may be going on at the same time on this machine,
so every check is scoped to one run's own directories, and state records of runs started by the
tests go to a private state directory (never the shared /run/fsbench/*.json).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import fixedpaths
from fsbench.fuse import transports
from fsbench.lab import state
from fsbench.lab.cold import in_memory
from fsbench.lab.drivers import DRIVERS, availability
from polling import wait_until

REPO = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


# -- skipping ----------------------------------------------------------------------------------
def results_of(doc: dict, subject: str, workload: str) -> list[dict]:
    """A results.json's results of one subject and workload (at least one)."""
    found = [r for r in doc["results"] if r["subject"] == subject and r["workload"] == workload]
    assert found, f"no {workload} result for {subject}"
    return found


def asks_cold(result: dict) -> bool:
    """A result whose samples the runner was to make cold (the seq-read the brief names)."""
    return result["params"].get("cache", "cold") == "cold"


def root_problem() -> str | None:
    """Why root-only tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: formats images, attaches loop devices and mounts them"
    if not os.path.exists("/dev/loop-control"):
        return "/dev/loop-control is missing: no loop device support (modprobe loop)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing: no FUSE support (modprobe fuse)"
    return None


@pytest.fixture(autouse=True)
def _skip_without_root(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("root")
    if marker is not None:
        problem = root_problem()
        if problem:
            why = marker.kwargs.get("why")
            pytest.skip(f"{problem}; {why}" if why else problem)


def need_drivers(*names: str) -> None:
    """Skip unless every named driver can really mount here (and fio exists)."""
    for name in names:
        av = availability(DRIVERS[name])
        if not av.available:
            pytest.skip(f"driver {name} not available: {av.reason}")
    if shutil.which("fio") is None:
        pytest.skip("fio not installed")


# -- a run's own resources, read straight from the system ------------------------------------
def loops_backed_under(directory: str) -> list[tuple[str, str]]:
    """(/dev/loopN, backing file) of attached loop devices whose image lies under directory."""
    found = []
    prefix = directory.rstrip("/") + "/"
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue  # detached meanwhile
        if path.startswith(prefix):
            found.append(("/dev/" + backing.parts[3], path))
    return found


def loop_backing(device: str) -> str | None:
    try:
        text = Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text()
    except OSError:
        return None
    return text.strip().removesuffix(" (deleted)")


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    options: str  # per-mount options, then per-superblock options
    fstype: str
    source: str


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def system_mounts() -> list[Mount]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        a, b = left.split(), right.split()
        out.append(Mount(_unescape(a[4]), a[5] + "," + b[2], b[0], _unescape(b[1])))
    return out


def mounts_under(directory: str) -> list[Mount]:
    d = directory.rstrip("/")
    return [m for m in system_mounts() if m.mountpoint == d or m.mountpoint.startswith(d + "/")]


def mount_at(mountpoint: str) -> Mount | None:
    found = [m for m in system_mounts() if m.mountpoint == mountpoint]
    return found[-1] if found else None


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def processes_naming(directory: str) -> list[int]:
    """Live processes with an argument that is `directory` or a path under it."""
    d = directory.rstrip("/")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if any(a == d or (d + "/") in a for a in cmdline(pid)) and alive(pid):
            pids.append(pid)
    return pids


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass(frozen=True)
class RunDirs:
    run_id: str
    image_dir: str
    mount_dir: str
    record: str  # the state record's path

    @classmethod
    def of(cls, run_id: str, state_dir: Path) -> RunDirs:
        return cls(
            run_id,
            f"/dev/shm/fsbench-{run_id}",
            f"/run/fsbench/fsbench-{run_id}",
            str(state_dir / f"{run_id}.json"),
        )

    def leftovers(self) -> dict[str, object]:
        """Everything of this run still present; empty when it was released completely."""
        found: dict[str, object] = {
            "loops": loops_backed_under(self.image_dir),
            "mounts": mounts_under(self.mount_dir),
            "processes": sorted(
                set(processes_naming(self.mount_dir)) | set(processes_naming(self.image_dir))
            ),
            "image_dir": os.path.exists(self.image_dir),
            "mount_dir": os.path.exists(self.mount_dir),
            "record": os.path.exists(self.record),
        }
        return {k: v for k, v in found.items() if v}

    def assert_released(self) -> None:
        left = self.leftovers()
        assert left == {}, f"run {self.run_id} left behind: {left}"


# -- fixtures ------------------------------------------------------------------------------
@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state directory, for this process (STATE_DIR is read at import, so patch the
    module) and for fsbench subprocesses (FSBENCH_STATE_DIR)."""
    d = tmp_path / "state"
    monkeypatch.setattr(state, "STATE_DIR", d)
    monkeypatch.setenv("FSBENCH_STATE_DIR", str(d))
    return d


# Where file: backing goes when the session's temporary directory is memory (a RAM-backed
# image would measure nothing of a disk): each test its own directory, made and removed here.
DISK_FALLBACK = "/var/tmp"  # fixed-path-ok: a unique directory under it (disk_dir), never read


@pytest.fixture
def disk_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory of this test's own on a disk: a tmp_path when the session's temporary
    directory is on one, else a unique directory under /var/tmp, removed after the test."""
    holder = tmp_path_factory.mktemp("on-disk", numbered=True)
    if not in_memory(str(holder)):
        yield holder
        return
    own = Path(tempfile.mkdtemp(prefix="fsbench-test-", dir=DISK_FALLBACK))
    fixedpaths.own(own)
    try:
        yield own
    finally:
        shutil.rmtree(own, ignore_errors=True)


@pytest.fixture
def run_id() -> str:
    return f"itest-{os.getpid()}-{secrets.token_hex(3)}"


@pytest.fixture
def dirs(run_id: str, state_dir: Path) -> Iterator[RunDirs]:
    """The resources of an in-process Lab run; whatever a failing test leaves is released."""
    d = RunDirs.of(run_id, state_dir)
    yield d
    if d.leftovers():
        state.release(state.StateRecord(run_id, 0, d.image_dir, d.mount_dir, path=d.record))


def fsbench_argv(*args: str) -> list[str]:
    return ["uv", "run", "--quiet", "fsbench", *args]


def fsbench(*args: str, timeout: float = 180, **kw) -> subprocess.CompletedProcess:
    """Run the real command line (`uv run fsbench ...`) from the repository."""
    return subprocess.run(
        fsbench_argv(*args),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kw,
    )


def read_record(state_dir: Path, timeout: float = 60) -> dict:
    """The state record a fsbench subprocess writes before it creates anything."""
    assert wait_until(lambda: any(state_dir.glob("*.json")), timeout), "no state record written"
    return json.loads(next(state_dir.glob("*.json")).read_text())


def release_leftovers(state_dir: Path) -> None:
    """Last resort after a failed test: release every run recorded in the private state dir."""
    for p in state_dir.glob("*.json"):
        try:
            rec = state.StateRecord.load(p)
        except (OSError, ValueError, TypeError):
            continue
        if alive(rec.pid):
            os.kill(rec.pid, signal.SIGKILL)
            wait_until(lambda rec=rec: not alive(rec.pid), 10)
        state.release(rec)


# -- run the command line, then prove it left nothing --------------------------------------------
@dataclass
class Ran:
    """A finished fsbench process: its output and its results.json."""

    proc: subprocess.Popen
    stdout: str = ""
    stderr: str = ""
    doc: dict = field(default_factory=dict)


@contextmanager
def fsbench_run(
    state_dir: Path, out: Path, *args: str, returncode: int = 0, timeout: float = 300
) -> Iterator[Ran]:
    """`fsbench ARGS --out OUT` started; the body may act on the running process (kill its
    daemon, send a signal). On leaving: the process ended with `returncode`, results.json
    loaded, and nothing of the run left anywhere. What the run left is read *before* the
    last-resort release, so a leak fails the test instead of being cleaned up unseen; the
    release still runs on every path, so a failing test leaks nothing either."""
    proc = subprocess.Popen(
        fsbench_argv(*args, "--out", str(out)),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "FSBENCH_STATE_DIR": str(state_dir)},
    )
    ran = Ran(proc)
    left: dict[str, object] = {}
    try:
        yield ran
        ran.stdout, ran.stderr = proc.communicate(timeout=timeout)
        results = out / "results.json"
        if results.exists():
            ran.doc = json.loads(results.read_text())
            left = RunDirs.of(ran.doc["run_id"], state_dir).leftovers()
        stale = sorted(p.name for p in state_dir.glob("*.json"))
        if stale:
            left["state records"] = stale
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        release_leftovers(state_dir)
    assert proc.returncode == returncode, ran.stderr[-3000:]
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert ran.doc, f"no results.json in {out}"
    assert left == {}, f"run {ran.doc['run_id']} left behind: {left}"


def fsbench_released(
    state_dir: Path, out: Path, *args: str, returncode: int = 0, timeout: float = 300
) -> Ran:
    """`fsbench ARGS --out OUT` run to its end; see `fsbench_run` for what is checked."""
    with fsbench_run(state_dir, out, *args, returncode=returncode, timeout=timeout) as ran:
        pass
    return ran


def execute_released(plan: Any, state_dir: Path) -> tuple[Any, int]:
    """`pipeline.execute(plan)` in this process (a test that patches the lab), with the same
    proof as `fsbench_run`: what the run left is read before the last-resort release."""
    from fsbench.pipeline import execute

    try:
        run, code = execute(plan)
        left = RunDirs.of(run.run_id, state_dir).leftovers()
    finally:
        release_leftovers(state_dir)
    assert left == {}, f"run {run.run_id} left behind: {left}"
    return run, code


# -- what a run may leave anywhere on the system: a list other moving parts extend ------------
# Each check reads the system directly and returns what of one run it finds, in words. A new
# kind of resource (a qemu guest, a trace session, a fio server) adds its check here with
# @leftover_check, and the chaos test and every caller of `leftovers_anywhere` cover it.
LeftoverCheck = Callable[[RunDirs], list[str]]
LEFTOVER_CHECKS: dict[str, LeftoverCheck] = {}


def leftover_check(name: str) -> Callable[[LeftoverCheck], LeftoverCheck]:
    def register(fn: LeftoverCheck) -> LeftoverCheck:
        LEFTOVER_CHECKS[name] = fn
        return fn

    return register


def leftovers_anywhere(dirs: RunDirs) -> dict[str, list[str]]:
    """Every check's findings for one run; empty when nothing of it is left anywhere."""
    found = {name: check(dirs) for name, check in LEFTOVER_CHECKS.items()}
    return {k: v for k, v in found.items() if v}


def loops_of_run(dirs: RunDirs) -> dict[str, str]:
    """{loopN: backing file} of loops over the run's images, deleted or not."""
    return {Path(dev).name: back for dev, back in loops_backed_under(dirs.image_dir)}


def mount_namespaces() -> dict[str, int]:
    """{mount namespace: one PID in it} over every process."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.setdefault(os.readlink(entry / "ns" / "mnt"), int(entry.name))
            except OSError:
                continue
    return found


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@leftover_check("loop devices")
def _loops(dirs: RunDirs) -> list[str]:
    return [f"/dev/{n} over {b}" for n, b in sorted(loops_of_run(dirs).items())]


@leftover_check("mounts in any namespace")
def _mounts_any_ns(dirs: RunDirs) -> list[str]:
    devs = {f"/dev/{n}" for n in loops_of_run(dirs)}
    found = []
    for ns, pid in mount_namespaces().items():
        try:
            text = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            left, _, right = line.partition(" - ")
            a, b = left.split(), right.split()
            mp, src = _unescape(a[4]), _unescape(b[1]) if len(b) > 1 else ""
            if _within(mp, dirs.mount_dir) or _within(src, dirs.image_dir) or src in devs:
                found.append(f"{b[0]} {src} on {mp} ({ns})")
    return found


# Where the kernel lists a live superblock by device name, mounted or not.
SUPERBLOCK_DIRS = ("/proc/fs/ext4", "/proc/fs/jbd2", "/sys/fs/xfs", "/sys/fs/f2fs", "/sys/fs/ext4")


@leftover_check("superblocks")
def _superblocks(dirs: RunDirs) -> list[str]:
    names = set(loops_of_run(dirs))
    found = []
    for d in SUPERBLOCK_DIRS:
        for entry in Path(d).glob("loop*"):
            # jbd2 names its journals loop0-8.
            if entry.name.split("-")[0] in names:
                found.append(str(entry))
    for dev in Path("/sys/fs/btrfs").glob("*/devices/loop*"):
        if dev.name in names:
            found.append(str(dev))
    return found


@leftover_check("processes")
def _processes(dirs: RunDirs) -> list[str]:
    """Anything whose command line names the run's directories or its id: FUSE daemons, fio,
    and whatever else a run starts (trace sessions, guests, fio servers)."""
    needles = [dirs.image_dir, dirs.mount_dir, dirs.run_id]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        args = cmdline(int(entry.name))
        if any(n in a for a in args for n in needles) and alive(int(entry.name)):
            found.append(f"{entry.name}: {' '.join(args)[:200]}")
    return found


@leftover_check("processes working in the mounts")
def _working_inside(dirs: RunDirs) -> list[str]:
    """A user's command (--command) names no path: it is found by its working directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (cwd + "/").startswith(dirs.mount_dir + "/") and alive(int(entry.name)):
            found.append(f"{entry.name} in {cwd}: {' '.join(cmdline(int(entry.name)))[:200]}")
    return found


@leftover_check("files")
def _files(dirs: RunDirs) -> list[str]:
    paths = [dirs.image_dir, dirs.mount_dir, dirs.record, dirs.record.removesuffix("json") + "tmp"]
    return [p for p in paths if os.path.exists(p)]


@leftover_check("network namespaces")
def _netns(dirs: RunDirs) -> list[str]:
    return sorted(p.name for p in Path("/run/netns").glob("fsbench-*") if dirs.run_id in p.name)


# The machine's FUSE io_uring switch as the suite found it: a run holds it on only while it
# lasts (fuse/transports.py) and every exit path puts it back, `fsbench cleanup` included.
URING_AT_START = transports.uring_enabled()


@leftover_check("kernel settings")
def _kernel_settings(dirs: RunDirs) -> list[str]:
    now = transports.uring_enabled()
    if now == URING_AT_START:
        return []
    return [f"{transports.ENABLE_URING} is {'on' if now else 'off'}, was not before the run"]
