"""FUSE transports: how a daemon receives the kernel's requests, and whether this machine can.

- `dev-fuse`: the daemon reads requests from /dev/fuse and writes replies (every kernel, every
  libfuse): each request wakes a daemon thread and each reply the application.
- `uring`: FUSE over io_uring (Linux 6.14+, libfuse 3.18 built with liburing): per-CPU queues
  of requests in rings shared with the daemon. The kernel offers it only while
  /sys/module/fuse/parameters/enable_uring is on; a run holds it on and puts the old value back
  on every exit path (the state record's `restore`, as free page reporting's hold).
- `passthrough`: reads and writes go straight to a backing file in the kernel (Linux 6.9+,
  CONFIG_FUSE_PASSTHROUGH, libfuse 3.17+, a privileged daemon): they never reach the daemon,
  so they are no FUSE requests at all; opens, lookups and the like still are.

Availability is read through `ProcFS` (a canned tree in the unit tests).
"""

from __future__ import annotations

import gzip
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from fsbench.probes.procfs import ProcFS
from fsbench.records.choices import by_name

DEFAULT = "dev-fuse"
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
RING_WAIT_S = 5.0  # a daemon's rings appear within milliseconds of its mount here


@dataclass(frozen=True)
class Transport:
    name: str
    description: str
    min_kernel: tuple[int, int]
    kernel_config: str  # the option the kernel needs, when /proc/config.gz can tell
    min_libfuse: str
    root: bool = False  # the daemon needs CAP_SYS_ADMIN


TRANSPORTS: dict[str, Transport] = by_name(
    Transport(
        "dev-fuse",
        "requests read from and replies written to /dev/fuse",
        (2, 6),
        "CONFIG_FUSE_FS",
        "any",
    ),
    Transport(
        "uring",
        "FUSE over io_uring: per-CPU request queues shared with the daemon",
        (6, 14),
        "CONFIG_FUSE_IO_URING",
        "3.18 with liburing",
    ),
    Transport(
        "passthrough",
        "reads and writes go to a backing file in the kernel, never to the daemon",
        (6, 9),
        "CONFIG_FUSE_PASSTHROUGH",
        "3.17",
        root=True,
    ),
)


@dataclass(frozen=True)
class TransportStatus:
    available: bool
    reason: str = ""


def kernel_version(fs: ProcFS) -> tuple[int, int] | None:
    try:
        release = fs.read("proc/sys/kernel/osrelease").strip()
    except OSError:
        return None
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def kernel_config(fs: ProcFS) -> dict[str, str] | None:
    """The running kernel's build options from /proc/config.gz; None where it is absent."""
    try:
        with gzip.open(fs.path("proc/config.gz"), "rt") as f:
            text = f.read()
    except OSError:
        return None
    return dict(
        line.split("=", 1)
        for line in text.splitlines()
        if line.startswith("CONFIG_") and "=" in line
    )


def kernel_status(name: str, fs: ProcFS | None = None) -> TransportStatus:
    """Whether this kernel offers the transport (the daemon's side is libfuse's)."""
    fs = fs or ProcFS()
    t = TRANSPORTS[name]
    if not os.path.exists(fs.path("dev/fuse")):
        return TransportStatus(False, "/dev/fuse is missing; modprobe fuse")
    version = kernel_version(fs)
    shown = ".".join(map(str, version)) if version else "unknown"
    config = kernel_config(fs)
    if config is not None and config.get(t.kernel_config) not in ("y", "m"):
        return TransportStatus(False, f"this kernel ({shown}) is built without {t.kernel_config}")
    if name == "uring" and not os.path.exists(fs.path(ENABLE_URING)):
        why = "kernel too old" if version and version < t.min_kernel else "no FUSE io_uring"
        return TransportStatus(
            False,
            f"{ENABLE_URING} is missing ({why}: this kernel is {shown}; FUSE over io_uring "
            f"needs {t.min_kernel[0]}.{t.min_kernel[1]}+ built with {t.kernel_config})",
        )
    if config is None and version is not None and version < t.min_kernel:
        return TransportStatus(
            False,
            f"kernel too old: {shown}; {name} needs {t.min_kernel[0]}.{t.min_kernel[1]}+",
        )
    if t.root and os.geteuid() != 0:
        return TransportStatus(False, f"{name} needs a privileged daemon (CAP_SYS_ADMIN): root")
    return TransportStatus(True)


