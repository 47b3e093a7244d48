"""A /proc probe is one record (`records/probes/counter.py`): a test's own probe, added to
the catalogue as one record, is read from a canned /proc tree, its delta reaches `ProbeDelta`'s
flags, the sample's and the result's, and its factor reaches the explanation, with nothing else
told its name."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from explain_fixtures import GiB, run

from fsbench.probes import ProbeDelta, ProcFS, Snapshot, diff, kthread_patterns_for, take_snapshot
from fsbench.records import probes as catalogue
from fsbench.records.probes import depth
from fsbench.records.probes.costs import amplification_factors, cpu_factors, ctx_factors
from fsbench.records.probes.counter import (
    Counted,
    CounterProbe,
    ProbeSpec,
    ProcReader,
    factor_functions,
)
from fsbench.records.probes.factor import Factor, FactorInput, differs, ratio_weight
from fsbench.records.probes.numbers import fmt_pct
from fsbench.records.schema import Result
from fsbench.report.model.explain import explain_run, factor_sources
from fsbench.schedule.merge import Iteration, build_sample, merge_iterations
from fsbench.schedule.runner import aggregate
from fsbench.workloads.base import Measurement
from fsbench.workloads.fake import FakeWorkload

FIXTURES = Path(__file__).parent / "fixtures" / "proc"
TCK = 100
SPEC = ProbeSpec(
    app_pids=[456, 789],
    daemon_pid=123,
    block_device="loop3",
    kthread_patterns=kthread_patterns_for("loop3", "ext4"),
)


# -- the test's own probe: I/O pressure stall (PSI), one record ----------------------------------
def _collect(procfs: ProcReader, _spec: ProbeSpec) -> int | None:
    """Microseconds some task stalled on I/O since boot (None: a kernel without PSI)."""
    try:
        text = procfs.read("proc/pressure/io")
    except OSError:
        return None
    some = next(line for line in text.splitlines() if line.startswith("some "))
    return int(some.rsplit("total=", 1)[1])


def _delta(before: int | None, after: int | None, seconds: float, _spec: ProbeSpec) -> Counted:
    if before is None or after is None or seconds <= 0:
        return Counted()
    stalled = (after - before) / 1e6
    return Counted(flags=[f"io-pressure:{stalled / seconds:.2f}"], figures={"stalled_s": stalled})


def _stalled(res: Result) -> float | None:
    """The share of the time stalled, as the result's flags keep it ("io-pressure: 0.42")."""
    said = [f for f in res.flags if f.startswith("io-pressure")]
    return float(said[0].rsplit(":", 1)[1]) if said else None


def _factors(inp: FactorInput) -> list[Factor]:
    mine = _stalled(inp.result)
    theirs = _stalled(inp.base.result) if inp.base is not None else None
    if mine is None or not differs(mine, theirs):
        return []
    text = f"some task stalled on I/O {fmt_pct(mine)} of the time"
    brief = f"I/O stall {fmt_pct(mine)}"
    if theirs is not None:
        text += f" ({inp.base_name}: {fmt_pct(theirs)})"
        brief += f" ({inp.base_name} {fmt_pct(theirs)})"
    return [Factor("io pressure", mine, "share of the time", text, brief, theirs,
                   weight=20 + ratio_weight(mine, theirs))]  # fmt: skip


PRESSURE = CounterProbe(
    "pressure",
    "/proc/pressure/io: the `some` line's total",
    collect=_collect,
    delta=_delta,
    factors=(_factors,),
)


@pytest.fixture
def with_pressure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "COUNTERS", (*catalogue.COUNTERS, PRESSURE))


def _trees(tmp_path: Path, stalled_us: int) -> tuple[ProcFS, ProcFS]:
    """The canned before/after trees, each with a PSI file: `stalled_us` between them."""
    out = []
    for name, total in (("before", 1_000_000), ("after", 1_000_000 + stalled_us)):
        root = tmp_path / f"{name}-{stalled_us}"
        shutil.copytree(FIXTURES / name, root)
        (root / "proc" / "pressure").mkdir()
        (root / "proc" / "pressure" / "io").write_text(
            f"some avg10=1.00 avg60=0.50 avg300=0.10 total={total}\n"
            f"full avg10=0.50 avg60=0.20 avg300=0.05 total={total // 2}\n"
        )
        out.append(ProcFS(str(root), clk_tck=TCK))
    return out[0], out[1]


def _delta_of(before: ProcFS, after: ProcFS) -> tuple[Snapshot, ProbeDelta]:
    b, a = take_snapshot(before, SPEC), take_snapshot(after, SPEC)
    # The snapshots' clock readings fixed: 2.5 s apart, so the stall's share is known.
    return b, diff(replace(b, taken=100.0), replace(a, taken=102.5))


