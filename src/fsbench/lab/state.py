"""What a run created, written down before it is created, so `fsbench cleanup` can release it
after a SIGKILL — and only it: every resource is found by the run's own unique paths.

A record is /run/fsbench/<run_id>.json: {run_id, pid, image_dir, mount_dir, images, ...}.
Loop devices are found by their backing file under image_dir, mounts by their mount point under
mount_dir, FUSE daemons by a command line naming mount_dir. The lab's normal teardown calls the
same `release` as `fsbench cleanup`, so the two paths cannot drift apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fsbench.errors import LabError
from fsbench.fuse import transports
from fsbench.lab import loops, mounts
from fsbench.lab.system import run
from fsbench.probes import processes
from fsbench.probes.procfs import ProcFS

STATE_DIR = Path(os.environ.get("FSBENCH_STATE_DIR", "/run/fsbench"))
OWNER_FILE = ".fsbench-record.json"  # a record's copy inside its own temporary directory
# Where every run's mount points live (fsbench-RUN_ID/ below it), whatever FSBENCH_STATE_DIR says.
MOUNT_BASE = Path("/run/fsbench")
# The settings a record may put back: a record is a file, and only these are a run's to tune.
TUNABLE: tuple[str, ...] = ("/sys/module/",)


@dataclass
class StateRecord:
    run_id: str
    pid: int
    image_dir: str  # a directory fsbench created and owns entirely
    mount_dir: str  # likewise, holds one mount point per subject
    devices: list[str] = field(default_factory=list)  # device: backings (never deleted)
    # Loops over real devices (not under image_dir), recorded right after attaching.
    loops: list[list[str]] = field(default_factory=list)
    # The owner's start time (clock ticks since boot): a PID alone may be reused.
    pid_start: int = 0
    # Kernel settings the run changed, with the values to put back: {sysfs path: value}.
    restore: dict[str, str] = field(default_factory=dict)
    # Mount points frozen for a cold-cache checkpoint, recorded before the freeze and cleared
    # after the thaw: a run killed in between leaves them frozen for `release` to thaw.
    frozen: list[str] = field(default_factory=list)
    # A VM (src/fsbench/vm): every process it starts carries FSBENCH_VM=<marker> in its
    # environment (recorded before the first is started), the group leader is [pid, start],
    # and its temporary paths (named fsbench-*) are removed.
    env_marker: str = ""
    processes: list[list[int]] = field(default_factory=list)
    temp_paths: list[str] = field(default_factory=list)
    # The run's bpftrace (kernel trace probes): [pid, start time]; stopped by `release`.
    tracers: list[list[int]] = field(default_factory=list)
    path: str = ""

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        target = Path(self.path or STATE_DIR / f"{self.run_id}.json")
        self.path = str(target)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, target)  # atomic: a SIGKILL never leaves half a record
        # A copy inside each temporary directory that exists: `cleanup` still finds the
        # directory, its owner and its processes when the state directory itself is gone
        # (a test's private FSBENCH_STATE_DIR, a reboot-cleared /run with /tmp kept).
        # The mount directory keeps one too: a run whose state directory is not cleanup's
        # (a killed test's private FSBENCH_STATE_DIR) still leaves mounts cleanup can find.
        for d in (*self.temp_paths, self.mount_dir):
            if d and Path(d).name.startswith("fsbench-") and Path(d).is_dir():
                copy = Path(d) / OWNER_FILE
                copy.with_suffix(".tmp").write_text(json.dumps(asdict(self)))
                os.replace(copy.with_suffix(".tmp"), copy)

    @classmethod
    def load(cls, path: Path) -> StateRecord:
        data = json.loads(path.read_text())
        data["path"] = str(path)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@contextlib.contextmanager
def _settings_lock() -> Iterator[None]:
    """Runs hold and restore kernel settings one at a time: two labs at once must agree on
    who puts a setting back."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / ".settings.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _holders(rec: StateRecord, path: str) -> list[StateRecord]:
    """Other runs, still running, that hold the setting and will put it back."""
    return [r for r in records() if r.run_id != rec.run_id and path in r.restore and owner_alive(r)]


def hold(rec: StateRecord, path: str, value: str, held: Callable[[str], bool]) -> str | None:
    """Set a kernel setting for the run, its old value recorded (and saved) before the change
    so `release`, or `cleanup` after a SIGKILL, puts it back. Returns the old value, or None
    when it is held already: by the user (left alone), or by another running fsbench, whose
    recorded original this run adopts — whichever run ends last restores it, so the first to
    end does not turn the setting back under the other's measurement."""
    with _settings_lock():
        old = ProcFS().read(path).strip()
        if held(old):
            for other in _holders(rec, path):
                rec.restore[path] = other.restore[path]
                rec.save()
                break
            return None
        rec.restore[path] = old
        rec.save()
        try:
            ProcFS().write(path, value)
        except OSError:
            rec.restore.pop(path, None)
            rec.save()
            raise
        return old


