"""Reading /proc/self/mountinfo, mounting, unmounting and finding FUSE daemons."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from dataclasses import dataclass

from fsbench.errors import LabError
from fsbench.lab.system import run
from fsbench.probes import processes
from fsbench.probes.procfs import ProcFS


@dataclass(frozen=True)
class MountEntry:
    mount_id: int
    major_minor: str
    mountpoint: str
    mount_options: str  # per-mount options (rw,noatime)
    fstype: str
    source: str
    super_options: str  # per-superblock options (data=writeback, user_id=0)

    @property
    def effective_options(self) -> str:
        opts = [*self.mount_options.split(","), *self.super_options.split(",")]
        return ",".join(dict.fromkeys(o for o in opts if o))  # rw appears in both lists


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040).
    return field.encode().decode("unicode_escape") if "\\" in field else field


def parse_mountinfo(text: str) -> list[MountEntry]:
    entries = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        a = left.split()
        b = right.split()
        if len(a) < 6 or len(b) < 3:
            continue
        entries.append(
            MountEntry(int(a[0]), a[2], _unescape(a[4]), a[5], b[0], _unescape(b[1]), b[2])
        )
    return entries


def mountinfo(fs: ProcFS | None = None) -> list[MountEntry]:
    return parse_mountinfo((fs or ProcFS()).mountinfo())


def find_mount(mountpoint: str) -> MountEntry | None:
    found = [e for e in mountinfo() if e.mountpoint == mountpoint]
    return found[-1] if found else None  # the top of a stack of mounts is the last one


def _names_path(arg: bytes, path: bytes) -> bool:
    """Whether one argument names `path` or something under it: `/m/ntfs-3g` is named by
    `/m/ntfs-3g` and `--directory=/m/ntfs-3g/x`, not by `/m/ntfs-3g_big_writes`."""
    start = arg.find(path)
    while start >= 0:
        end = start + len(path)
        if end == len(arg) or arg[end : end + 1] == b"/":
            return True
        start = arg.find(path, start + 1)
    return False


def processes_mentioning(path: str) -> list[int]:
    """PIDs with an argument naming `path` or a path under it (our unique mount directory).

    Whole path components only: subjects `ntfs-3g` and `ntfs-3g:big_writes` have mount points
    where one is a prefix of the other, and each must find its own daemon.
    """
    pids = []
    me = os.getpid()
    needle = path.rstrip("/").encode()
    if not needle:
        return pids
    fs = ProcFS()
    for pid in fs.pids():
        if pid != me and any(_names_path(a, needle) for a in fs.cmdline(pid)):
            pids.append(pid)
    return pids


def processes_inside(path: str) -> list[int]:
    """PIDs whose working directory is `path` or below it: a user's command (and what it
    started) runs in the mount, names no path in its arguments, and keeps the mount busy."""
    pids = []
    me = os.getpid()
    root = path.rstrip("/")
    if not root:
        return pids
    fs = ProcFS()
    for pid in fs.pids():
        if pid == me:
            continue
        try:
            cwd = fs.readlink(f"proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            pids.append(pid)
    return pids


def fuse_connection(entry: MountEntry) -> str | None:
    """The /sys/fs/fuse/connections entry of a FUSE mount (named by the device minor)."""
    if not entry.fstype.startswith("fuse"):
        return None
    minor = entry.major_minor.split(":")[1]
    fs, rel = ProcFS(), f"sys/fs/fuse/connections/{minor}"
    return fs.path(rel) if fs.exists(rel) else None


def _abort_fuse(entry: MountEntry) -> None:
    # Aborting the connection frees a mount whose daemon no longer answers.
    if fuse_connection(entry):
        with contextlib.suppress(OSError):
            ProcFS().write(f"sys/fs/fuse/connections/{entry.major_minor.split(':')[1]}/abort", "1")


# linux/fs.h: _IOWR('X', 119, int) and _IOWR('X', 120, int).
FIFREEZE = 0xC0045877
FITHAW = 0xC0045878


def freeze(mountpoint: str) -> None:
    """Freeze a kernel file system (checkpoints its journal). The ioctl, not fsfreeze(8): no
    child process that a Ctrl-C to the process group could kill between freeze and thaw."""
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FIFREEZE, 0)
    finally:
        os.close(fd)


def thaw(mountpoint: str) -> bool:
    """Thaw a kernel file system: True when it was frozen (thawed now), False when it was not
    (EINVAL). OSError when it could not be thawed: it may still be frozen."""
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FITHAW, 0)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOTTY, errno.EOPNOTSUPP):
            return False
        raise
    finally:
        os.close(fd)
    return True


def try_thaw(mountpoint: str) -> str | None:
    """Thaw; None when the file system is not frozen now, else why it may still be."""
    try:
        thaw(mountpoint)
    except OSError as e:
        return f"cannot thaw {mountpoint}: {e.strerror}"
    return None


def unmount(mountpoint: str, daemon_pids: list[int], timeout: float = 30.0) -> list[str]:
    """Thaw, unmount and wait for the FUSE daemon to exit; escalate to abort, lazy unmount,
    kill.

    Every wait is bounded: a daemon that no longer answers (stopped, wedged) cannot hang the
    run. Returns notes about every escalation so a caller can flag a misbehaving driver. A
    kernel file system is thawed first and never unmounted lazily while it may be frozen: a
    frozen superblock without a mount pins its loop device and image until reboot.
    """
    notes: list[str] = []
    entry = find_mount(mountpoint)
    left = list(daemon_pids)  # not mounted: nothing to wait for, only daemons to stop
    if entry is not None:
        _unmount(mountpoint, entry, daemon_pids, timeout, notes)
        left = processes.wait_gone(daemon_pids, timeout=10.0)
        if left:
            notes.append(f"daemon {left} still running after unmount; killed")
    processes.stop(left)
    return notes


def _unmount(
    mountpoint: str, entry: MountEntry, daemon_pids: list[int], timeout: float, notes: list[str]
) -> None:
    """umount, retried until `timeout`, thawed and aborted as needed (unmount); escalations
    are appended to `notes`."""
    # FUSE cannot be frozen, and opening a mount whose daemon is gone would hang.
    kernel = not entry.fstype.startswith("fuse")
    frozen = try_thaw(mountpoint) if kernel else None
    if any(processes.stopped(p) for p in daemon_pids):
        notes.append(f"daemon {daemon_pids} was stopped; connection aborted")
        _abort_fuse(entry)
    deadline = time.monotonic() + timeout
    while True:
        try:
            left_s = max(1.0, deadline - time.monotonic())
            proc = run(["umount", mountpoint], timeout=min(10.0, left_s), check=False)
            why = proc.stderr.strip()
            done = proc.returncode == 0
        except LabError as e:  # umount itself hung on an unresponsive daemon
            done, why = False, str(e)
        if done or find_mount(mountpoint) is None:
            break
        if time.monotonic() > deadline:
            frozen = try_thaw(mountpoint) if kernel else None
            if frozen is not None:
                notes.append(
                    f"umount {mountpoint} kept failing ({why}) and it may still be frozen "
                    f"({frozen}); left mounted rather than unmounted lazily"
                )
                break
            notes.append(f"umount {mountpoint} kept failing ({why}); lazy unmount")
            _abort_fuse(entry)
            with contextlib.suppress(LabError):
                run(["umount", "-l", mountpoint], check=False, timeout=10)
            break
        time.sleep(0.2)


def mount(argv: list[str], mountpoint: str, timeout: float = 60.0) -> MountEntry:
    """Mount and confirm it in mountinfo; a tool that exits 0 without mounting is a failure."""
    proc = run(argv, timeout=timeout, check=False)
    entry = find_mount(mountpoint)
    if proc.returncode != 0 or entry is None:
        msg = (proc.stderr + "\n" + proc.stdout).strip()
        raise LabError(f"{' '.join(argv)} did not mount: {_one_line(msg)}")
    return entry


def _one_line(msg: str) -> str:
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    # FUSE drivers print a banner before the error; mount(8) a hint after it. Keep the lines
    # that say what went wrong.
    errs = [
        ln
        for ln in lines
        if any(w in ln.lower() for w in ("error", "fail", "unknown", "bad", "invalid", "not "))
    ]
    return " | ".join(errs[:2]) if errs else lines[-1]
