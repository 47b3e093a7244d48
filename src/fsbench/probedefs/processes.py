"""/proc probes of whole processes: the benchmark's own (`spec.app_pids`) and the FUSE daemon,
all threads. CPU from /proc/PID/stat (the thread group's totals, exited threads included),
context switches summed over /proc/PID/task/*/status. Processes may exit, start or be replaced
(a reused pid) between the readings: that is counted as well as can be and flagged."""

from __future__ import annotations

from typing import Any

from fsbench.probedefs.costs import cpu_factors, ctx_factors
from fsbench.probedefs.counter import Counted, CounterProbe, ProbeSpec, ProcReader


def process_delta(
    label: str, pid: int | None, before: Any, after: Any, flags: list[str]
) -> tuple[float, float, int]:
    """(user_s, sys_s, ctx) of one process between two `ProcessCPU` readings (None: absent).

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


def _apps(procfs: ProcReader, spec: ProbeSpec) -> dict[int, Any]:
    return {pid: procfs.process_cpu(pid) for pid in spec.app_pids}


def _apps_delta(before: Any, after: Any, _seconds: float, spec: ProbeSpec) -> Counted:
    out = Counted({"app_user_s": 0.0, "app_sys_s": 0.0, "app_ctx": 0})
    for pid in spec.app_pids:
        u, s, c = process_delta("app", pid, before.get(pid), after.get(pid), out.flags)
        out.fields["app_user_s"] += u
        out.fields["app_sys_s"] += s
        out.fields["app_ctx"] += c
    return out


def _daemon(procfs: ProcReader, spec: ProbeSpec) -> Any:
    return procfs.process_cpu(spec.daemon_pid) if spec.daemon_pid is not None else None


def _daemon_delta(before: Any, after: Any, _seconds: float, spec: ProbeSpec) -> Counted:
    if spec.daemon_pid is None:
        return Counted()
    out = Counted()
    u, s, c = process_delta("daemon", None, before, after, out.flags)
    out.fields = {"daemon_user_s": u, "daemon_sys_s": s, "daemon_ctx": c}
    return out


APPS = CounterProbe(
    "apps",
    "/proc/PID/stat and /proc/PID/task/*/{stat,status} of each of spec.app_pids",
    collect=_apps,
    delta=_apps_delta,
    factors=(cpu_factors, ctx_factors),
)
DAEMON = CounterProbe(
    "daemon",
    "/proc/PID/stat and /proc/PID/task/*/{stat,status} of spec.daemon_pid",
    collect=_daemon,
    delta=_daemon_delta,
    factors=(cpu_factors, ctx_factors),
)