def hold_uring(rec: StateRecord) -> str | None:
    """Turn FUSE's enable_uring on for the run (`hold`: the old value saved in the run's record
    before the change, so `fsbench cleanup` puts it back after a SIGKILL). Returns what was
    done in words, or None when it was on already."""
    param = transports.ENABLE_URING
    old = hold(rec, param, "Y", lambda v: v in ("Y", "1"))
    if old is None:
        return None
    return f"FUSE over io_uring enabled for the run ({param} {old} -> Y, restored after)"


def _under(path: str, root: str) -> bool:
    return bool(path) and bool(root) and (path == root or path.startswith(root.rstrip("/") + "/"))


# How a note says a step failed (failures() finds them): the rest say what was done.
FAILED = "could not "


def failures(notes: list[str]) -> list[str]:
    return [n for n in notes if FAILED in n]


def release(rec: StateRecord) -> list[str]:
    """Unmount, stop daemons, detach loops, delete images of one record. Idempotent.

    Returns a note per step: what was done, or "could not …" and why (each checked, never
    assumed). When a step failed the record is kept, so the next `fsbench cleanup` tries it
    again. Signals are held off meanwhile: a second Ctrl-C must not leave half a teardown.
    """
    notes: list[str] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with contextlib.suppress(ValueError):  # not the main thread: nothing to hold off
        for s in old:
            signal.signal(s, signal.SIG_IGN)
    try:
        for pid, start in rec.tracers:
            # Only that very process (pid and start time): a reused pid is someone else's.
            if stop_recorded(pid, start):
                notes.append(f"stopped bpftrace {pid}")
        inside = mounts.processes_inside(rec.mount_dir) if rec.mount_dir else []
        # Never a daemon serving the mounts (it names its mount point): unmounting stops it.
        inside = [p for p in inside if p not in mounts.processes_mentioning(rec.mount_dir)]
        if inside:
            # A user's command (--command) left running by a killed fsbench: it works in the
            # mount and would keep it busy.
            processes.stop(inside)
            notes.append(f"stopped {len(inside)} process(es) working in the run's mounts")
        ours = [e for e in mounts.mountinfo() if _under(e.mountpoint, rec.mount_dir)]
        # Thaw before any unmount: a frozen file system unmounted keeps its superblock, loop
        # device and image alive until reboot. Every kernel mount of the run, not only those
        # recorded: thawing one that is not frozen is harmless (EINVAL).
        for entry in ours:
            if entry.fstype.startswith("fuse"):
                continue
            try:
                if mounts.thaw(entry.mountpoint):
                    notes.append(f"thawed {entry.mountpoint}")
            except OSError as e:
                notes.append(f"{FAILED}thaw {entry.mountpoint}: {e.strerror}")
        for entry in reversed(ours):  # innermost first
            daemons = mounts.processes_mentioning(entry.mountpoint)
            notes += mounts.unmount(entry.mountpoint, daemons, timeout=15)
            gone = mounts.find_mount(entry.mountpoint) is None
            notes.append(("" if gone else FAILED) + f"unmount{'ed' if gone else ''} "
                         f"{entry.mountpoint}")  # fmt: skip
        notes += _stop_strays(rec)
        killed = _kill_marked(rec)
        if killed:
            notes.append(f"killed VM processes {killed}")
        recorded = {(d, b) for d, b in rec.loops}
        for dev, back in loops.list_loops():
            if _under(back, rec.image_dir) or (dev, back) in recorded:
                # A subject's own queue settings first: the device keeps them after detach.
                notes += loops.restore_device(rec, dev)
                why = loops.detach(dev)
                notes.append(f"{FAILED}detach {dev}: {why}" if why else f"detached {dev}")
        if rec.restore:
            notes += _restore(rec)
        for d in (rec.image_dir, rec.mount_dir, *rec.temp_paths):
            if d and Path(d).exists() and Path(d).name.startswith("fsbench-"):
                notes.append(_remove(d))
        if rec.path and failures(notes):
            notes.append(f"kept the record {rec.path}: `fsbench cleanup` tries again")
        elif rec.path:
            Path(rec.path).unlink(missing_ok=True)
    finally:
        with contextlib.suppress(ValueError):
            for s, h in old.items():
                signal.signal(s, h)
    return notes


def _stop_strays(rec: StateRecord) -> list[str]:
    """Whatever still names the run's directories (a daemon whose mount was already gone, or
    one a killed run was starting on its image), stopped and waited for: `release` returns
    only once they are gone, and says so when one is not (the record is then kept)."""
    notes = []
    for d in (rec.mount_dir, rec.image_dir):
        stray = mounts.processes_mentioning(d) if d else []
        if not stray:
            continue
        left = processes.stop(stray)
        notes.append(f"killed daemons {stray}")
        if left:
            notes.append(f"{FAILED}stop {left}: still running after SIGKILL")
    return notes


