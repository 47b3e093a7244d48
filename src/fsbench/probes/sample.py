"""Snapshots of every /proc probe around one measured sample, and their difference.

The caller takes one snapshot before and one after a sample, both outside fio's timed
region, and calls `diff`. What is read and how it is subtracted is each probe's record
(`records/probes/`: COUNTERS, counter.py); this module only runs the catalogue. Processes
and threads may come and go in between; nothing raises for that: it is counted as well as can
be and noted in `ProbeDelta.flags`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any

from fsbench.probes.procfs import ProcFS
from fsbench.records import probes as catalogue
from fsbench.records.probes.counter import ProbeSpec
from fsbench.records.schema import CPU, Device

__all__ = ["ProbeDelta", "ProbeSpec", "Snapshot", "diff", "take_snapshot"]


@dataclass
class Snapshot:
    """Every catalogued /proc probe's reading at one moment, by the probe's name; each is also
    an attribute of that name (`snap.daemon`: None for a catalogued probe this one did not
    read)."""

    taken: float  # time.monotonic()
    spec: ProbeSpec
    readings: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Called only for names that are not fields: a probe's reading, by the probe's name.
        readings = self.__dict__.get("readings", {})
        if name in readings:
            return readings[name]
        if any(p.name == name for p in catalogue.COUNTERS):
            return None
        raise AttributeError(name)


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
    # Counter probes' own amounts ("<probe>.<key>": Counted.figures), summed over iterations.
    figures: dict[str, float] = field(default_factory=dict)
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
    """Read every counter `spec` asks for, probe by probe of the catalogue. Cheap: no
    subprocesses, one pass over /proc."""
    readings = {p.name: p.collect(procfs, spec) for p in catalogue.COUNTERS}
    return Snapshot(taken=time.monotonic(), spec=spec, readings=readings)


_FIELDS = {f.name for f in fields(ProbeDelta)} - {"seconds", "flags", "trace", "figures"}


def diff(before: Snapshot, after: Snapshot) -> ProbeDelta:
    """What happened between two snapshots of the same spec: each catalogued probe's delta
    fills its fields of `ProbeDelta` and adds its flags, in the catalogue's order."""
    delta = ProbeDelta(seconds=after.taken - before.taken)
    for probe in catalogue.COUNTERS:
        if probe.name not in before.readings or probe.name not in after.readings:
            continue  # a probe catalogued between the two snapshots has nothing to diff
        counted = probe.delta(
            before.readings[probe.name], after.readings[probe.name], delta.seconds, before.spec
        )
        unknown = set(counted.fields) - _FIELDS
        if unknown:
            raise ValueError(f"probe {probe.name} sets no ProbeDelta field {sorted(unknown)}")
        for name, value in counted.fields.items():
            setattr(delta, name, value)
        delta.flags += counted.flags
        delta.figures.update({f"{probe.name}.{k}": v for k, v in counted.figures.items()})
    return delta
