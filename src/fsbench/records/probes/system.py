"""/proc probe of the whole machine: /proc/stat's busy and iowait CPU and its context switches.
The machine's context switches are the explanation's figure for runs older than the subject's
own (app + daemon) count."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.costs import ctx_factors
from fsbench.records.probes.counter import Counted, CounterProbe, ProbeSpec, ProcReader


def _collect(procfs: ProcReader, _spec: ProbeSpec) -> Any:
    return procfs.system_cpu()


def _delta(before: Any, after: Any, _seconds: float, _spec: ProbeSpec) -> Counted:
    """Two `SystemCPU` readings."""
    return Counted(
        {
            "system_busy_s": max(0.0, after.busy_s - before.busy_s),
            "system_iowait_s": max(0.0, after.iowait_s - before.iowait_s),
            "system_ctx": after.ctxt - before.ctxt,
        }
    )


PROBE = CounterProbe(
    "system",
    "/proc/stat: the cpu line and ctxt",
    collect=_collect,
    delta=_delta,
    factors=(ctx_factors,),
)
