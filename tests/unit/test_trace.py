"""Kernel trace probes without a kernel: script assembly from the probe records, availability
from a canned tracefs events directory, parsing real bpftrace output (captured on ntfs-3g),
the traced run beside (never inside) the timed samples, and a run that goes on with a probe
unavailable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from usdt_fixtures import libfuse_daemon

from fsbench.lab import state
from fsbench.probes import processes
from fsbench.probes import trace as T
from fsbench.records.schema import Run, Subject
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload
from polling import wait_until

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURE = FIXTURES / "bpftrace_ntfs3g.jsonl"  # one sample: dd 8 MiB conv=fsync, cold cat
KEYS = json.loads((FIXTURES / "bpftrace_ntfs3g.keys.json").read_text())
ALL_OK = dict.fromkeys(T.PROBE_NAMES, "ok")  # libfuse's USDT probe: with a daemon carrying it


def _keys(app: tuple[str, ...] = ("dd", "cat")) -> T.SubjectKeys:
    return T.SubjectKeys(
        fuse_connection=KEYS["connection"],
        block_devs=(KEYS["block_dev"],),
        sb_devs=(KEYS["connection"],),
        bdis=tuple(KEYS["bdis"]),
        comms={"app": app, "driver": ("ntfs-3g",)},
    )


# -- script ---------------------------------------------------------------------------------------
def test_script_is_assembled_from_the_given_probe_records_only() -> None:
    probes = [p for p in T.PROBES if p.name != "sched"]
    script = T.build_script(probes, 4242)
    assert "tracepoint:fuse:fuse_request_send" in script
    assert "tracepoint:block:block_rq_complete" in script
    assert "sched_wakeup" not in script and "@sched_" not in script
    # Markers only from fsbench's own pid; the begin clears every result map, the end prints
    # them. The in-flight bookkeeping is neither printed nor cleared from user space (a clear
    # racing an event's delete ends bpftrace 0.17).
    begin, end = (ln for ln in script.splitlines() if "sys_enter_close" in ln)
    assert "pid == 4242" in begin and "pid == 4242" in end
    for p in probes:
        for m in p.maps:
            assert f"clear(@{m});" in begin and f"print(@{m});" in end
        for m in p.scratch:
            assert f"@{m}" not in begin and f"@{m}" not in end
            assert f"clear(@{m})" not in script and f"delete(@{m}[" in script
    assert f"args->fd >= {T.MARK_BEGIN}" in begin and "fsbench-begin" in begin
    assert f"args->fd >= {T.MARK_END}" in end and "fsbench-end" in end


def _events(tmp_path: Path, missing: str | None) -> Path:
    events = tmp_path / "events"
    for tp in [T.MARKER_TRACEPOINT, *(tp for p in T.PROBES for tp in p.tracepoints)]:
        if tp != missing:
            (events / tp).mkdir(parents=True, exist_ok=True)
            (events / tp / "format").write_text("name: x\n")
    return events


def test_a_missing_tracepoint_makes_only_its_probe_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(T.os, "geteuid", lambda: 0)
    monkeypatch.setattr(T.shutil, "which", lambda _n: "/usr/bin/bpftrace")
    daemon = (str(libfuse_daemon(tmp_path / "passthrough_hp")),)
    status = T.availability(_events(tmp_path, "block/block_rq_complete"), T.PROBE_NAMES, daemon)
    assert status["block"] == "tracepoint block/block_rq_complete missing on this kernel"
    assert {k: v for k, v in status.items() if k != "block"} == dict.fromkeys(
        [n for n in T.PROBE_NAMES if n != "block"], "ok"
    )
    # Without the marker tracepoint no sample can be delimited: every probe says so.
    status = T.availability(_events(tmp_path / "b", T.MARKER_TRACEPOINT))
    assert all("sys_enter_close" in v for v in status.values())


def test_every_probe_is_on_by_default_and_trace_probes_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(T.os, "geteuid", lambda: 0)
    monkeypatch.setattr(T.shutil, "which", lambda _n: "/usr/bin/bpftrace")
    events = _events(tmp_path, None)
    # Even sched: the probes only run in the untimed traced run, so they cost no sample.
    daemon = (str(libfuse_daemon(tmp_path / "passthrough_hp")),)
    assert T.availability(events, daemons=daemon) == ALL_OK
    assert set(T.DEFAULT_PROBES) == set(T.PROBE_NAMES)
    asked = T.availability(events, ("fuse", "sched"))
    assert asked["sched"] == "ok" and asked["fuse"] == "ok"
    assert asked["block"] == "off (not in --trace-probes)"
    # The bpftrace program holds only what is "ok".
    script = T.build_script([p for p in T.PROBES if asked[p.name] == "ok"], 1)
    assert "sched_wakeup" in script and "fuse_request_send" in script
    assert "block_rq_complete" not in script


def test_not_root_or_no_bpftrace_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(T.os, "geteuid", lambda: 1000)
    assert set(T.availability().values()) == {"needs root"}
    monkeypatch.setattr(T.os, "geteuid", lambda: 0)
    monkeypatch.setattr(T.shutil, "which", lambda _n: None)
    assert all("bpftrace is not installed" in v for v in T.availability().values())


# -- parsing real output --------------------------------------------------------------------------
def test_real_bpftrace_output_becomes_the_trace_shape() -> None:
    maps = T.parse_maps(CAPTURE.read_text().splitlines())
    work = {"bytes": 8 * 2**20, "ops": 0, "seconds": 0.5}
    t = T.to_trace(maps, _keys(), ALL_OK, work)
    assert t["probes"] == ALL_OK and t["work"] == work
    fuse = t["fuse"]
    # dd wrote 8 MiB through ntfs-3g (no big_writes): 2048 WRITE requests of 4 KiB.
    assert fuse["size_hist"]["WRITE"] == {"4096": 2048}
    assert fuse["bytes"]["WRITE"] == 8 * 2**20
    assert fuse["requests"]["WRITE"] == 2048
    # ... and the cold cat read it back in READ requests, payload bytes without the header.
    assert fuse["bytes"]["READ"] == 8 * 2**20
    lat = fuse["latency_us"]["WRITE"]
    assert 0 < lat["p50"] <= lat["p99"] and lat["total"] > 0
    assert sum(fuse["latency_hist_us"]["WRITE"].values()) == 2048
    assert t["block"]["requests"]["write"] > 0 and t["block"]["requests"]["read"] > 0
    assert t["sched"]["wakeups"]["driver"] > 0
    assert set(t["writeback"]) == {"balance_dirty_pages", "pause_ms", "pages_written"}
    assert t["readahead"]["count"] == sum(t["readahead"]["windows"].values())


def test_fuse_latency_is_scaled_by_the_requests_actually_timed() -> None:
    """Opcodes that alternate (GETXATTR, WRITE, ...) are not each timed 1 in 8: the floor had
    39 of its 409 WRITEs timed. The mean is the timed requests' mean, not 8 x sum / all."""
    conn = 54
    maps = {
        "fuse_n": {f"{conn},16": 409, f"{conn},22": 409},
        "fuse_latsum": {f"{conn},16": 39 * 8_000_000, f"{conn},22": 60 * 500_000},
        "fuse_latn": {f"{conn},16": 39, f"{conn},22": 60},
        "fuse_lat": {f"{conn},16": {4096: 39}},
    }
    t = T.to_trace(maps, T.SubjectKeys(fuse_connection=conn), {"fuse": "ok"}, {})
    lat = t["fuse"]["latency_us"]
    assert lat["WRITE"]["total"] / 409 == pytest.approx(8000.0)
    assert lat["GETXATTR"]["total"] / 409 == pytest.approx(500.0)
    assert sum(t["fuse"]["latency_hist_us"]["WRITE"].values()) == pytest.approx(409)
    # A capture without the timed counts (older bpftrace scripts) keeps the 1-in-8 scale.
    del maps["fuse_latn"]
    old = T.to_trace(maps, T.SubjectKeys(fuse_connection=conn), {"fuse": "ok"}, {})
    assert old["fuse"]["latency_us"]["WRITE"]["total"] == pytest.approx(39 * 8 * 8000.0)


