"""What a run created, written down before it is created, so `fsbench cleanup` can release it
after a SIGKILL — and only it: every resource is found by the run's own unique paths.

A record is /run/fsbench/<run_id>.json: {run_id, pid, image_dir, mount_dir, images, ...}.
Loop devices are found by their backing file under image_dir, mounts by their mount point under
mount_dir, FUSE daemons by a command line naming mount_dir. The lab's normal teardown calls the
same `release` as `fsbench cleanup`, so the two paths cannot drift apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fsbench.lab import loops, mounts
from fsbench.probes import trace

STATE_DIR = Path(os.environ.get("FSBENCH_STATE_DIR", "/run/fsbench"))


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

    @classmethod
    def load(cls, path: Path) -> StateRecord:
        data = json.loads(path.read_text())
        data["path"] = str(path)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _under(path: str, root: str) -> bool:
    return bool(path) and bool(root) and (path == root or path.startswith(root.rstrip("/") + "/"))


def release(rec: StateRecord) -> list[str]:
    """Unmount, stop daemons, detach loops, delete images of one record. Idempotent.

    Signals are held off meanwhile: a second Ctrl-C must not leave half a teardown.
    """
    notes: list[str] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with contextlib.suppress(ValueError):  # not the main thread: nothing to hold off
        for s in old:
            signal.signal(s, signal.SIG_IGN)
    try:
        for pid, start in rec.tracers:
            # Only that very process (pid and start time): a reused pid is someone else's.
            if trace.stop_process(pid, start):
                notes.append(f"stopped bpftrace {pid}")
        ours = [e for e in mounts.mountinfo() if _under(e.mountpoint, rec.mount_dir)]
        for entry in reversed(ours):  # innermost first
            daemons = mounts.processes_mentioning(entry.mountpoint)
            notes += mounts.unmount(entry.mountpoint, daemons, timeout=15)
            notes.append(f"unmounted {entry.mountpoint}")
        stray = mounts.processes_mentioning(rec.mount_dir) if rec.mount_dir else []
        if stray:
            mounts.kill_pids(stray)
            notes.append(f"killed daemons {stray}")
        recorded = {(d, b) for d, b in rec.loops}
        for dev, back in loops.list_loops():
            if _under(back, rec.image_dir) or (dev, back) in recorded:
                loops.detach(dev)
                notes.append(f"detached {dev}")
        for path, value in rec.restore.items():
            if path.startswith("/sys/module/"):  # only what a run may tune
                with contextlib.suppress(OSError):
                    Path(path).write_text(value)
                notes.append(f"restored {path} = {value}")
        for d in (rec.image_dir, rec.mount_dir):
            if d and Path(d).exists() and Path(d).name.startswith("fsbench-"):
                shutil.rmtree(d, ignore_errors=True)
                notes.append(f"removed {d}")
        if rec.path:
            Path(rec.path).unlink(missing_ok=True)
    finally:
        with contextlib.suppress(ValueError):
            for s, h in old.items():
                signal.signal(s, h)
    return notes


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


def process_start(pid: int) -> int:
    """Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat); 0 if
    it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_alive(rec: StateRecord) -> bool:
    """Whether the process that made the record still runs (the same process, not a reused
    PID), so its resources are in use and not ours to release."""
    if rec.pid == os.getpid() or not mounts.pid_running(rec.pid):
        return False
    if rec.pid_start:
        return process_start(rec.pid) == rec.pid_start
    try:  # records without a start time: the best remaining evidence is the command line
        return b"fsbench" in Path(f"/proc/{rec.pid}/cmdline").read_bytes()
    except OSError:
        return False


def cleanup_all(include_running: bool = False) -> tuple[list[str], list[str]]:
    """Release every record whose run is gone. Returns (notes, skipped run ids)."""
    notes, skipped = [], []
    for rec in records():
        if owner_alive(rec) and not include_running:
            skipped.append(rec.run_id)
            continue
        notes += [f"[{rec.run_id}] {n}" for n in release(rec)]
    return notes, skipped
