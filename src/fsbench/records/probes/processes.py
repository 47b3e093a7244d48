"""/proc probes of whole processes: the benchmark's own (`spec.app_pids`) and the FUSE daemon,
all threads. CPU from /proc/PID/stat (the thread group's totals, exited threads included),
context switches summed over /proc/PID/task/*/status. Processes may exit, start or be replaced
(a reused pid) between the readings: that is counted as well as can be and flagged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fsbench.records.probes.costs import cpu_factors, ctx_factors
from fsbench.records.probes.counter import Counted, CounterProbe, ProbeSpec, ProcReader


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


def _processes(
    name: str, role: str, whose: str, pids: Callable[[ProbeSpec], list[int]], one: bool
) -> CounterProbe:
    """The probe of a role's processes, all threads, summed: `<role>_user_s`, `<role>_sys_s`
    and `<role>_ctx`. `one`: the role has at most one process, so its flags name no pid."""

    def collect(procfs: ProcReader, spec: ProbeSpec) -> dict[int, Any]:
        return {pid: procfs.process_cpu(pid) for pid in pids(spec)}

    def delta(before: Any, after: Any, _seconds: float, spec: ProbeSpec) -> Counted:
        out = Counted({f"{role}_user_s": 0.0, f"{role}_sys_s": 0.0, f"{role}_ctx": 0})
        for pid in pids(spec):
            b, a = before.get(pid), after.get(pid)
            u, s, c = process_delta(role, None if one else pid, b, a, out.flags)
            out.fields[f"{role}_user_s"] += u
            out.fields[f"{role}_sys_s"] += s
            out.fields[f"{role}_ctx"] += c
        return out

    reads = f"/proc/PID/stat and /proc/PID/task/*/{{stat,status}} of {whose}"
    return CounterProbe(name, reads, collect, delta, factors=(cpu_factors, ctx_factors))


APPS = _processes("apps", "app", "each of spec.app_pids", lambda spec: spec.app_pids, one=False)
DAEMON = _processes(
    "daemon",
    "daemon",
    "spec.daemon_pid",
    lambda spec: [] if spec.daemon_pid is None else [spec.daemon_pid],
    one=True,
)