def test_another_subjects_keys_see_nothing_of_this_one() -> None:
    maps = T.parse_maps(CAPTURE.read_text().splitlines())
    other = T.SubjectKeys(fuse_connection=1, block_devs=(2,), sb_devs=(2,), bdis=("9:9",))
    t = T.to_trace(maps, other, ALL_OK, {})
    assert t["fuse"]["requests"] == {} and t["block"]["requests"] == {"read": 0, "write": 0}
    assert t["readahead"]["count"] == 0 and t["writeback"]["pages_written"] == 0


def test_percentile_interpolates_inside_the_log2_bucket() -> None:
    # 100 events in [32, 64): the median is half way, p99 near the top.
    assert T.hist_percentile({32: 100}, 0.5) == 48
    assert T.hist_percentile({32: 100}, 0.99) == pytest.approx(63.68)
    assert T.hist_percentile({4: 50, 1024: 50}, 0.5) == 8  # the top of the first bucket
    assert T.hist_percentile({}, 0.5) is None


# -- merging --------------------------------------------------------------------------------------
def _t(n: int, lat_bucket: int, probes: dict[str, str] | None = None) -> dict[str, Any]:
    fuse = {
        "requests": {"WRITE": n},
        "bytes": {"WRITE": n * 4096},
        "size_hist": {"WRITE": {"4096": n}},
        "latency_hist_us": {"WRITE": {str(lat_bucket): n}},
        "latency_us": {"WRITE": {"total": n * lat_bucket * 1.5}},
    }
    T._percentiles(fuse)
    return {
        "probes": probes or dict(ALL_OK),
        "fuse": fuse,
        "sched": {"wakeups": {"app": n, "driver": 2 * n}},
        "work": {"bytes": n * 4096, "ops": 0, "seconds": 1.0},
    }