def _restore(rec: StateRecord) -> list[str]:
    notes = []
    with _settings_lock():
        for path, value in list(rec.restore.items()):
            if not path.startswith(TUNABLE):  # only what a run may tune
                continue
            others = _holders(rec, path)
            if others:
                # Dropped from this record under the lock: the other run, ending later,
                # sees no holder left and restores.
                del rec.restore[path]
                if rec.path:
                    rec.save()
                notes.append(f"left {path} held for run {others[0].run_id}, still running")
                continue
            try:
                ProcFS().write(path, value)
                notes.append(f"restored {path} = {value}")
            except OSError as e:
                notes.append(f"{FAILED}restore {path} = {value}: {e.strerror or e}")
    return notes


def _remove(d: str) -> str:
    """Delete a directory of the run's; the note says whether it is gone."""
    try:
        shutil.rmtree(d)
    except FileNotFoundError:
        pass
    except OSError as e:
        return f"{FAILED}remove {d}: {e.strerror or e}"
    return f"{FAILED}remove {d}" if Path(d).exists() else f"removed {d}"


def _kill_marked(rec: StateRecord) -> list[int]:
    """Kill a VM's processes: by the environment marker they all inherit, and by the recorded
    process group (a member started after the leader, so a reused PID is never taken)."""
    if not rec.env_marker and not rec.processes:
        return []
    needle = f"FSBENCH_VM={rec.env_marker}".encode()
    groups = {pid: start for pid, start in rec.processes}
    found = []
    fs = ProcFS()
    for pid in fs.pids():
        if pid == os.getpid():
            continue
        hit = bool(rec.env_marker) and needle in fs.environ(pid)
        if not hit and groups:
            with contextlib.suppress(OSError, ProcessLookupError):
                pgid = os.getpgid(pid)
                hit = pgid in groups and processes.start_time(pid) >= groups[pgid]
        if hit:
            found.append(pid)
    if found:
        processes.stop(found, grace=10)
    return found


def records() -> list[StateRecord]:
    if not STATE_DIR.is_dir():
        return []
    out = []
    for p in sorted(STATE_DIR.glob("*.json")):
        try:
            out.append(StateRecord.load(p))
        except (OSError, ValueError, TypeError):
            continue
    return out


def stop_recorded(pid: int, start: int) -> bool:
    """Stop a recorded bpftrace (SIGINT: it detaches its probes; SIGKILL if it lingers), only
    if the pid still is that process (pid and start time: a reused pid is someone else's)."""
    if processes.start_time(pid) != start or not processes.running(pid):
        return False
    processes.stop([pid], (signal.SIGINT, signal.SIGKILL))
    return True


def owner_alive(rec: StateRecord) -> bool:
    """Whether the process that made the record still runs (the same process, not a reused
    PID), so its resources are in use and not ours to release."""
    if rec.pid == os.getpid() or not processes.running(rec.pid):
        return False
    if rec.pid_start:
        return processes.start_time(rec.pid) == rec.pid_start
    try:  # records without a start time: the best remaining evidence is the command line
        return any(b"fsbench" in a for a in processes.cmdline(rec.pid))
    except OSError:
        return False


def cleanup_all(include_running: bool = False) -> tuple[list[str], list[str]]:
    """Release every record whose run is gone, then what no record names any more (orphans).
    Returns (notes, skipped run ids)."""
    notes, skipped, live = [], [], set()
    for rec in records():
        if owner_alive(rec) and not include_running:
            skipped.append(rec.run_id)
            live.add(rec.image_dir)
            continue
        notes += [f"[{rec.run_id}] {n}" for n in release(rec)]
    for rec in orphan_temp_records() + orphan_mount_records():
        if owner_alive(rec) and not include_running:
            # A live run whose record is in another state directory (FSBENCH_STATE_DIR):
            # not this cleanup's to name, nor to touch.
            continue
        notes += [f"[{rec.run_id}] {n}" for n in release(rec)]
    notes += release_orphans(live)
    return notes, skipped


def _copies(base: Path, named: set[str]) -> Iterator[tuple[Path, StateRecord]]:
    """Each directory named fsbench-* directly in `base` that no record names, with the record
    copy it keeps (OWNER_FILE). A directory without a readable copy is never touched: its owner
    may be between creating it and writing the copy."""
    for d in sorted(base.glob("fsbench-*")):
        copy = d / OWNER_FILE
        if str(d) in named or d.is_symlink() or not copy.is_file():
            continue
        try:
            yield d, StateRecord.load(copy)
        except (OSError, ValueError, TypeError):
            continue


