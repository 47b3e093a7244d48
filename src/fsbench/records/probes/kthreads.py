"""/proc probe of the kernel threads that serve the subject (loop, jbd2, fs workers, and
kworkers wholesale): children of kthreadd whose name matches `spec.kthread_patterns`, their CPU
grouped by kind. Their CPU is a part of the explanation's CPU factor."""

from __future__ import annotations

import re
from typing import Any

from fsbench.records.probes.costs import cpu_factors
from fsbench.records.probes.counter import Counted, CounterProbe, ProbeSpec, ProcReader

_TRAILING_DIGITS = re.compile(r"[-_:]?\d+$")


def kthread_group(comm: str) -> str:
    """Group name for a kernel thread: its name without instance suffixes.

    "kworker/u8:2-loop3" -> "kworker", "jbd2/loop3-8" -> "jbd2", "loop3" -> "loop",
    "xfsaild/loop3" -> "xfsaild". The part before '/' is the thread's kind; without a '/',
    trailing digits are the instance number.
    """
    if "/" in comm:
        return comm.split("/", 1)[0] or comm
    return _TRAILING_DIGITS.sub("", comm) or comm


def _collect(procfs: ProcReader, spec: ProbeSpec) -> dict[int, Any]:
    return procfs.kernel_threads(spec.kthread_patterns)


def _delta(before: dict[int, Any], after: dict[int, Any], _s: float, _spec: ProbeSpec) -> Counted:
    """CPU seconds of matched kernel threads (`KThread` readings by tid), by kthread_group."""
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
    fields = {
        "kthreads_by_name": by_name,
        "kthreads_s": sum(by_name.values()),
        "kworker_s": by_name.get("kworker", 0.0),
    }
    return Counted(fields, [f"kthread-vanished:{vanished}"] if vanished else [])


PROBE = CounterProbe(
    "kthreads",
    "/proc/PID/stat of kthreadd's children named by spec.kthread_patterns",
    collect=_collect,
    delta=_delta,
    factors=(cpu_factors,),
)
