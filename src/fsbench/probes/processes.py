"""Processes: identity (pid + start time), state, and stopping them with grace.

The one place for these, used by the lab (daemons, VM processes, state records), the trace
session (bpftrace) and the workloads (fio clients). /proc is read through `ProcFS` only, and
/proc/PID/stat is parsed by `procfs.parse_pid_stat` only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from fsbench.probes.procfs import PidStat, ProcFS

_FS = ProcFS()
POLL_S = 0.02


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on (a cpuset or taskset can narrow the machine's)."""
    return sorted(os.sched_getaffinity(0))


def stat(pid: int, fs: ProcFS = _FS) -> PidStat | None:
    """/proc/PID/stat, or None once the process is gone."""
    try:
        return fs.pid_stat(pid)
    except (OSError, ValueError):
        return None


def start_time(pid: int, fs: ProcFS = _FS) -> int:
    """Start of a process in clock ticks since boot; with the pid, it names one process (a
    pid alone may have been reused). 0 if it is gone."""
    st = stat(pid, fs)
    return st.starttime if st else 0


def running(pid: int, fs: ProcFS = _FS) -> bool:
    """The process exists and is not a zombie (a zombie has let go of its files and mounts)."""
    st = stat(pid, fs)
    return st is not None and st.state != "Z"


def stopped(pid: int, fs: ProcFS = _FS) -> bool:
    """Stopped (SIGSTOP) or traced: a FUSE daemon in this state answers no request."""
    st = stat(pid, fs)
    return st is not None and st.state in ("T", "t")


def group_alive(pgid: int, fs: ProcFS = _FS) -> bool:
    """Whether any process of the group still runs (a zombie does not count: it holds no file
    and no mount busy)."""
    for pid in fs.pids():
        st = stat(pid, fs)
        if st is not None and st.pgrp == pgid and st.state not in ("Z", "X"):
            return True
    return False


def cmdline(pid: int, fs: ProcFS = _FS) -> list[bytes]:
    """The arguments of a process; empty once it is gone (or for a kernel thread)."""
    try:
        return fs.read_bytes(f"proc/{pid}/cmdline").split(b"\0")
    except OSError:
        return []


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until every pid has exited (zombies count as gone); those still running."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = [p for p in alive if running(p)]
    return alive


def stop(
    pids: list[int],
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL),
    grace: float = 5.0,
) -> list[int]:
    """Each signal in turn to the processes still running, `grace` seconds for them to go
    after each; the pids that never ran or went, in order, are dropped. Returns the pids
    still running after the last signal (none after SIGKILL, unless in uninterruptible
    sleep)."""
    alive = [p for p in pids if running(p)]
    for sig in signals:
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        alive = wait_gone(alive, grace)
        if not alive:
            break
    return alive


def stop_child(
    proc: subprocess.Popen[str], first: signal.Signals = signal.SIGINT, grace: float = 5.0
) -> tuple[str, str]:
    """A child of ours asked to stop with `first`, its process group killed if it has not
    exited within `grace` seconds; its remaining output."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(first)
    try:
        return proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate()
