"""`--placement free`: samples that fall in two groups are named beside the result, with where
the watch saw the daemon run in each group (dimensions/placement.py: Watch, two_groups,
split_note; the runner adds the note). The watch is real: busy processes and threads pinned
on purpose, read back from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fsbench.records.notecodes import words
from fsbench.records.schema import Run, Subject
from fsbench.schedule.dimensions.placement import Watch, split_note, two_groups, with_placements
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload
from polling import wait_until

MiB = 1024 * 1024
CPUS = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="not applicable here: one CPU")


def test_two_groups_apart_wider_than_their_own_spread() -> None:
    values = [100.0, 152.0, 99.0, 150.0, 101.0, 149.0]
    slow, fast = two_groups(values)  # type: ignore[misc]
    assert sorted(slow) == [0, 2, 4] and sorted(fast) == [1, 3, 5]


@pytest.mark.parametrize(
    "values",
    [
        [100.0, 150.0, 151.0],  # three samples: one apart is an outlier, not a group
        [100.0, 104.0, 108.0, 112.0, 116.0, 120.0],  # evenly spread: no gap
        [100.0, 101.0, 130.0, 175.0],  # a gap narrower than the fast group's own range
        [100.0, 101.0, 110.0, 111.0],  # apart, but by less than 15 %
    ],
)
def test_no_split_where_the_samples_do_not_fall_in_two(values: list[float]) -> None:
    assert two_groups(values) is None


def test_the_note_names_both_groups_and_the_daemons_cpu_in_each() -> None:
    values = [480.0, 820.0, 490.0, 840.0, 500.0]
    seen = [
        {"placement": "free", "looks": 40, "same_cpu_share": 0.95},
        {"placement": "free", "looks": 22, "same_cpu_share": 0.05},
        {"placement": "free", "looks": 41, "same_cpu_share": 0.9},
        {"placement": "free", "looks": 20, "same_cpu_share": 0.0},
        {"placement": "free", "looks": 39, "same_cpu_share": 1.0},
    ]
    note = split_note(values, seen, "MiB/s")
    assert note is not None and note.code == "placement-split"
    assert note.params["slow"] == [480.0, 500.0] and note.params["n_slow"] == 3
    assert note.params["fast"] == [820.0, 840.0] and note.params["n_fast"] == 2
    text = words(note)
    assert "3 at 480–500 MiB/s, daemon on the app's CPU 95 % of the time" in text
    assert "2 at 820–840 MiB/s, daemon on the app's CPU 2 % of the time" in text
    assert "the scheduler's placement of the daemon splits them" in text
    assert "--placement same or split pins it" in text


def test_the_note_does_not_blame_the_placement_where_the_watch_saw_no_difference() -> None:
    seen = [{"looks": 30, "same_cpu_share": 0.5}] * 4
    text = words(split_note([100.0, 101.0, 160.0, 161.0], seen, "MiB/s"))  # type: ignore[arg-type]
    assert "not where the daemon ran (alike in both groups)" in text
    text = words(split_note([100.0, 101.0, 160.0, 161.0], [None] * 4, "s"))  # type: ignore[arg-type]
    assert "where the daemon ran was not seen" in text


def test_free_placement_results_carry_the_split_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "a=100,150,101,152,99,151;b=100,101,99,100,102,98")
    wls = with_placements([FakeWorkload()], ["free"])
    targets = [
        AlwaysMounted(Subject(id=s, driver="fake", fs="fake", kind="fake"),
                  Target(s, str(tmp_path), "fake", 64 * MiB))
        for s in ("a", "b")
    ]  # fmt: skip
    done = Runner(Run(run_id="r", started="t"), targets, wls, repeat=6).execute()
    res = {r.subject: r for r in done.results}
    assert [n.code for n in res["a"].notes if n.code == "placement-split"] == ["placement-split"]
    assert any(
        w.startswith("samples in two groups under --placement free") for w in res["a"].warnings
    )
    assert not any(n.code == "placement-split" for n in res["b"].notes)
    # Under the default placement nothing is free: no such note whatever the samples do.
    targets2 = [targets[0]]
    done2 = Runner(Run(run_id="r2", started="t"), targets2, [FakeWorkload()], repeat=6).execute()
    assert not any(n.code == "placement-split" for n in done2.results[0].notes)


# Says when it is pinned (the test reads the line), then spins.
SPIN = (
    "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "print('pinned', flush=True)\nwhile True: pass\n"
)


def _spin_thread(cpu: int, stop: threading.Event) -> threading.Thread:
    """A thread of this process spinning on `cpu`, returned once it is pinned there."""
    pinned = threading.Event()

    def spin() -> None:
        os.sched_setaffinity(0, {cpu})
        pinned.set()
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    assert pinned.wait(10), "the spinning thread never pinned itself"
    return t


@two_cpus
@pytest.mark.parametrize(("apart", "want_same"), [(False, True), (True, False)])
def test_the_watch_sees_whether_daemon_and_app_share_a_cpu(apart: bool, want_same: bool) -> None:
    a, b = CPUS[0], CPUS[1]
    daemon = subprocess.Popen(
        [sys.executable, "-c", SPIN, str(b if apart else a)], stdout=subprocess.PIPE, text=True
    )
    stop = threading.Event()
    try:
        assert daemon.stdout is not None and daemon.stdout.readline() == "pinned\n"
        _spin_thread(a, stop)
        w = Watch(daemon.pid).start()
        # Until it has looked enough, not for a fixed time: on a loaded machine (CI beside
        # another suite) 0.6 s gave the watch 2 looks.
        wait_until(lambda: w.looks >= 5, 20.0, interval=0.1)
        seen = w.stop()
    finally:
        stop.set()
        daemon.kill()
        daemon.wait()
    assert seen["looks"] >= 5
    if want_same:
        assert seen["same_cpu_share"] >= 0.7
    else:
        assert seen["same_cpu_share"] <= 0.3  # a stray tick of another thread


def test_the_split_is_told_under_the_table_without_verbose() -> None:
    """A finding, not a caveat: every output shows it beside its subject (report/model/notes.py)."""
    from fsbench.records.schema import Result
    from fsbench.report.model.notes import table_notes

    note = split_note([480.0, 490.0, 820.0, 840.0], [None] * 4, "MiB/s")
    assert note is not None
    res = Result(subject="ntfs-3g", workload="seq-write", metric="rate", unit="MiB/s")
    res.samples, res.notes = [480.0, 490.0, 820.0, 840.0], [note]
    shown = table_notes([res], None, detail=False)
    assert shown.per_subject["ntfs-3g"] == [words(note)] and shown.hidden == 0