def uring_enabled(fs: ProcFS | None = None) -> bool | None:
    """The parameter's value now; None where the kernel has none."""
    fs = fs or ProcFS()
    try:
        return fs.read(ENABLE_URING).strip() in ("Y", "1")
    except OSError:
        return None


def subject_problem(spec) -> str:  # spec: lab.subject.SubjectSpec (no import cycle)
    """Why a subject cannot run with its transport here ("" when it can). A daemon from
    fsbench's libfuse build is built now if it is not yet (fuse/sourcebuild.py)."""
    driver, name = spec.driver, spec.transport
    if driver.kind != "fuse" or not name:
        return ""
    if driver.built is not None:
        from fsbench.fuse import sourcebuild
        from fsbench.fuse.libfuse import LIBFUSE

        try:
            sourcebuild.ensure(driver.built)
            build = sourcebuild.ensure(LIBFUSE)  # the library every built daemon links
        except sourcebuild.BuildFailed as e:
            return str(e)
        if name == "uring" and not build.extra.get("uring"):
            return f"libfuse {build.version} was built without liburing (see {build.log})"
    if name == DEFAULT:
        return ""
    status = kernel_status(name)
    return "" if status.available else status.reason


def _holds_rings(pid: int, proc: str) -> bool | None:
    try:
        fds = list(Path(proc, str(pid), "fd").iterdir())
    except OSError:
        return None  # gone: the mount's own checks say so
    for fd in fds:
        try:
            if os.readlink(fd) == "anon_inode:[io_uring]":
                return True
        except OSError:
            continue
    return False


def check_daemon(
    transport: str, pid: int | None, proc: str = "/proc", timeout: float = RING_WAIT_S
) -> str:
    """Why a mounted daemon is not using its transport ("" when it is, or cannot be told).
    libfuse falls back to /dev/fuse without a word when the kernel refuses io_uring (found
    here with enable_uring off), which would measure the wrong transport under the right name;
    a daemon on io_uring holds io_uring descriptors. They appear once the daemon has answered
    the kernel's INIT, a moment after the mount: polled until `timeout`."""
    if transport != "uring" or pid is None:
        return ""
    deadline = time.monotonic() + timeout
    while (held := _holds_rings(pid, proc)) is False and time.monotonic() < deadline:
        time.sleep(0.01)
    if held is not False:
        return ""
    return (
        f"the daemon (pid {pid}) holds no io_uring: libfuse fell back to /dev/fuse "
        f"({ENABLE_URING} is {'on' if uring_enabled() else 'off'})"
    )


def doctor_rows(fs: ProcFS | None = None) -> list[dict]:
    """Each transport as `fsbench doctor` lists it: available to the FUSE floor here, or why
    not (the kernel's side first, then fsbench's libfuse build); no network is asked."""
    from fsbench.fuse import sourcebuild
    from fsbench.fuse.libfuse import LIBFUSE

    build, build_why = None, ""
    try:
        build = sourcebuild.load(LIBFUSE)
    except sourcebuild.BuildFailed as e:
        build_why = str(e)
    if build is None and not build_why:
        failed = sourcebuild.last_failure(LIBFUSE)
        build_why = (
            f"libfuse 3.18 build failed: {failed['reason']} (log {failed['log']})"
            if failed
            else "libfuse 3.18 not built yet (built on first use by `fsbench compare "
            "passthrough_hp...`, or by scripts/setup.sh --test)"
        )
    rows = []
    for t in TRANSPORTS.values():
        status = kernel_status(t.name, fs)
        why = status.reason or build_why
        if not why and t.name == "uring" and build is not None and not build.extra.get("uring"):
            why = f"libfuse {build.version} was built without liburing (see {build.log})"
        rows.append(
            {
                "name": t.name,
                "description": t.description,
                "kernel": status.available,
                "available": not why,
                "reason": why or None,
                "libfuse": f"{build.version} ({build.dsc} sha256 {build.dsc_sha256[:12]})"
                if build
                else None,
                "enable_uring": uring_enabled(fs) if t.name == "uring" else None,
            }
        )
    return rows
