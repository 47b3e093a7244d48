"""CPU placement (--placement free,same,split) and the wake-up cost probe, without root.

Pinning is real here: the runner pins this test process's own thread and a stand-in "daemon"
(a child process with several threads), and the tests read the masks back from the kernel
(/proc/PID/status of the processes the workload starts, sched_getaffinity of every thread).
The fake workload only supplies the values; nothing here is a measurement of a file system.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from explain_fixtures import fuse_trace, kernel_trace, result, run
from rich.console import Console
from test_cli import Sandbox, assert_usage_error

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.probes import wakeup
from fsbench.probes.procfs import ProcFS
from fsbench.records import schema
from fsbench.records.schema import Environment, Run, Subject, WakeupCost
from fsbench.report.model.diff import environment_differences, match_key
from fsbench.report.views.sections import render, render_html
from fsbench.schedule.dimensions.placement import (
    DEFAULT,
    PARTIAL_FLAG,
    PLACEMENTS,
    Placed,
    default_note,
    parse_placements,
    pin,
    with_placements,
)
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Measurement, Target
from fsbench.workloads.fake import FakeWorkload
from polling import wait_until

MiB = 1024 * 1024
CPUS = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(
    len(CPUS) < 2, reason="not applicable here: one CPU, nothing to tell pinned from free"
)


# -- parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [
        (None, ["same"]),
        ("free", ["free"]),
        ("same,free", ["same", "free"]),
        (" split , same ", ["split", "same"]),
        ("FREE,Same", ["free", "same"]),
        ("free,same,split", ["free", "same", "split"]),
    ],
)
def test_placements_parse_in_the_order_given(text: str | None, want: list[str]) -> None:
    assert parse_placements(text, cpus=[0, 1]) == want


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "give a comma list of free|same|split"),
        (",", "give a comma list"),
        ("same,", "give a comma list"),
        ("anywhere", "--placement 'anywhere': not one of free|same|split"),
        ("same,same", "name each placement once"),
    ],
)
def test_bad_placements_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_placements(text, cpus=[0, 1])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_split_needs_two_cpus() -> None:
    with pytest.raises(UsageError, match="--placement split: needs 2 CPUs, fsbench may use 1"):
        parse_placements("free,split", cpus=[3])
    assert parse_placements("free,same", cpus=[3]) == ["free", "same"]


def test_split_on_one_cpu_is_bad_input_on_the_command_line(tmp_path: Path) -> None:
    """fsbench started on one CPU (taskset -c 0) refuses split: exit 2, one line, nothing made."""
    box = Sandbox.make(tmp_path)
    before = box.files()
    proc = subprocess.run(
        [sys.executable, "-m", "fsbench", "run", "--target", str(tmp_path / "cwd"),
         "--placement", "free,split"],
        cwd=tmp_path / "cwd",
        env=box.env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.sched_setaffinity(0, {CPUS[0]}),
    )  # fmt: skip
    assert_usage_error(proc, "--placement split: needs 2 CPUs, fsbench may use 1 here")
    assert box.files() == before


def test_placements_are_declared_as_data() -> None:
    assert list(PLACEMENTS) == ["free", "same", "split"]
    assert not PLACEMENTS["free"].pins and PLACEMENTS["split"].min_cpus == 2
    assert all(p.description for p in PLACEMENTS.values())


# -- the schedule ----------------------------------------------------------------------------
def _subject(sid: str, kind: str = "fake") -> Subject:
    return Subject(id=sid, driver="fake", fs="fake", kind=kind)  # type: ignore[arg-type]


def _runner(
    tmp_path: Path,
    workloads: list,
    ids: tuple[str, ...] = ("a", "b"),
    kind: str = "fake",
    daemon_pid: int | None = None,
    **kw,
) -> Runner:
    targets = [
        AlwaysMounted(
            _subject(sid, kind), Target(sid, str(tmp_path), kind, 64 * MiB, daemon_pid=daemon_pid)
        )
        for sid in ids
    ]
    return Runner(Run(run_id="r", started="t"), targets, workloads, **kw)


def test_the_default_is_same_on_any_machine() -> None:
    assert parse_placements(None, cpus=[0, 1]) == ["same"] == [DEFAULT]
    assert parse_placements(None, cpus=[3]) == ["same"]


@two_cpus
def test_the_default_pins_without_a_result_of_its_own_and_says_so_once(
    tmp_path: Path, daemon: subprocess.Popen
) -> None:
    """A run without --placement: titles and params as they always were, but the app and the
    daemon pinned to one CPU for every timed run (recorded per sample), one note for the run, and
    no per-result flag for the kernel driver that has no daemon to pin."""
    wl = Where()
    assert with_placements([wl], parse_placements(None)) == [wl]
    a = CPUS[0]
    run = Run(run_id="r", started="t")
    targets = [
        AlwaysMounted(
            _subject("f", "fuse"), Target("f", str(tmp_path), "fuse", MiB, daemon_pid=daemon.pid)
        ),
        AlwaysMounted(_subject("k", "kernel"), Target("k", str(tmp_path), "kernel", MiB)),
    ]
    done = Runner(run, targets, [wl], repeat=1).execute()
    fuse_seen, kernel_seen = wl.seen
    assert fuse_seen["app"] == {a} and all(m == {a} for m in fuse_seen["daemon"].values())
    assert kernel_seen["app"] == {a}
    assert all("placement" not in r.params for r in done.results)
    pinned = {r.subject: r.sample_details[0].extra["pinned"] for r in done.results}
    assert pinned["f"] == {"placement": "same", "app_cpu": a, "daemon_cpu": a, "daemon_threads": 4}
    assert pinned["k"] == {"placement": "same", "app_cpu": a}
    assert not any(PARTIAL_FLAG in f for r in done.results for f in r.flags)
    (note,) = [n for n in done.environment.notes if n.startswith("placement:")]
    assert f"the application and a FUSE daemon on CPU {a}" in note
    assert "--placement free" in note
    assert os.sched_getaffinity(0) == set(CPUS)


def test_no_default_note_when_every_workload_has_its_own_placement() -> None:
    wls = with_placements([FakeWorkload()], ["free", "same"])
    assert default_note(wls, cpus=[0, 1]) is None
    assert default_note([FakeWorkload()], cpus=[5]) is not None
    assert "the application and a FUSE daemon on CPU 5" in (
        default_note([FakeWorkload()], cpus=[5]) or ""
    )


def test_placements_are_interleaved_like_variants(tmp_path: Path) -> None:
    w1, w2 = FakeWorkload(name="w1"), FakeWorkload(name="w2")
    steps: list[str] = []
    wls = with_placements([w1, w2], ["same", "free"])
    done = _runner(tmp_path, wls, repeat=2, on_step=steps.append).execute()
    one_turn = ["w1@same", "w1@free", "w2@same", "w2@free"]
    want = [
        f"{sid} · {w} · sample {rep}/2" for rep in (1, 2) for sid in ("a", "b") for w in one_turn
    ]
    assert steps == want
    # One result per subject, workload and placement; the workload's name is unchanged.
    got = sorted(
        (r.subject, r.workload, r.params["placement"], len(r.samples)) for r in done.results
    )
    assert got == sorted(
        (sid, w, p, 2) for sid in ("a", "b") for w in ("w1", "w2") for p in ("same", "free")
    )


def test_a_workload_wrapped_twice_is_closed_once() -> None:
    closed: list[str] = []

    @dataclass
    class Closing(FakeWorkload):
        def close(self) -> None:
            closed.append(self.name)

    wls = with_placements([Closing()], ["same", "free", "split"])
    assert [w.id for w in wls] == ["fake@same", "fake@free", "fake@split"]  # type: ignore[attr-defined]
    for w in wls:
        w.close()  # type: ignore[attr-defined]
    assert closed == ["fake"]
    assert isinstance(wls[0], Placed) and wls[0].unit == "MiB/s"  # the rest is delegated


# -- real pinning ----------------------------------------------------------------------------
def _allowed(pid: int | str = "self") -> set[int]:
    """Cpus_allowed_list of a process, read from the kernel as a user would."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            out: set[int] = set()
            for part in line.split(":", 1)[1].strip().split(","):
                lo, _, hi = part.partition("-")
                out |= set(range(int(lo), int(hi or lo) + 1))
            return out
    raise AssertionError("no Cpus_allowed_list")


