"""The form of a /proc probe: one record says what it reads (a function of the reader and the
`ProbeSpec`), how two readings around a sample become its fields of `ProbeDelta` and its flags,
and the factor functions it contributes to the explanation. `probes/sample.py` snapshots and
diffs by the catalogue (COUNTERS); `report/model/explain.py` calls the catalogue's factor
functions; neither knows a probe by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsbench.records.probes.factor import Factor, FactorInput


@dataclass
class ProbeSpec:
    """What to watch during a sample."""

    # Long-lived benchmark processes. Often empty: fio's CPU comes from os.wait4 instead.
    app_pids: list[int] = field(default_factory=list)
    daemon_pid: int | None = None  # the FUSE daemon (None for kernel drivers)
    block_device: str | None = None  # "loop3", "/dev/loop3", "sda1"
    kthread_patterns: list[str] = field(default_factory=list)  # see kthread_patterns_for


class ProcReader(Protocol):
    """What a record's `collect` may ask of `probes.procfs.ProcFS`, the one reader of /proc
    and /sys (a canned tree in tests); the values are procfs's records."""

    def read(self, rel: str) -> str: ...

    def system_cpu(self) -> Any: ...

    def process_cpu(self, pid: int) -> Any: ...

    def kernel_threads(self, patterns: list[str]) -> dict[int, Any]: ...

    def block_stat(self, device: str) -> Any: ...

    def meminfo(self) -> dict[str, int]: ...


@dataclass
class Counted:
    """One probe's share of a sample: `ProbeDelta` fields by name, and flags
    ("<what>[:detail]", kept in the sample's and the result's flags), and figures of its own."""

    fields: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    # A new probe's own amounts (no ProbeDelta field of their own): they add up over a
    # sample's iterations and are kept in the sample's extra as "<probe>.<key>".
    figures: dict[str, float] = field(default_factory=dict)


FactorFn = Callable[[FactorInput], list[Factor]]


@dataclass(frozen=True)
class CounterProbe:
    """A /proc (or /sys) probe, whole. `collect(reader, spec)`: the raw reading, taken before
    and after a sample (None or empty when the spec asks nothing of it; it never raises for a
    process or device that is gone). `delta(before, after, seconds, spec)`: the two readings as
    `Counted` (`seconds`: wall time between them). `factors`: the explanation's factor functions
    over the figures the runner keeps of those fields (`costs.py`); a function several
    records name is called once."""

    name: str  # also the reading's name on a `Snapshot` (snapshot.daemon)
    reads: str  # the files, for a reader of the catalogue
    collect: Callable[[ProcReader, ProbeSpec], Any]
    delta: Callable[[Any, Any, float, ProbeSpec], Counted]
    factors: tuple[FactorFn, ...] = ()


def factor_functions(catalogue: tuple[CounterProbe, ...]) -> list[FactorFn]:
    """The catalogue's factor functions, each once, in the order the records name them."""
    return list(dict.fromkeys(f for p in catalogue for f in p.factors))
