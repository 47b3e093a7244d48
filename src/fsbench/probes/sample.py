"""Snapshots of every probe around one measured sample, and their difference.

The caller takes one snapshot before and one after a sample, both outside fio's timed
region, and calls `diff`. Processes and threads may come and go in between; nothing here
raises for that: it is counted as well as can be and noted in `ProbeDelta.flags`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fsbench.probes.procfs import (
    MEMINFO_KEYS,
    BlockStat,
    KThread,
    ProcessCPU,
    ProcFS,
    SystemCPU,
    kthread_group,
)
from fsbench.schema import CPU, Device


@dataclass
class ProbeSpec:
    """What to watch during a sample."""

    # Long-lived benchmark processes. Often empty: fio's CPU comes from os.wait4 instead.
    app_pids: list[int] = field(default_factory=list)
    daemon_pid: int | None = None  # the FUSE daemon (None for kernel drivers)
    block_device: str | None = None  # "loop3", "/dev/loop3", "sda1"
    kthread_patterns: list[str] = field(default_factory=list)  # see kthread_patterns_for


@dataclass
class Snapshot:
    taken: float  # time.monotonic()
    system: SystemCPU
    apps: dict[int, ProcessCPU | None]  # None: the pid did not exist
    daemon: ProcessCPU | None
    kthreads: dict[int, KThread]
    block: BlockStat | None  # None: no device asked for, or it did not exist
    meminfo: dict[str, int]
    spec: ProbeSpec


@dataclass
class ProbeDelta:
    seconds: float = 0.0  # wall time between the snapshots
    app_user_s: float = 0.0  # over spec.app_pids
    app_sys_s: float = 0.0
    app_ctx: int = 0
    daemon_user_s: float = 0.0
    daemon_sys_s: float = 0.0
    daemon_ctx: int = 0
    kthreads_s: float = 0.0  # all matched kernel threads, kworkers included
    kworker_s: float = 0.0  # the shared kworker part of kthreads_s
    kthreads_by_name: dict[str, float] = field(default_factory=dict)  # "kworker", "jbd2", ...
    system_busy_s: float = 0.0
    system_iowait_s: float = 0.0
    system_ctx: int = 0
    device: Device = field(default_factory=Device)
    device_busy_ms: int = 0  # io_ticks: ms the device had I/O in flight
    meminfo_before: dict[str, int] = field(default_factory=dict)
    meminfo_after: dict[str, int] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    # The kernel trace probes' figures over the measured run (probes/trace.py), if traced.
    trace: dict[str, Any] | None = None

    @property
    def daemon_s(self) -> float:
        return self.daemon_user_s + self.daemon_sys_s

    @property
    def kthreads_dedicated_s(self) -> float:
        """Kernel-thread CPU without kworkers: loop, jbd2, fs threads."""
        return self.kthreads_s - self.kworker_s

    def to_cpu(self, app_user_s: float | None = None, app_sys_s: float | None = None) -> CPU:
        """A schema CPU record. App CPU defaults to app_pids' (pass wait4's rusage for fio).

        per_gib_s/per_gib are left for the caller, which knows the bytes moved.
        """
        return CPU(
            app_user_s=self.app_user_s if app_user_s is None else app_user_s,
            app_sys_s=self.app_sys_s if app_sys_s is None else app_sys_s,
            driver_s=self.daemon_s,
            kernel_threads_s=self.kthreads_s,
            system_busy_s=self.system_busy_s,
            system_iowait_s=self.system_iowait_s,
        )


def take_snapshot(procfs: ProcFS, spec: ProbeSpec) -> Snapshot:
    """Read every counter `spec` asks for. Cheap: no subprocesses, one pass over /proc."""
    block: BlockStat | None = None
    if spec.block_device:
        try:
            block = procfs.block_stat(spec.block_device)
        except FileNotFoundError:
            block = None
    return Snapshot(
        taken=time.monotonic(),
        system=procfs.system_cpu(),
        apps={pid: procfs.process_cpu(pid) for pid in spec.app_pids},
        daemon=procfs.process_cpu(spec.daemon_pid) if spec.daemon_pid is not None else None,
        kthreads=procfs.kernel_threads(spec.kthread_patterns),
        block=block,
        meminfo=procfs.meminfo(MEMINFO_KEYS),
        spec=spec,
    )


def _process_delta(
    label: str,
    pid: int | None,
    before: ProcessCPU | None,
    after: ProcessCPU | None,
    flags: list[str],
) -> tuple[float, float, int]:
    """(user_s, sys_s, ctx) of one process between two readings.

    Flags read "<label>-<what>[:pid][:count]", e.g. "daemon-exited", "app-exited:123".
    """

    def flag(what: str, count: int | None = None) -> None:
        parts = [f"{label}-{what}"]
        parts += [str(pid)] if pid is not None else []
        parts += [str(count)] if count is not None else []
        flags.append(":".join(parts))

    if after is None:
        # Exited (or never existed): nothing after to subtract from; count nothing.
        flag("exited" if before is not None else "missing")
        return 0.0, 0.0, 0
    if before is None or before.start_ticks != after.start_ticks:
        # Started during the sample (or the pid was reused): all of it is in the interval.
        flag("started" if before is None else "restarted")
        return after.user_s, after.sys_s, after.ctx

    ctx = 0
    exited = 0
    for tid, b in before.threads.items():
        a = after.threads.get(tid)
        if a is None or a.start_ticks != b.start_ticks:
            exited += 1  # its switches since `before` are lost; the kernel keeps no sum
    for tid, a in after.threads.items():
        b = before.threads.get(tid)
        if b is None or a.start_ticks != b.start_ticks:
            ctx += a.ctx  # new thread: all its switches happened in the interval
        else:
            ctx += max(0, a.ctx - b.ctx)
    if exited:
        flag("threads-exited", exited)
    # user/sys come from the thread-group totals, which keep exited threads' time.
    return (
        max(0.0, after.user_s - before.user_s),
        max(0.0, after.sys_s - before.sys_s),
        ctx,
    )


def _kthread_delta(
    before: dict[int, KThread], after: dict[int, KThread], flags: list[str]
) -> dict[str, float]:
    """CPU seconds of matched kernel threads, grouped by kthread_group(comm)."""
    by_name: dict[str, float] = {}
    for tid, a in after.items():
        b = before.get(tid)
        if b is None or b.start_ticks != a.start_ticks:
            spent = a.user_s + a.sys_s  # created during the sample
        else:
            spent = max(0.0, (a.user_s + a.sys_s) - (b.user_s + b.sys_s))
        group = kthread_group(a.comm)
        by_name[group] = by_name.get(group, 0.0) + spent
    vanished = sum(
        1
        for tid, b in before.items()
        if tid not in after or after[tid].start_ticks != b.start_ticks
    )
    if vanished:
        flags.append(f"kthread-vanished:{vanished}")
    return by_name


def _device_delta(
    name: str | None, before: BlockStat | None, after: BlockStat | None, flags: list[str]
) -> tuple[Device, int]:
    if name is None:
        return Device(), 0
    if before is None or after is None:
        flags.append(f"device-missing:{name}")
        return Device(), 0
    if after.read_sectors < before.read_sectors or after.write_sectors < before.write_sectors:
        # The device was detached and re-attached: counters restarted from zero.
        flags.append(f"device-counters-reset:{name}")
        return Device(), 0
    device = Device(
        read_bytes=after.read_bytes - before.read_bytes,
        write_bytes=after.write_bytes - before.write_bytes,
        read_ios=after.read_ios - before.read_ios,
        write_ios=after.write_ios - before.write_ios,
    )
    return device, after.io_ticks - before.io_ticks


def diff(before: Snapshot, after: Snapshot) -> ProbeDelta:
    """What happened between two snapshots of the same spec."""
    flags: list[str] = []
    delta = ProbeDelta(seconds=after.taken - before.taken)

    for pid in before.spec.app_pids:
        u, s, c = _process_delta("app", pid, before.apps.get(pid), after.apps.get(pid), flags)
        delta.app_user_s += u
        delta.app_sys_s += s
        delta.app_ctx += c

    if before.spec.daemon_pid is not None:
        u, s, c = _process_delta("daemon", None, before.daemon, after.daemon, flags)
        delta.daemon_user_s, delta.daemon_sys_s, delta.daemon_ctx = u, s, c

    delta.kthreads_by_name = _kthread_delta(before.kthreads, after.kthreads, flags)
    delta.kthreads_s = sum(delta.kthreads_by_name.values())
    delta.kworker_s = delta.kthreads_by_name.get("kworker", 0.0)

    delta.system_busy_s = max(0.0, after.system.busy_s - before.system.busy_s)
    delta.system_iowait_s = max(0.0, after.system.iowait_s - before.system.iowait_s)
    delta.system_ctx = after.system.ctxt - before.system.ctxt

    delta.device, delta.device_busy_ms = _device_delta(
        before.spec.block_device, before.block, after.block, flags
    )
    delta.meminfo_before = dict(before.meminfo)
    delta.meminfo_after = dict(after.meminfo)
    delta.flags = flags
    return delta