# A stand-in FUSE daemon: argv[1] idle threads at once; with argv[2], that many more once a
# line arrives on stdin (a daemon's workers started on demand, e.g. while the test pins it).
STAND_IN = """
import sys, threading
def idle():
    threading.Event().wait()
def start(k):
    for _ in range(k):
        threading.Thread(target=idle, daemon=True).start()
start(int(sys.argv[1]))
if len(sys.argv) > 2:
    sys.stdin.readline()
    start(int(sys.argv[2]))
idle()
"""


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen]:
    """A stand-in FUSE daemon: a process with four threads."""
    proc = subprocess.Popen([sys.executable, "-c", STAND_IN, "3"])
    assert wait_until(lambda: len(ProcFS().tids(proc.pid)) >= 4, 10, interval=0.01)
    yield proc
    proc.kill()
    proc.wait()


def _thread_masks(pid: int) -> dict[int, set[int]]:
    return {t: os.sched_getaffinity(t) for t in ProcFS().tids(pid)}


@dataclass
class Where(FakeWorkload):
    """Reads, while it runs, where its child process, itself and the daemon may run."""

    seen: list[dict] = field(default_factory=list)

    def run(self, target: Target) -> Measurement:
        child = subprocess.run(
            ["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True
        )
        self.seen.append(
            {
                "child": child.stdout.split(":")[1].strip(),
                "app": os.sched_getaffinity(0),
                "daemon": _thread_masks(target.daemon_pid) if target.daemon_pid else {},
            }
        )
        return super().run(target)


@two_cpus
def test_same_and_split_pin_app_children_and_every_daemon_thread_then_restore(
    tmp_path: Path, daemon: subprocess.Popen
) -> None:
    app0, daemon0 = os.sched_getaffinity(0), _thread_masks(daemon.pid)
    wl = Where()
    r = _runner(
        tmp_path,
        with_placements([wl], ["same", "free", "split"]),
        ids=("fuse-subject",),
        kind="fuse",
        daemon_pid=daemon.pid,
        repeat=1,
    )
    done = r.execute()
    same, free, split = wl.seen
    a, b = CPUS[0], CPUS[1]
    assert same["app"] == {a} and same["child"] == str(a)
    assert len(same["daemon"]) == 4 and all(m == {a} for m in same["daemon"].values())
    assert split["app"] == {a} and split["child"] == str(a)
    assert all(m == {b} for m in split["daemon"].values())
    assert free["app"] == app0 and free["daemon"] == daemon0
    # Everything is back as it was.
    assert os.sched_getaffinity(0) == app0 and _thread_masks(daemon.pid) == daemon0
    pinned = {r.params["placement"]: r.sample_details[0].extra.get("pinned") for r in done.results}
    assert pinned["same"] == {
        "placement": "same", "app_cpu": a, "daemon_cpu": a, "daemon_threads": 4,
    }  # fmt: skip
    assert pinned["split"]["daemon_cpu"] == b and pinned["free"]["placement"] == "free"
    assert "app_cpu" not in pinned["free"]  # free pins nothing: it watches where things ran
    assert not any(PARTIAL_FLAG in f for res in done.results for f in res.flags)


@two_cpus
def test_daemon_threads_born_while_pinned_get_the_daemon_mask_back(tmp_path: Path) -> None:
    """libfuse starts worker threads on demand; they inherit the pin and must lose it too."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, "1", "3"], stdin=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdin is not None
        assert wait_until(lambda: len(ProcFS().tids(proc.pid)) >= 2, 10, interval=0.01)
        target = Target("s", str(tmp_path), "fuse", MiB, daemon_pid=proc.pid)
        pinned = pin("same", target)
        assert pinned is not None

        def born() -> set[int]:  # the stand-in starts more threads, from pinned threads
            return set(ProcFS().tids(proc.pid)) - set(pinned.saved)

        assert not born()
        proc.stdin.write("start them\n")  # only now, while it is pinned
        proc.stdin.flush()
        assert wait_until(lambda: len(born()) == 3, 10, interval=0.01), born()
        assert all(os.sched_getaffinity(t) == {CPUS[0]} for t in born())
        pinned.restore()
        assert all(m == set(CPUS) for m in _thread_masks(proc.pid).values())
    finally:
        proc.kill()
        proc.wait()


@two_cpus
def test_a_kernel_driver_pins_the_app_and_says_what_was_not_pinned(tmp_path: Path) -> None:
    wl = Where()
    # Asked for beside another placement (same alone is the default, said in the run's note).
    done = _runner(
        tmp_path, with_placements([wl], ["same", "free"]), ids=("ext4",), kind="kernel", repeat=2
    ).execute()
    assert [s["app"] for s in wl.seen][::2] == [{CPUS[0]}, {CPUS[0]}]
    res = next(r for r in done.results if r.params["placement"] == "same")
    flags = [f for f in res.flags if f.startswith(PARTIAL_FLAG)]
    assert len(flags) == 1, res.flags  # one line for all samples, not one per sample
    assert "kernel driver has no daemon" in flags[0] and "kernel threads" in flags[0]
    assert "(2/2 samples)" in flags[0]
    assert os.sched_getaffinity(0) == set(CPUS)


@two_cpus
def test_pins_are_undone_when_the_timed_run_fails(tmp_path: Path, daemon) -> None:
    class Failing(FakeWorkload):
        def run(self, target: Target) -> Measurement:
            assert os.sched_getaffinity(0) == {CPUS[0]}  # it did run pinned
            raise WorkloadFailed("fake failure: No space left on device")

    masks = _thread_masks(daemon.pid)
    done = _runner(
        tmp_path,
        with_placements([Failing()], ["split"]),
        ids=("s",),
        kind="fuse",
        daemon_pid=daemon.pid,
        repeat=1,
    ).execute()
    assert done.results[0].status == "failed"
    assert os.sched_getaffinity(0) == set(CPUS) and _thread_masks(daemon.pid) == masks


def test_free_pins_nothing(tmp_path: Path, daemon: subprocess.Popen) -> None:
    masks, app = _thread_masks(daemon.pid), os.sched_getaffinity(0)
    assert pin("free", Target("s", str(tmp_path), "kernel", MiB)) is None
    p = pin("free", Target("s", str(tmp_path), "fuse", MiB, daemon_pid=daemon.pid))
    assert p is not None and p.watch is not None and p.saved == {}
    assert _thread_masks(daemon.pid) == masks and os.sched_getaffinity(0) == app
    p.restore()
    assert p.record()["placement"] == "free" and p.flags == []


# -- the wake-up probe ---------------------------------------------------------------------------
def test_wakeup_probe_measures_positive_costs() -> None:
    # (What the probe costs a run is in its schedule's phases, not asserted here.)
    w = wakeup.measure()
    assert w.same_cpu > 0
    if len(CPUS) > 1:
        assert w.cross_cpu is not None and w.cross_cpu > 0 and w.cpus == CPUS[:2]
    else:
        assert w.cross_cpu is None


def test_native_pingpong_batches_and_refuses_bad_arguments() -> None:
    from fsbench._wakeup import pingpong

    batches = pingpong(CPUS[0], CPUS[-1], trips=10, max_batches=5, budget_s=1.0)
    assert len(batches) == 5 and all(b > 0 for b in batches)
    with pytest.raises(ValueError):
        pingpong(0, 0, trips=0)
    with pytest.raises(ValueError):
        pingpong(-1, 0)


def test_wakeup_probe_on_a_cpu_it_may_not_use_is_unavailable_not_a_crash() -> None:
    missing = max(CPUS) + 1 if max(CPUS) + 1 < os.cpu_count() else 1023  # type: ignore[operator]
    if missing in os.sched_getaffinity(0):
        pytest.skip("no CPU this process may not use")
    with pytest.raises(wakeup.WakeupUnavailable, match="could not pin"):
        wakeup.measure(cpus=[missing])


@pytest.mark.parametrize(
    ("same", "cross", "costly", "words"),
    [
        (1.3, 25.0, True, "costly here"),
        (2.0, 3.0, False, "cheap here"),
        (2.0, None, False, "one CPU only"),
    ],
)
def test_wakeup_verdict_follows_the_numbers(
    same: float, cross: float | None, costly: bool, words: str
) -> None:
    w = WakeupCost(same_cpu=same, cross_cpu=cross)
    assert wakeup.is_costly(w) is costly
    assert words in wakeup.verdict(w)
    if cross is not None:
        assert f"{cross:.1f} µs across CPUs" in wakeup.verdict(w)


def test_doctor_reports_wakeups_with_their_verdict() -> None:
    from fsbench import environment as env

    w, why = env.measure_wakeups()
    d = env.doctor_wakeups(w, why)
    assert d["measured"] is True and d["same_cpu"] > 0
    assert set(d) >= {"same_cpu", "cross_cpu", "ratio", "costly", "verdict", "method", "cpus"}
    assert isinstance(d["costly"], bool) and d["verdict"]
    missing = env.doctor_wakeups(None, "native module not built")
    assert missing == {"measured": False, "reason": "native module not built"}
    assert env.wakeup_notes(None, "why") == ["wake-up cost not measured: why"]
    assert env.wakeup_notes(WakeupCost(same_cpu=2.0, cross_cpu=3.0), None) == []
    assert "costly" in env.wakeup_notes(WakeupCost(same_cpu=1.0, cross_cpu=30.0), None)[0]


def test_the_environment_records_the_wakeup_costs_and_old_runs_still_load() -> None:
    env = Environment(wakeup_us=WakeupCost(same_cpu=1.3, cross_cpu=25.0, cpus=[0, 1]))
    back = Run.model_validate_json(
        Run(run_id="r", started="t", environment=env).to_json()
    ).environment
    assert back.wakeup_us is not None and back.wakeup_us.cross_cpu == 25.0
    old = Run.model_validate({"schema_version": 1, "run_id": "r", "started": "t"})
    assert old.environment.wakeup_us is None and schema.SCHEMA_VERSION > 1


def test_the_wakeup_cost_is_measured_again_after_the_last_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fsbench import environment as env

    e = Environment(wakeup_us=WakeupCost(same_cpu=1.3, cross_cpu=279.0))
    monkeypatch.setattr(
        env, "measure_wakeups", lambda: (WakeupCost(same_cpu=1.2, cross_cpu=25.0), None)
    )
    env.remeasure_wakeups(e)
    assert e.wakeup_us is not None
    assert (e.wakeup_us.same_cpu_end, e.wakeup_us.cross_cpu_end) == (1.2, 25.0)
    assert e.wakeup_us.cross_cpu == 279.0  # the start's figure is kept beside it
    page = render_html(Run(run_id="r", started="t", environment=e))
    assert "1.3 µs on one CPU, 279 µs across CPUs at the start; 1.2 µs and 25 µs after" in page
    assert "uses the end&#39;s, the calmer" in page
    # Not measured at the start (a guest, or unavailable): none at the end either.
    none = Environment()
    env.remeasure_wakeups(none)
    assert none.wakeup_us is None


# -- reporting -------------------------------------------------------------------------------
def _placed_run() -> Run:
    r = run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), placement="same"),
            result("ntfs-3g", [140.0, 145.0, 150.0], fuse_trace(seconds=7.0), placement="same"),
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), placement="free"),
            result("ntfs-3g", [38.0, 40.0, 41.0], fuse_trace(seconds=26.0), placement="free"),
        ]
    )
    r.environment.wakeup_us = WakeupCost(same_cpu=1.3, cross_cpu=25.0)
    return r


def test_table_titles_and_html_name_the_placement() -> None:
    con = Console(width=120, record=True, color_system=None)
    render(_placed_run(), con)
    out = con.export_text()
    assert "seq-write/fsync [same]  (bs=1M, app and daemon on one CPU)" in out
    assert "seq-write/fsync [free]  (bs=1M, nothing pinned)" in out
    # A baseline hears about its other placements only when they differ significantly.
    lines = [ln.strip() for ln in out.splitlines()]
    assert not any(ln.startswith(("ext4 [same]:", "ext4:")) for ln in lines)
    page = render_html(_placed_run())
    assert "seq-write/fsync [same]" in page and "app and daemon on one CPU" in page
    assert "1.3 µs on one CPU, 25 µs across CPUs (19.2×)" in page


def test_a_lone_subject_still_hears_about_its_other_placement() -> None:
    r = _placed_run()
    r.results = [x for x in r.results if x.subject == "ntfs-3g"]
    r.subjects = [s for s in r.subjects if s.id == "ntfs-3g"]
    con = Console(width=100, record=True, color_system=None)
    render(r, con)
    out = con.export_text()
    assert "ntfs-3g [same]: unpinned 3.6" in out and "× slower" in out
    assert "ntfs-3g: on one CPU 3.6" in out and "× faster" in out


def test_diff_matches_an_unpinned_result_with_one_from_a_run_without_placements() -> None:
    free = result("ntfs-3g", [40.0], None, placement="free")
    plain = result("ntfs-3g", [40.0], None)
    same = result("ntfs-3g", [40.0], None, placement="same")
    assert match_key(free) == match_key(plain) != match_key(same)


def test_diff_says_when_one_machine_had_costly_cross_cpu_wakeups() -> None:
    a, b = _placed_run(), _placed_run()
    assert not [d for d in environment_differences(a, b) if "wake" in d.what]
    b.environment.wakeup_us = WakeupCost(same_cpu=1.5, cross_cpu=26.0)  # µs move: not said
    assert not [d for d in environment_differences(a, b) if "wake" in d.what]
    b.environment.wakeup_us = WakeupCost(same_cpu=1.5, cross_cpu=2.0)
    (d,) = [d for d in environment_differences(a, b) if "wake" in d.what]
    assert (d.what, d.a, d.b, d.matters) == ("cross-CPU wake-ups", "costly", "cheap", False)


def test_iozone_matrix_cells_of_two_placements_stay_apart() -> None:
    from fsbench.report.model.grouping import MATRIX_WORKLOAD, groups

    cells = []
    for place, value in (("same", 300.0), ("free", 70.0)):
        r = result("ntfs-3g", [value, value + 1, value - 1], None, placement=place)
        r.workload = MATRIX_WORKLOAD
        r.params.update(op="write", file_size=MiB, record_size=64 * 1024)
        cells.append(r)
    gs = [g for g in groups(run(cells, subjects=("ntfs-3g",))) if g.matrix]
    assert sorted(g.label for g in gs) == ["write@free", "write@same"]
    assert {g.label: next(iter(g.cells.values()))["ntfs-3g"].median for g in gs} == {
        "write@same": 300.0,
        "write@free": 70.0,
    }