def orphan_temp_records(root: Path | None = None) -> list[StateRecord]:
    """Records of temporary directories whose state record is gone, read from the copy each
    keeps. Only a directory directly in the temporary directory whose copy names that very
    directory; release() may then remove only it, and kill only the processes carrying the
    marker and group it names."""
    base = root or Path(tempfile.gettempdir())
    out = []
    named = {str(Path(p)) for r in records() for p in r.temp_paths}
    for d, rec in _copies(base, named):
        if str(d) not in rec.temp_paths:
            continue  # a copy moved or forged: it does not describe this directory
        # What is released is this directory (and the copy with it), nothing else on disk:
        # its images and mounts, if any, live under paths only the original record names.
        rec.temp_paths, rec.image_dir, rec.mount_dir, rec.loops = [str(d)], "", "", []
        rec.restore, rec.frozen, rec.path = {}, [], ""
        out.append(rec)
    return out


def orphan_mount_records(base: Path | None = None) -> list[StateRecord]:
    """Whole records of runs whose record file is not in this cleanup's state directory, read
    from the copy each run keeps in its own mount directory (MOUNT_BASE/fsbench-RUN_ID). Only a
    copy that names that very directory as its mount directory: `release` then does everything
    the original record would have."""
    out = []
    for d, rec in _copies(base or MOUNT_BASE, {str(Path(r.mount_dir)) for r in records()}):
        if rec.mount_dir != str(d):
            continue  # a copy moved or forged: it does not describe this directory
        rec.path = ""  # the original file, if any, is another state directory's to remove
        out.append(rec)
    return out


def orphan_loops(live_dirs: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(/dev/loopN, image) of loop devices a dead run left over its deleted image.

    Only a loop whose backing file was deleted, named *.img in a directory named fsbench-*
    that no longer exists (the run's own image directory, removed by its teardown), and that
    nothing mounts in any namespace or holds open. The usual cause is a file system unmounted
    while frozen: its superblock lives on with no mount and pins the loop and the image.
    """
    found = []
    for loop, text in ProcFS().loop_backing_files().items():
        if not text.endswith(" (deleted)"):
            continue
        image = Path(text.removesuffix(" (deleted)"))
        if (
            image.suffix != ".img"
            or not image.parent.name.startswith("fsbench-")
            or str(image.parent) in live_dirs
            or image.parent.exists()
        ):
            continue
        dev = "/dev/" + loop
        if _mounted_anywhere(dev) or _held_open(dev):
            continue
        found.append((dev, str(image)))
    return found


def _mounted_anywhere(dev: str) -> bool:
    """Whether any mount namespace mounts the device (by device number, as mountinfo says)."""
    try:
        rdev = os.stat(dev).st_rdev
    except OSError:
        return False
    number = f"{os.major(rdev)}:{os.minor(rdev)}"
    seen: set[str] = set()
    fs = ProcFS()
    for pid in fs.pids():
        try:
            ns = fs.readlink(f"proc/{pid}/ns/mnt")
            if ns in seen:
                continue
            seen.add(ns)
            text = fs.mountinfo(pid)
        except OSError:
            continue
        if any(line.split()[2:3] == [number] for line in text.splitlines()):
            return True
    return False


def _held_open(dev: str) -> bool:
    fs = ProcFS()
    for fd in fs.glob("proc/[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if fs.readlink(fd) == dev:
                return True
    return False


def release_orphans(live_dirs: set[str] = frozenset()) -> list[str]:
    """Release orphan loops (see orphan_loops): mount the file system again in a private
    directory, thaw it, unmount it, detach the loop. Returns what was done, in words."""
    notes = []
    for dev, image in orphan_loops(live_dirs):
        what = []
        fstype = run(["blkid", "-o", "value", "-s", "TYPE", dev], check=False).stdout.strip()
        if fstype in ProcFS().filesystems(nodev=False):
            # Mounting it again gives back its live superblock, which can then be thawed.
            where = tempfile.mkdtemp(prefix="fsbench-orphan-")
            try:
                if run(["mount", "-t", fstype, dev, where], check=False, timeout=60).returncode:
                    what.append(f"{FAILED}mount its {fstype} file system again")
                else:
                    try:
                        if mounts.thaw(where):
                            what.append(f"thawed its frozen {fstype} file system")
                    except OSError as e:
                        what.append(f"{FAILED}thaw its {fstype} file system ({e.strerror})")
                    proc = run(["umount", where], check=False, timeout=60)
                    what.append("unmounted it" if proc.returncode == 0 else f"{FAILED}unmount")
            except LabError as e:
                what.append(str(e))
            finally:
                with contextlib.suppress(OSError):
                    os.rmdir(where)
        why = loops.detach(dev)
        what.append(f"{FAILED}detach: {why}" if why else "detached")
        notes.append(f"[orphan] {dev} over deleted {image}: {', '.join(what)}")
    return notes