def _result(subject: str, value: float, d: ProbeDelta) -> Result:
    m = Measurement(value=value, seconds=2.5, bytes=GiB)
    s = build_sample(m, d, FakeWorkload(name="seq-write"), "n/a", [])
    res = Result(subject=subject, workload="seq-write", metric="t", unit="MiB/s",
                 samples=[s.value], sample_details=[s])  # fmt: skip
    aggregate(res, is_write=True)
    return res


def test_the_catalogue_names_each_probe_once_and_each_factor_function_once() -> None:
    names = [p.name for p in catalogue.COUNTERS]
    assert len(names) == len(set(names))
    own = [cpu_factors, ctx_factors, amplification_factors, depth.factors]
    assert factor_functions(catalogue.COUNTERS) == own
    # The trace probes' factors, then the records', then the FUSE floor's.
    sources = factor_sources()
    n = len(catalogue.EXPLAINED)
    assert sources[n : n + 4] == own


def test_a_new_counter_record_is_read_diffed_and_explained(
    with_pressure: None, tmp_path: Path
) -> None:
    snap, d = _delta_of(*_trees(tmp_path, stalled_us=1_050_000))
    assert snap.pressure == 1_000_000  # its reading, under its name
    # 1.05 s stalled over the 2.5 s between the snapshots.
    assert d.flags[-1] == "io-pressure:0.42"
    # The other records' share is what it was without it.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(catalogue, "COUNTERS", catalogue.COUNTERS[:-1])
        _, plain = _delta_of(*_trees(tmp_path / "plain", stalled_us=1_050_000))
    assert d.flags[:-1] == plain.flags
    assert replace(d, flags=[]) == replace(
        plain, flags=[], figures={**plain.figures, "pressure.stalled_s": 1.05}
    )
    # Its own amount, under its name: no ProbeDelta field was needed for it (the device
    # record's own are its queue time and busy time: records/probes/depth.py).
    assert set(plain.figures) == {"block.queue_ms", "block.busy_ms"}

    toy = _result("ntfs-3g", 100.0, d)
    assert "io-pressure:0.42" in toy.sample_details[0].flags
    assert toy.sample_details[0].extra["pressure.stalled_s"] == 1.05
    assert "io-pressure: 0.42" in toy.flags
    _, d_base = _delta_of(*_trees(tmp_path, stalled_us=75_000))
    r = run([_result("ext4", 1000.0, d_base), toy])
    e = next(e for e in explain_run(r) if e.subject == "ntfs-3g")
    first = e.factors[0]
    assert (first.name, first.figure, first.baseline) == ("io pressure", 0.42, 0.03)
    assert "some task stalled on I/O 42 % of the time (ext4: 3 %)" in e.sentence()


def test_without_the_record_nothing_is_read(tmp_path: Path) -> None:
    """The catalogue decides what is read: a file no record names is not opened."""
    snap, d = _delta_of(*_trees(tmp_path, stalled_us=1_050_000))
    assert "pressure" not in snap.readings
    with pytest.raises(AttributeError):
        _ = snap.pressure
    assert not any(f.startswith("io-pressure") for f in d.flags)


def test_a_record_setting_no_probe_delta_field_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def typo(*_: Any) -> Counted:
        return Counted({"io_stall_s": 1.0})

    wrong = CounterProbe("wrong", "nothing", collect=lambda _fs, _spec: 0, delta=typo)
    monkeypatch.setattr(catalogue, "COUNTERS", (*catalogue.COUNTERS, wrong))
    with pytest.raises(ValueError, match="io_stall_s"):
        _delta_of(*_trees(tmp_path, stalled_us=0))


def test_a_counter_figure_adds_up_over_a_samples_iterations(
    with_pressure: None, tmp_path: Path
) -> None:
    _, one = _delta_of(*_trees(tmp_path / "a", stalled_us=1_000_000))
    _, two = _delta_of(*_trees(tmp_path / "b", stalled_us=500_000))
    m = Measurement(value=100.0, seconds=2.5, bytes=GiB)
    its = [Iteration(m, one, None, "n/a", []), Iteration(m, two, None, "n/a", [])]
    merged = merge_iterations(its, FakeWorkload(name="seq-write"))
    assert merged.delta.figures["pressure.stalled_s"] == 1.5
    queue = one.figures["block.queue_ms"] + two.figures["block.queue_ms"]
    assert merged.delta.figures["block.queue_ms"] == queue
