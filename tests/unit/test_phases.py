"""Where the measuring time goes (Schedule.phases): the clock's bookkeeping, and the runner's
phases under a fake clock, where each step's cost is known exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

import fsbench.schedule.runner as runner_mod
from fsbench.records.schema import Run, Subject
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.phases import PhaseClock, phases_line
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_second_is_charged_once_to_the_innermost_phase() -> None:
    clock = Clock()
    pc = PhaseClock(clock)
    with pc.phase("cache"):
        clock.now += 1
        with pc.phase("probes"):
            clock.now += 2
        clock.now += 3
    clock.now += 100  # outside every phase: the report's "other"
    with pc.phase("run"):
        clock.now += 4
    assert pc.spent == {"cache": 4, "probes": 2, "run": 4}
    assert pc.report(total_s=110) == {"cache": 4, "probes": 2, "run": 4, "other": 100}


def test_a_whole_phase_keeps_the_time_of_the_phases_inside_it() -> None:
    clock = Clock()
    pc = PhaseClock(clock)
    with pc.phase("warm-up", whole=True):
        with pc.phase("prepare"):
            clock.now += 5
        with pc.phase("run"):
            clock.now += 7
    with pc.phase("run"):
        clock.now += 1
    assert pc.spent == {"warm-up": 12, "run": 1}
    # Biggest first, with each phase's share of the total.
    assert phases_line(pc.report(13), 13) == (
        "measuring time by phase: warm-up 12 s (92 %) · run 1 s (8 %)"
    )


def test_the_runner_reports_what_each_phase_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two subjects, one warm-up run and two samples each: a run costs 10 s, its preparation
    3 s. The warm-up (13 s a pair) is charged whole; the samples' runs and preparations apart;
    nothing is left over, and the phases add up to the measuring time."""
    clock = Clock()
    monkeypatch.setattr(runner_mod.time, "monotonic", clock)
    wl = FakeWorkload()
    run, prepare = wl.run, wl.prepare

    def costly_run(target: Target):  # type: ignore[no-untyped-def]
        clock.now += 10
        return run(target)

    def costly_prepare(target: Target) -> None:
        clock.now += 3
        prepare(target)

    wl.run, wl.prepare = costly_run, costly_prepare  # type: ignore[method-assign]
    wl.warmup = 1
    targets = [
        AlwaysMounted(
            Subject(id=sid, driver="fake", fs="fake", kind="fake"),
            Target(sid, str(tmp_path), "fake", 64 << 20),
        )
        for sid in ("a", "b")
    ]
    setup = PhaseClock(clock)  # the steps before the first round (the pipeline's)
    with setup.phase("images"):
        clock.now += 5
    runner = Runner(Run(run_id="t", started="2025-01-01T00:00:00"), targets, [wl], repeat=2,
                    clock=PhaseClock(clock), setup=setup)  # fmt: skip
    sc = runner.execute().schedule
    assert sc is not None and sc.spent_s == 2 * 13 + 4 * 13
    # The time anatomy beside the phases: the set-up's steps, and the kept samples' data time.
    assert sc.setup == {"images": 5.0}
    details = [d for r in runner.results.values() for d in r.sample_details]
    assert len(details) == 4 and sc.data_s == round(sum(d.seconds or 0.0 for d in details), 2)
    assert sc.phases["other"] == 0.0  # every second accounted for
    # The fake has no mount, cache drop or probe cost under this clock.
    assert {k: v for k, v in sc.phases.items() if v} == {"prepare": 12, "run": 40, "warm-up": 26}


def test_the_phases_show_with_verbose_and_in_the_html() -> None:
    from rich.console import Console

    from fsbench.records.schema import Schedule
    from fsbench.report.views.sections import render, render_html

    r = Run(run_id="t", started="2025-01-01T00:00:00")
    r.schedule = Schedule(spent_s=100.0, phases={"run": 40.0, "cache": 35.0, "other": 25.0})
    line = "measuring time by phase: run 40 s (40 %) · cache 35 s (35 %) · other 25 s (25 %)"
    for verbose in (False, True):
        con = Console(width=100, record=True, color_system=None)
        render(r, con, verbose=verbose)
        assert (line in con.export_text()) is verbose  # the default output stays short
    assert line.removeprefix("measuring time by phase: ") in render_html(r)
