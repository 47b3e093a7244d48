"""/proc probe of the machine's memory: /proc/meminfo's free, available, cached, dirty and
writeback bytes, kept as read before and after (the runner reads the page cache's growth to
prove O_DIRECT, and the dirty bytes left behind). No factor of its own."""

from __future__ import annotations

from fsbench.records.probes.counter import Counted, CounterProbe, ProbeSpec, ProcReader


def _collect(procfs: ProcReader, _spec: ProbeSpec) -> dict[str, int]:
    return procfs.meminfo()


def _delta(before: dict[str, int], after: dict[str, int], _s: float, _spec: ProbeSpec) -> Counted:
    return Counted({"meminfo_before": dict(before), "meminfo_after": dict(after)})


PROBE = CounterProbe(
    "meminfo",
    "/proc/meminfo: MemFree, MemAvailable, Cached, Dirty, Writeback",
    collect=_collect,
    delta=_delta,
)
