"""A probe is one record (fsbench/records/probes/): a test's own probe and a test's own driver
quirk, each added as one record, reach the bpftrace script, the result's trace, the explanation,
the terminal table and diff's figures, with nothing else told their names."""

from __future__ import annotations

import io
from typing import Any

import pytest
from explain_fixtures import GiB, fuse_trace, kernel_trace, result, run
from rich.console import Console

from fsbench.lab.drivers import Driver
from fsbench.probes import trace as T
from fsbench.records import probes as catalogue
from fsbench.records.probes.factor import Factor, FactorInput, Profile, differs, ratio_weight
from fsbench.records.probes.numbers import fmt_count, number
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows
from fsbench.records.schema import Quirk
from fsbench.report.model.explain import explain_run
from fsbench.report.views.sections import render


# -- the test's own probe: lock contention of the subject's tasks, one record --------------------
def _parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any]:
    got = {k[0]: int(v) for k, v in rows(maps, "locks_n")}
    return {"waits": {role: sum(got.get(c, 0) for c in cs) for role, cs in keys.comms.items()}}


def _read(part: dict[str, Any] | None, prof: Profile) -> float | None:
    if part is None:
        return None
    return sum(number(v) or 0.0 for v in part["waits"].values()) / prof.amount


def _factors(inp: FactorInput) -> list[Factor]:
    mine = inp.prof.measured.get("locks")
    theirs = inp.base.measured.get("locks") if inp.base is not None else None
    if mine is None or not differs(mine, theirs):
        return []
    text = f"{fmt_count(mine)} lock contentions per {inp.prof.per}"
    if theirs is not None:
        text += f" ({inp.base_name}: {fmt_count(theirs)})"
    brief = f"{fmt_count(mine)} lock waits/{inp.prof.per}"
    return [Factor("locks", mine, f"waits/{inp.prof.per}", text, brief, theirs,
                   weight=20 + ratio_weight(mine, theirs))]  # fmt: skip


def _figures(waits: float, per: str) -> list[Figure]:
    return [("locks.waits", f"lock contentions per {per}", waits, "count")]


LOCKS = Probe(
    "locks",
    ("lock/contention_begin",),
    "lock contentions of the application's and the daemon's tasks",
    "tracepoint:lock:contention_begin { @locks_n[comm] = count(); }",
    ("locks_n",),
    parse=_parse,
    read=_read,
    factors=_factors,
    figures=_figures,
)


@pytest.fixture
def with_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "PROBES", (*catalogue.PROBES, LOCKS))
    monkeypatch.setattr(catalogue, "EXPLAINED", (*catalogue.EXPLAINED, LOCKS))


def test_the_explanation_lists_every_catalogued_probe_once() -> None:
    assert sorted(p.name for p in catalogue.EXPLAINED) == sorted(T.PROBE_NAMES)
    assert len({p.name for p in catalogue.PROBES}) == len(catalogue.PROBES)
    # Each record's maps are its own: bpftrace's map names never collide between probes.
    maps = [m for p in catalogue.PROBES for m in (*p.maps, *p.scratch)]
    assert len(maps) == len(set(maps))


def test_a_new_probe_record_is_traced_parsed_and_explained(with_locks: None) -> None:
    # The script carries its fragment and prints and clears its map around the traced run.
    script = T.build_script([*T.PROBES, LOCKS], marker_pid=1)
    assert "tracepoint:lock:contention_begin" in script and "clear(@locks_n);" in script
    # Its canned map, as bpftrace prints it, becomes its part of the subject's trace.
    maps = T.parse_maps(['{"type": "map", "data": {"@locks_n": {"toyfs": 60000, "cc": 9}}}'])
    keys = SubjectKeys(comms={"app": ("dd",), "driver": ("toyfs",)})
    status = {**dict.fromkeys(T.PROBE_NAMES, "ok"), "locks": "ok"}
    work = {"bytes": GiB, "ops": 0, "seconds": 10.0}
    part = T.to_trace(maps, keys, status, work, probes=[*T.PROBES, LOCKS])["locks"]
    assert part == {"waits": {"app": 0, "driver": 60000}}

    toy = Driver(
        "toyfs", "ntfs", "fuse", "a made-up FUSE driver",
        quirks=(Quirk(op="WRITE", request_size=4096, says="toyfs writes one page at a time",
                      brief="toyfs: page writes"),),
    )  # fmt: skip
    base_trace = {**kernel_trace(), "locks": {"waits": {"app": 30}}}
    base_trace["probes"] = {**base_trace["probes"], "locks": "ok"}
    toy_trace = fuse_trace()
    toy_trace["probes"]["locks"] = "ok"
    toy_trace["locks"] = part
    r = run(
        [result("ext4", [1000.0, 1010.0], base_trace), result("toyfs", [100.0, 101.0], toy_trace)],
        subjects=("ext4", "toyfs"),
        drivers={"toyfs": toy},
    )
    e = next(e for e in explain_run(r) if e.subject == "toyfs")
    first = e.factors[0]
    assert first.name == "locks" and first.figure == 60000 and first.baseline == 30
    assert "60,000 lock contentions per GiB (ext4: 30)" in e.sentence()
    assert "toyfs writes one page at a time" in e.sentence()  # the quirk, from its record
    console = Console(file=io.StringIO(), width=120, record=True)
    render(r, console)
    table = console.export_text()
    assert "60,000 lock waits/GiB" in table and "(toyfs: page writes)" in table

    from fsbench.report.model.explain import profile

    figures = {k: v for k, _, v, _ in profile(r.results[1], r).figures()}
    assert figures["locks.waits"] == 60000


def test_without_the_record_its_data_is_not_read() -> None:
    """The catalogue decides what is read: a trace part no record names says nothing."""
    t = fuse_trace()
    t["locks"] = {"waits": {"driver": 60000}}
    r = run([result("ext4", [1000.0], kernel_trace()), result("ntfs-3g", [100.0], t)])
    assert all(f.name != "locks" for e in explain_run(r) for f in e.factors)