# -- the run goes on ------------------------------------------------------------------------------
class CannedTracer(T.Tracer):
    """A Tracer whose bpftrace is the captured output: no kernel, and a log of its calls."""

    def __init__(self, status: dict[str, str], log: list[str] | None = None) -> None:
        super().__init__(status)
        self.log = [] if log is None else log
        self.begins = self.ends = 0
        self.attached = self.launched = False

    @property
    def active(self) -> bool:
        return self.attached

    def launch(self) -> None:
        if not self.launched:  # as bpftrace: one at a time
            self.log.append("launch")  # compiling: nothing attached yet
            self.launched = True

    def ready(self) -> None:
        if not self.attached and self.log[-1:] != ["ready"]:
            self.log.append("ready")
            self.attached = True

    def begin(self) -> None:
        self.log.append("begin")
        self.begins += 1

    def end(self) -> dict[str, dict[str, Any]] | None:
        self.log.append("end")
        self.ends += 1
        return T.parse_maps(CAPTURE.read_text().splitlines())

    def kill(self) -> None:
        if self.attached:
            self.log.append("kill")  # dying: its probes stay attached until reaped
            self.dying, self.attached, self.launched = True, False, False

    def reap(self) -> None:
        if getattr(self, "dying", False):
            self.log.append("reap")
            self.dying = False

    @property
    def probes_attached(self) -> bool:
        return self.attached or getattr(self, "dying", False)


def _fake_target(tmp_path: Path) -> AlwaysMounted:
    return AlwaysMounted(
        Subject(id="s", driver="fake", fs="fake", kind="fake"),
        Target("s", str(tmp_path), "fake", 64 * 2**20),
    )


