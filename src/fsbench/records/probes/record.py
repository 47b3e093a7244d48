"""The form of a trace probe: one record says what it collects (tracepoints, bpftrace
fragment, maps), how its maps become its part of a result's `trace`, how that part becomes the
figures of a `Profile`, and the factors it adds to an explanation. `probes/trace.py` runs the
records' fragments; `report/model/explain.py` calls their `read` and `factors`; neither knows
a probe by name."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, Figure, Profile

# bpftrace's maps as `probes/trace.parse_maps` reads them: {map name without @: {key: value}},
# a key "a,b" for a map keyed by two values, a histogram as {bucket lower bound: count}.
Maps = dict[str, dict[str, Any]]


@dataclass
class SubjectKeys:
    """Which map keys belong to one subject in one sample."""

    fuse_connection: int | None = None  # kernel dev_t of the FUSE mount (st_dev)
    block_devs: tuple[int, ...] = ()  # kernel dev_t of the subject's block device(s)
    sb_devs: tuple[int, ...] = ()  # superblock dev_t (st_dev of the mount point)
    bdis: tuple[str, ...] = ()  # backing_dev_info names ("7:3", "0:54", "7:3-fuseblk")
    comms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # role -> task comms


def rows(maps: Maps, name: str) -> Iterable[tuple[list[str], Any]]:
    """A map's entries with their keys split: ("7340035,16" -> ["7340035", "16"], value)."""
    for k, v in (maps.get(name) or {}).items():
        yield k.split(","), v


def _nothing(_figures: Any, _per: str) -> list[Figure]:
    return []


@dataclass(frozen=True)
class Probe:
    """A trace probe, whole. `parse(maps, keys)`: one subject's share of the maps, the JSON
    stored as `trace[name]` (None: nothing of this subject, e.g. no FUSE connection). `read(part,
    prof)`: that part per unit of work as the figures `prof.measured[name]` holds (`part` is None
    when the probe did not run: a probe may still know the answer, a kernel driver sends no FUSE
    request). `factors(input)`: what those figures say against the baseline's. `figures`: the
    figures `diff` compares between runs."""

    name: str
    tracepoints: tuple[str, ...]  # "category/event" under tracefs events/
    yields: str
    script: str  # bpftrace fragment; maps named @<name>_*
    maps: tuple[str, ...]  # printed at the end of a sample, cleared at its start
    parse: Callable[[Maps, SubjectKeys], dict[str, Any] | None]
    read: Callable[[dict[str, Any] | None, Profile], Any]
    factors: Callable[[FactorInput], list[Factor]]
    figures: Callable[[Any, str], list[Figure]] = _nothing
    # In-flight bookkeeping (start times by request): deleted by the events themselves, never
    # printed and never cleared from user space. bpftrace's clear() snapshots a map's keys and
    # then deletes them one by one; a key an event deleted meanwhile fails that delete, and
    # bpftrace 0.17 exits ("failed to look up elem: -2"), ending every probe of the run.
    scratch: tuple[str, ...] = ()
    # A probe on the FUSE daemons' own USDT probes, (provider, name): its script attaches to
    # the run's daemon binaries that carry it (`{usdt}` in `script` is each attach point,
    # comma-separated: probes/usdt.py), and it is unavailable when none does.
    usdt: tuple[str, str] | None = None

    @classmethod
    def of_module(cls, module: str, *fields: Any, **more: Any) -> Probe:
        """The probe of a module whose functions parse, read, factors and figures are its steps,
        as every trace probe's module has them: the module declares only its data (the other
        fields), with `PROBE = Probe.of_module(__name__, ...)` below those functions."""
        m = sys.modules[module]
        figures = getattr(m, "figures", _nothing)
        return cls(*fields, parse=m.parse, read=m.read, factors=m.factors, figures=figures, **more)
