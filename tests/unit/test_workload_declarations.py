"""Every workload declares what its result is, its unit and which way is better: the ones the
classes inherit from workloads/base.Declared and the ones they state are checked here by name,
so a class that lost its own declaration (and fell back to the default) fails."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fsbench import registry
from fsbench.workloads.base import OPS, THROUGHPUT, TIME, Declared, Measures, job_id
from fsbench.workloads.command import CommandSpec, UserCommand
from fsbench.workloads.fiofile import resolve
from fsbench.workloads.webserve import WebServe

# What each built-in workload name measures: the spec, written out.
MEASURES = {
    **dict.fromkeys(
        ("seq-write", "seq-read", "rewrite", "reread", "rand-read", "rand-write", "stride-read"),
        THROUGHPUT,
    ),
    "diskmark": THROUGHPUT,
    "iozone": THROUGHPUT,
    "tree-hash": THROUGHPUT,
    "copy-large": THROUGHPUT,
    "copy-small": THROUGHPUT,
    "web-serve": THROUGHPUT,
    "metadata": OPS,
    "compile": TIME,
}
# Caches stated at class level (the others are per instance, a field or a property).
CACHES = {
    "compile/configure": "warm",
    "compile/make": "warm",
    "compile/install": "warm",
    "metadata/aged": "cold",
    "tree-hash/aged": "cold",
    "seq-read/aged": "cold",
    "copy-large/in": "none",
    "copy-large/out": "cold",
}
FIX = Path(__file__).parent / "fixtures" / "fio"
ALL = [*registry.WORKLOADS.values(), *registry.MATRIX_WORKLOADS.values()]


def _measures(w: object) -> Measures:
    return Measures(w.metric, w.unit, w.higher_is_better)  # type: ignore[attr-defined]


def test_every_builtin_workload_measures_what_its_name_says() -> None:
    assert {w.name for w in ALL} == set(MEASURES)  # a new name must be added above
    wrong = {w.id: _measures(w) for w in ALL if _measures(w) != MEASURES[w.name]}
    assert wrong == {}
    assert all(w.cache in ("cold", "warm", "direct", "none") for w in ALL)


def test_class_level_caches_and_ids() -> None:
    by_id = {w.id: w for w in ALL}
    assert {i: by_id[i].cache for i in CACHES} == CACHES
    for w in ALL:
        assert w.id == job_id(w.name, w.variant, getattr(w, "numjobs", 1))


def test_user_workloads_measure_time_and_throughput(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = UserCommand(CommandSpec("true"))
    assert (_measures(cmd), cmd.cache, cmd.id) == (TIME, "none", "command/true")
    monkeypatch.setenv("TIOBENCH_SIZE", "2m")
    phases = resolve(f"fio:{FIX / 'tiobench-small.fio'}:cache=cold")
    assert phases and all(_measures(p) == THROUGHPUT for p in phases)
    assert {p.cache for p in phases} <= {"cold", "none"}


def test_declared_defaults_stay_out_of_dataclass_fields() -> None:
    """Declarations shared by a class are class attributes, not fields: replace() and equality
    see only what differs between instances; a required field stays required (= field())."""
    seq = registry.WORKLOADS["rewrite/fsync"]
    assert "metric" not in {f.name for f in dataclasses.fields(seq)}
    assert _measures(dataclasses.replace(seq, numjobs=4)) == THROUGHPUT
    assert isinstance(seq, Declared)
    with pytest.raises(TypeError, match="cache"):
        WebServe("4k", 4096)  # type: ignore[call-arg]