def test_run_goes_on_with_an_unavailable_probe_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(T, "subject_keys", lambda *_a, **_k: _keys())
    why = "tracepoint block/block_rq_complete missing on this kernel"
    tracer = CannedTracer({**ALL_OK, "block": why})
    run = Run(run_id="t", started="2025-01-01T00:00:00")
    Runner(
        run, [_fake_target(tmp_path)], [FakeWorkload(warmup=1)], repeat=2, tracer=tracer
    ).execute()
    (res,) = run.results
    assert res.status == "ok" and len(res.samples) == 2
    assert res.trace is not None and res.trace["probes"]["block"] == why
    assert "block" not in res.trace and res.trace["fuse"]["requests"]["WRITE"] == 2048


@pytest.mark.parametrize(
    ("warmup", "expected"),
    [
        # The last warm-up run is the traced one. bpftrace is launched before the warm-up pass
        # (its compile overlaps the untimed steps), attached before the traced run, killed
        # after the pass and gone before the first timed sample runs (its exit overlaps that
        # sample's preparation).
        (2, "launch prep run prep ready begin run:traced end kill prep reap run prep run"),
        (1, "launch prep ready begin run:traced end kill prep reap run prep run"),
    ],
)
def test_no_timed_sample_is_traced_only_the_last_warm_up_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warmup: int, expected: str
) -> None:
    monkeypatch.setattr(T, "subject_keys", lambda *_a, **_k: _keys())
    # The traced run is always the second-to-last value before the samples' 100s.
    values = {2: "50,80,100,100", 1: "80,100,100"}[warmup]
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", f"s={values}")
    log: list[str] = []
    tracer = CannedTracer(dict(ALL_OK), log)
    wl = FakeWorkload(warmup=warmup)
    real_run = wl.run

    def run(target: Target) -> Any:
        # Which probes were attached while this run went: none but the traced run's.
        log.append("run:traced" if tracer.probes_attached else "run")
        return real_run(target)

    monkeypatch.setattr(wl, "run", run)
    real_prepare = wl.prepare

    def prepare(target: Target) -> None:
        log.append("prep")
        real_prepare(target)

    monkeypatch.setattr(wl, "prepare", prepare)
    run_ = Run(run_id="t", started="2025-01-01T00:00:00")
    Runner(run_, [_fake_target(tmp_path)], [wl], repeat=2, tracer=tracer).execute()
    (res,) = run_.results
    assert log == expected.split()
    # The samples are the runs after it; the traced run's own rate (80) is kept beside the
    # trace, where the probes' (and a first run's) cost on this subject shows.
    assert res.samples == [100.0, 100.0]
    assert all(d.trace is None for d in res.sample_details)
    assert res.trace is not None and res.trace["value"] == 80.0
    assert res.trace["work"]["bytes"] == 64 * 2**20


