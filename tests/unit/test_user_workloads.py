"""The user's own workloads without root: fio job files (parsing, phases, the checks before
anything is formatted, fio's JSON per phase) and commands (the checks, the process group,
timeouts, signals, exit status, input copy, setup/prepare/cleanup order)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.pipeline import definitions
from fsbench.records.schema import SCHEMA_VERSION, Run, Subject
from fsbench.registry import resolve_workloads
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads import command as cmdmod
from fsbench.workloads import fiofile
from fsbench.workloads.base import Target

FIX = Path(__file__).parent / "fixtures" / "fio"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


# -- job files -------------------------------------------------------------------------------
def test_tiobench_example_is_four_stonewalled_phases_with_the_globals_folded_in() -> None:
    job = fiofile.read_job_file(str(FIX / "tiobench-example.fio"), env={})
    assert [s.name for s in job.sections] == ["f1", "f2", "f3", "f4"]
    assert [[s.name for s in p] for p in job.phases] == [["f1"], ["f2"], ["f3"], ["f4"]]
    f3 = job.sections[2]
    # The inline comment after numjobs is not part of the value (fio strips it too).
    assert f3.effective["numjobs"] == "4" and f3.effective["size"] == "512m"
    assert f3.options == {"stonewall": "", "rw": "read"} and f3.reads_only
    assert not job.sections[1].reads_only  # randwrite


def test_sections_without_stonewall_share_a_phase_and_wait_for_joins_its_waitee() -> None:
    job = fiofile.read_job_file(str(FIX / "waitfor.fio"), env={})
    # wait_for is resolved inside one fio process: splitting would make fio refuse the waiter.
    assert [[s.name for s in p] for p in job.phases] == [
        ["writers", "readers", "writers2", "readers2"]
    ]


def test_wait_for_across_a_stonewall_pulls_the_phases_together(tmp_path: Path) -> None:
    f = tmp_path / "j.fio"
    f.write_text("[a]\nrw=write\n[b]\nstonewall\nrw=read\n[c]\nstonewall\nwait_for=a\nrw=read\n")
    job = fiofile.read_job_file(str(f), env={})
    assert [[s.name for s in p] for p in job.phases] == [["a", "b", "c"]]


def test_include_and_env_are_expanded_and_recorded() -> None:
    job = fiofile.read_job_file(str(FIX / "tiobench-small.fio"), env={"TIOBENCH_SIZE": "2m"})
    f1 = job.sections[0]
    assert f1.effective["size"] == "2m" and f1.effective["bsrange"] == "4k-4k"
    assert job.env == {"TIOBENCH_SIZE": "2m"}
    assert job.includes == {"tiobench-io.fio": (FIX / "tiobench-io.fio").read_text()}
    assert len(job.phases) == 4


@pytest.mark.parametrize(
    ("fixture", "env", "message"),
    [
        ("dev-sda.fio", {}, "filename=/dev/sda (dev-sda.fio line 8, section [wipe])"),
        (
            "ssd-test.fio",
            {},
            "directory=/mount-point-of-ssd (ssd-test.fio line 20, section [global])",
        ),
        ("basic-verify.fio", {}, "filename=/dev/XXX (basic-verify.fio line 12"),
        ("escape.fio", {"ESCAPE_DIR": "../.."}, "directory=../.. (escape.fio line 3"),
        ("escape.fio", {"ESCAPE_DIR": "/etc"}, "directory=/etc"),
    ],
)
def test_a_path_outside_the_mount_is_refused_with_its_line_and_section(
    fixture: str, env: dict[str, str], message: str
) -> None:
    job = fiofile.read_job_file(str(FIX / fixture), env=env)
    with pytest.raises(UsageError, match="outside the subject's mount") as e:
        fiofile.check_paths(job, fixture)
    assert message in str(e.value)


def test_relative_names_stay_inside_and_are_accepted(tmp_path: Path) -> None:
    f = tmp_path / "ok.fio"
    f.write_text("[a]\nfilename=data/one:two\\:x\ndirectory=sub\nrw=write\n")
    job = fiofile.read_job_file(str(f), env={})
    fiofile.check_paths(job, "ok.fio")  # accepted: no UsageError
    # What was accepted is what fio will be given, relative to the mount.
    (section,) = job.sections
    assert section.effective["filename"] == "data/one:two\\:x"
    assert fiofile.directories(job.sections) == ["sub"]


def test_spec_parameters() -> None:
    assert fiofile.parse_spec("fio:a/b.fio") == ("a/b.fio", "none")
    assert fiofile.parse_spec("fio:a/b.fio:cache=cold") == ("a/b.fio", "cold")
    with pytest.raises(UsageError, match="cache=cold"):
        fiofile.parse_spec("fio:b.fio:cache=warm")
    with pytest.raises(UsageError, match="give a job file"):
        fiofile.parse_spec("fio:")


@needs_fio
def test_a_job_fio_rejects_is_refused_with_fios_words() -> None:
    with pytest.raises(UsageError, match=r"fio refuses the job file: failed parsing rw=bogus"):
        resolve_workloads(f"fio:{FIX / 'rejected.fio'}", None)


@needs_fio
def test_resolved_phases_are_workloads_with_cold_only_where_they_only_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIOBENCH_SIZE", "2m")
    wls = resolve_workloads(f"fio:{FIX / 'tiobench-small.fio'}:cache=cold", None)
    assert [w.id for w in wls] == [f"fio:tiobench-small/f{i}" for i in (1, 2, 3, 4)]
    assert [w.cache for w in wls] == ["none", "none", "cold", "cold"]
    p = wls[2].params(Target("s", "/x", "kernel", 0))
    assert p["options"]["f3"]["numjobs"] == "4" and p["cache"] == "cold"
    assert wls[0].params(Target("s", "/x", "kernel", 0))["cache"] == "none (cold asked)"
    # One definition for the four phases: the text, includes, env and every section.
    (d,) = definitions(wls)
    assert d["kind"] == "fio-file" and d["env"] == {"TIOBENCH_SIZE": "2m"}
    assert d["text"] == (FIX / "tiobench-small.fio").read_text()
    assert [s["name"] for s in d["sections"]] == ["f1", "f2", "f3", "f4"]


def _job(name: str, group: int, runtime_ms: int, **dirs: tuple[int, int]) -> dict:
    job: dict = {"jobname": name, "groupid": group, "error": 0, "job_runtime": runtime_ms}
    for d, (nbytes, ios) in dirs.items():
        job[d] = {
            "io_bytes": nbytes,
            "total_ios": ios,
            "iops": ios / max(runtime_ms / 1000, 1e-3),
            "runtime": runtime_ms,
            "clat_ns": {"mean": 2000.0, "percentile": {"50.000000": 1000, "99.000000": 9000}},
        }
    return job


def test_phase_figures_sum_bytes_over_the_longest_job_and_keep_each_job() -> None:
    doc = {
        "jobs": [_job("a", 0, 500, write=(4 << 20, 1024)), _job("b", 0, 1000, read=(8 << 20, 2048))]
    }
    out = fiofile.phase_figures(doc)
    assert out["bytes"] == 12 << 20 and out["seconds"] == 1.0 and out["ios"] == 3072
    assert [j["job"] for j in out["jobs"]] == ["a", "b"]
    assert "lat_us" not in out  # two jobs' percentiles cannot be merged
    one = fiofile.phase_figures({"jobs": [_job("a", 0, 500, read=(1 << 20, 256))]})
    assert one["lat_us"] == {"p50": 1.0, "p99": 9.0} and one["iops"] == 512


def test_phase_figures_of_a_wait_for_chain_add_the_groups_times() -> None:
    doc = {"jobs": [_job("w", 0, 400, write=(1 << 20, 8)), _job("r", 1, 600, read=(1 << 20, 8))]}
    assert fiofile.phase_figures(doc, serial=True)["seconds"] == 1.0
    assert fiofile.phase_figures(doc)["seconds"] == 0.6


def test_phase_figures_refuse_zero_time_and_job_errors() -> None:
    with pytest.raises(WorkloadFailed, match="0 ms"):
        fiofile.phase_figures({"jobs": [_job("a", 0, 0, write=(4096, 1))]})
    bad = _job("a", 0, 10, write=(4096, 1))
    bad["error"] = 28
    with pytest.raises(WorkloadFailed, match="No space left"):
        fiofile.phase_figures({"jobs": [bad]})


@needs_fio
def test_a_phase_runs_in_the_target_and_fio_reports_its_options(tmp_path: Path) -> None:
    f = tmp_path / "two.fio"
    # fio refuses a directory that does not exist: fsbench makes it, in the check and the mount.
    f.write_text(
        "[global]\nsize=1m\nbs=64k\ndirectory=d/deep\n"
        "[w]\nrw=write\n[r]\nstonewall\nrw=read\nfilename=w.0.0\n"
    )
    w, r = resolve_workloads(f"fio:{f}", None)
    target = Target("dir", str(tmp_path / "work"), "directory", 0)
    w.prepare(target)
    m = w.run(target)
    assert m.bytes == 1 << 20 and os.path.getsize(tmp_path / "work/d/deep/w.0.0") == 1 << 20
    r.prepare(target)
    assert r.run(target).bytes == 1 << 20
    d = w.definition()
    # fsbench's one addition: the total latency's percentiles (workloads/fiojson.py).
    assert d["sections"][1]["reported_by_fio"] == {
        "lat_percentiles": "1",
        "size": "1m",
        "bs": "64k",
        "directory": "d/deep",
        "rw": "read",
        "filename": "w.0.0",
    }


# -- commands: the checks before anything is formatted ----------------------------------------
def test_command_checks(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no-such-program-xyz: command not found"):
        cmdmod.build("no-such-program-xyz --x", None, None, None, None, None, None)
    with pytest.raises(UsageError, match="--input /nonexistent: no such directory"):
        cmdmod.build("true", None, None, None, Path("/nonexistent"), None, None)
    with pytest.raises(UsageError, match="--as-user no-such-user-xyz: no such user"):
        cmdmod.build("true", None, None, None, None, None, "no-such-user-xyz")
    with pytest.raises(UsageError, match="--prepare 'nope-xyz'"):
        cmdmod.build("true", "nope-xyz", None, None, None, None, None)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.sh").write_text("#!/bin/sh\n")
    inp = cmdmod.check_input(tmp_path / "src")
    cmdmod.check_program("--command", "./src/run.sh", inp)  # found in the input tree
    cmdmod.check_program("--command", "CC=gcc make -C src", inp)
    cmdmod.check_program("--command", "cd src && make", inp)
    with pytest.raises(UsageError, match="no such program"):
        cmdmod.check_program("--command", "./src/missing.sh", inp)


# -- commands: running -----------------------------------------------------------------------
def _alive(marker: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if any(marker in a for a in cmdline):
            out.append(p.pid)
    return out


def test_a_command_past_its_timeout_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    marker = f"{time.time_ns() % 10**6 + 1000}.5"  # a unique sleep length, to find leftovers
    t0 = time.monotonic()
    with pytest.raises(WorkloadFailed, match=r"did not finish within 1 s \(--timeout\)"):
        cmdmod.run_shell(f"sleep {marker} & sleep {marker}; true", str(tmp_path), 1.0)
    assert time.monotonic() - t0 < 30
    assert _alive(marker) == []


def test_exit_status_signal_and_leftovers(tmp_path: Path) -> None:
    got = cmdmod.run_shell("echo one >&2; echo why it failed >&2; exit 3", str(tmp_path), 30)
    assert got.failure() == "exit status 3: one | why it failed"
    got = cmdmod.run_shell("kill -SEGV $$", str(tmp_path), 30)
    assert got.failure() == "killed by signal SIGSEGV"
    got = cmdmod.run_shell("sh -c 'kill -KILL $$'; exit $?", str(tmp_path), 30)
    assert "signal SIGKILL" in (got.failure() or "")
    got = cmdmod.run_shell("no-such-program-xyz", str(tmp_path), 30)
    assert (got.failure() or "").startswith("exit status 127 (command not found)")
    marker = f"{time.time_ns() % 10**6 + 2000}.5"
    got = cmdmod.run_shell(f"sleep {marker} > /dev/null 2>&1 &", str(tmp_path), 30)
    assert got.failure() is None and got.leftovers == 1
    assert _alive(marker) == []


def test_a_command_workload_copies_its_input_and_runs_each_step_in_order(tmp_path: Path) -> None:
    src = tmp_path / "proj"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("hello\n")
    os.symlink("sub/a.txt", src / "link")
    log = tmp_path / "log"
    wl = cmdmod.build(
        f"cat proj/sub/a.txt >> {log}; echo run >> {log}",
        f"echo prepare >> {log}",
        f"echo setup >> {log}",
        f"echo cleanup >> {log}",
        src,
        30,
        None,
    )
    work = tmp_path / "mnt" / "fsbench"
    target = Target("s1", str(work), "directory", 0)
    for _ in range(2):
        wl.prepare(target)
        m = wl.run(target)
        assert m.seconds > 0 and m.value == m.seconds and m.ops == 1
    wl.close()
    assert log.read_text().split() == [
        *("setup", "prepare", "hello", "run", "prepare", "hello", "run", "cleanup"),
    ]
    assert os.readlink(work / "proj" / "link") == "sub/a.txt"
    d = wl.definition()
    assert d["input"]["files"] == 1 and d["cleanup_outcome"] == {"s1": "ok"}
    assert d["command"].startswith("cat proj/sub/a.txt")


def test_a_failing_command_fails_the_sample_with_its_stderr_tail(tmp_path: Path) -> None:
    wl = cmdmod.build("ls no-such-file", None, None, None, None, 30, None)
    target = Target("s1", str(tmp_path / "w"), "directory", 0)
    wl.prepare(target)
    with pytest.raises(WorkloadFailed, match=r"the command failed: exit status 2: ls: .*no-such"):
        wl.run(target)


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_as_user_runs_unprivileged_in_a_tree_it_owns(tmp_path: Path) -> None:
    work = tmp_path / "w"
    os.chmod(tmp_path, 0o755)
    wl = cmdmod.build("id -u > uid.txt", None, None, None, None, 30, "nobody")
    target = Target("s1", str(work), "directory", 0)
    wl.prepare(target)
    wl.run(target)
    assert (work / "uid.txt").read_text().strip() == "65534"


def test_the_runner_fails_a_hanging_or_killed_command_for_its_subject_alone(
    tmp_path: Path,
) -> None:
    marker = f"{time.time_ns() % 10**6 + 4000}.5"
    cmd = f"[ -e hang ] && sleep {marker}; [ -e die ] && kill -SEGV $$; true"
    wl = cmdmod.build(cmd, None, None, None, None, 1, None)
    targets = []
    for sid, trap in (("ok", None), ("hangs", "hang"), ("dies", "die")):
        work = tmp_path / sid
        work.mkdir()
        if trap:
            (work / trap).touch()
        subject = Subject(id=sid, driver="directory", fs="tmpfs", kind="directory")
        targets.append(AlwaysMounted(subject, Target(sid, str(work), "directory", 1 << 20)))
    runner = Runner(Run(run_id="r", started="t"), targets, [wl], 2, warmup=0, min_sample_s=0)
    by = {r.subject: r for r in runner.execute().results}
    assert by["ok"].status == "ok" and len(by["ok"].samples) == 2
    assert by["hangs"].status == "failed" and not by["hangs"].samples
    assert by["hangs"].error == (
        f"{cmd[:59]}…: did not finish within 1 s (--timeout); its process group was killed"
    )
    assert by["dies"].error == "the command failed: killed by signal SIGSEGV"
    assert _alive(marker) == []


# -- results ---------------------------------------------------------------------------------
def test_definitions_round_trip_through_the_run_record() -> None:
    wl = cmdmod.build("true", None, None, None, None, None, None)
    run = Run(run_id="r", started="t", definitions=definitions([wl, wl]))
    back = Run.model_validate(json.loads(run.to_json()))
    assert SCHEMA_VERSION >= 3 and len(back.definitions) == 1
    assert back.definitions[0]["command"] == "true" and back.definitions[0]["timeout_s"] == 3600
    old = Run.model_validate({"schema_version": 3, "run_id": "x", "started": "t"})
    assert old.definitions == []


def test_a_command_alone_replaces_the_default_workloads_and_joins_named_ones() -> None:
    wl = cmdmod.build("true", None, None, None, None, None, None)
    assert resolve_workloads(None, None, None, [wl]) == [wl]
    both = resolve_workloads("seq-write/fsync", None, None, [wl])
    assert [w.id for w in both] == ["seq-write/fsync", "command/true"]


def test_release_finds_processes_working_in_a_directory(tmp_path: Path) -> None:
    from fsbench.lab.mounts import processes_inside

    (tmp_path / "mnt" / "sub").mkdir(parents=True)
    (tmp_path / "mnt-other").mkdir()
    inside = subprocess.Popen(["sleep", "30"], cwd=tmp_path / "mnt" / "sub")
    beside = subprocess.Popen(["sleep", "30"], cwd=tmp_path / "mnt-other")
    try:
        assert processes_inside(str(tmp_path / "mnt")) == [inside.pid]
    finally:
        for p in (inside, beside):
            p.kill()
            p.wait()


def test_subprocess_not_left_behind_by_a_child_of_the_tests() -> None:
    # Sanity of the helper the tests above rely on: it sees a live marker.
    marker = f"{time.time_ns() % 10**6 + 3000}.5"
    p = subprocess.Popen(["sleep", marker])
    try:
        assert _alive(marker) == [p.pid]
    finally:
        p.kill()
        p.wait()


def _user_run(run_id: str, seconds: list[float], definitions_: list[dict]) -> Run:
    from fsbench.records.schema import Result

    params = {"engine": "command", "variant": "make", "command": "make"}
    return Run(
        run_id=run_id,
        started="t",
        status="complete",
        subjects=[Subject(id="ext4", driver="ext4", fs="ext4", kind="kernel")],
        results=[
            Result(
                subject="ext4",
                workload="command",
                workload_id="command/make",
                variant="make",
                params=params,
                metric="time",
                unit="s",
                higher_is_better=False,
                samples=seconds,
                median=sorted(seconds)[len(seconds) // 2],
            )
        ],
        definitions=definitions_,
    )


def test_user_workloads_reach_the_report_export_and_diff(tmp_path: Path) -> None:
    from fsbench.report.exports.export import to_csv
    from fsbench.report.model.diff import diff_runs
    from fsbench.report.views.sections import render_html

    monkey_env = {"TIOBENCH_SIZE": "2m"}
    os.environ.update(monkey_env)
    try:
        phases = (
            resolve_workloads(f"fio:{FIX / 'tiobench-small.fio'}", None)
            if shutil.which("fio")
            else []
        )
    finally:
        del os.environ["TIOBENCH_SIZE"]
    wl = cmdmod.build("make", "make clean", None, None, None, None, None)
    defs = definitions([*phases, wl])
    a = _user_run("a", [2.0, 2.1, 2.05], defs)
    b = _user_run("b", [1.0, 1.05, 1.02], defs)
    html = render_html(a)
    assert "Your workloads" in html and "make clean" in html
    assert "rw=randread" in html and "TIOBENCH_SIZE=2m" in html
    assert "command,make" in to_csv(a).replace('"', "")
    (d,) = diff_runs(a, b).results
    assert d.ratio is not None and d.ratio < 0.6