def test_one_bpftrace_serves_every_subjects_traced_run_before_the_first_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up pass: each subject's traced run in turn under one bpftrace (a compile and
    an exit cost ~2.2 s; one per traced run was 12 % of the default comparison), killed and
    reaped before the first timed run; every result gets its own trace."""
    monkeypatch.setattr(T, "subject_keys", lambda *_a, **_k: _keys())
    log: list[str] = []
    tracer = CannedTracer(dict(ALL_OK), log)
    wl = FakeWorkload(warmup=1)
    real_run = wl.run

    def run(target: Target) -> Any:
        log.append(f"{target.workdir[-1]}:{'traced' if tracer.probes_attached else 'timed'}")
        return real_run(target)

    monkeypatch.setattr(wl, "run", run)
    targets = []
    for sid in ("a", "b"):
        (tmp_path / sid).mkdir()
        targets.append(
            AlwaysMounted(
                Subject(id=sid, driver="fake", fs="fake", kind="fake"),
                Target(sid, str(tmp_path / sid), "fake", 64 * 2**20),
            )
        )
    run_ = Run(run_id="t", started="2025-01-01T00:00:00")
    Runner(run_, targets, [wl], repeat=2, tracer=tracer).execute()
    pass_ = "launch ready begin a:traced end begin b:traced end kill"
    assert " ".join(log) == f"{pass_} reap a:timed b:timed a:timed b:timed"
    assert all(r.trace is not None and r.trace["fuse"] for r in run_.results)


def test_no_warm_up_means_no_traced_run_and_the_result_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "tracepoint block/block_rq_complete missing on this kernel"
    tracer = CannedTracer({**ALL_OK, "block": why})
    run = Run(run_id="t", started="2025-01-01T00:00:00")
    wl = FakeWorkload(warmup=0)
    Runner(run, [_fake_target(tmp_path)], [wl], repeat=2, tracer=tracer).execute()
    (res,) = run.results
    assert tracer.log == []  # no bpftrace started: matrix cells would pay ~2 s each
    assert len(res.samples) == 2 and [p for p, _ in wl.calls].count("run") == 2
    assert res.trace is not None and "fuse" not in res.trace
    assert res.trace["probes"]["fuse"].startswith("not traced: the traced run is the last warm")
    assert res.trace["probes"]["block"] == why  # an unavailable probe keeps its own reason


def test_a_tracer_that_failed_is_not_launched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = CannedTracer(dict.fromkeys(T.PROBE_NAMES, "bpftrace stopped: lost"))
    run = Run(run_id="t", started="2025-01-01T00:00:00")
    Runner(
        run, [_fake_target(tmp_path)], [FakeWorkload(warmup=1)], repeat=2, tracer=tracer
    ).execute()
    assert tracer.log == [] and run.results[0].trace is None
    assert len(run.results[0].samples) == 2


def test_untraced_run_has_no_trace(tmp_path: Path) -> None:
    target = AlwaysMounted(
        Subject(id="s", driver="fake", fs="fake", kind="fake"),
        Target("s", str(tmp_path), "fake", 64 * 2**20),
    )
    run = Run(run_id="t", started="2025-01-01T00:00:00")
    Runner(run, [target], [FakeWorkload()], repeat=1, warmup=0).execute()
    assert run.results[0].trace is None and run.results[0].sample_details[0].trace is None


def test_a_tracer_with_no_available_probe_starts_nothing() -> None:
    tracer = T.Tracer(dict.fromkeys(T.PROBE_NAMES, "needs root"))
    tracer.start()
    assert tracer.proc is None and not tracer.active
    tracer.begin()
    assert tracer.end() is None


# -- release stops a recorded trace ---------------------------------------------------------------
def test_release_stops_the_recorded_tracer_and_only_that_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path)
    # Dies of SIGINT as bpftrace does (a sleep keeps the SIGINT the test runner may ignore, and
    # release would wait its grace for SIGKILL).
    dies = "import signal, time; signal.signal(2, signal.SIG_DFL); time.sleep(60)"
    ours = subprocess.Popen([sys.executable, "-c", dies])
    other = subprocess.Popen(["sleep", "60"])
    try:
        rec = state.StateRecord("r", 0, "", "")
        rec.tracers = [
            [ours.pid, processes.start_time(ours.pid)],
            [other.pid, processes.start_time(other.pid) + 1],  # a reused pid: not ours
        ]
        rec.save()
        loaded = state.StateRecord.load(Path(rec.path))
        assert loaded.tracers == rec.tracers
        notes = state.release(loaded)
        assert ours.wait(timeout=5) is not None
        assert f"stopped bpftrace {ours.pid}" in notes
        # Not stopped a little later either (a kill would have landed by then).
        assert not wait_until(lambda: other.poll() is not None, 0.2)
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_bpftrace_failing_to_start_marks_every_probe_with_its_first_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bpftrace"
    fake.write_text(
        "#!/bin/sh\necho 'WARNING: harmless' >&2\n"
        "echo 'stdin:12:3-9: ERROR: Unknown tracepoint' >&2\necho 'second' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    started: list[int] = []
    tracer = T.Tracer(dict(ALL_OK), on_started=started.append, attach_timeout=10)
    tracer.start()
    assert started and started[0] > 0  # recorded before waiting for it to attach
    assert set(tracer.status.values()) == {
        "bpftrace stopped: stdin:12:3-9: ERROR: Unknown tracepoint"
    }
    assert not tracer.active and tracer.end() is None
