"""Issue 22, "every label true": each figure is what its label says (unit tests, no root)."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import fsbench
from fsbench import environment as env_mod
from fsbench import registry
from fsbench.cli.app import cli
from fsbench.errors import EXIT_FAILED, UsageError
from fsbench.lab import state
from fsbench.probes.sample import ProbeDelta
from fsbench.records.schema import CPU, Device, Environment, Result, Run, Sample, Subject
from fsbench.report.model import build
from fsbench.report.model.diff import diff_runs
from fsbench.report.model.diff import ratio_text as diff_ratio_text
from fsbench.report.model.explain import explain_result, profile
from fsbench.report.views.sections import render as render_table
from fsbench.report.views.sections import render_html
from fsbench.schedule.merge import build_sample
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner, aggregate
from fsbench.units import GiB, MiB, fmt_ratio
from fsbench.workloads.base import Measurement, Target
from fsbench.workloads.copy import COPY_JOBS
from fsbench.workloads.fake import FakeWorkload
from fsbench.workloads.fio import FioJob, with_numjobs


def test_fake_workload_only_reachable_from_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py opens the door for the suite; a user's shell does not have it.
    assert [w.name for w in registry.resolve_workloads("fake", None)] == ["fake"]
    monkeypatch.delenv("FSBENCH_TEST_FAKE_WORKLOAD", raising=False)
    with pytest.raises(UsageError, match="unknown workload 'fake'"):
        registry.resolve_workloads("fake", None)


def test_params_distinguish_every_workload_variant(tmp_path) -> None:
    # results.json tells results apart by their params: two variants that do different
    # things (reread warmed by reading, seq-read/warm by writing) must not record the same.
    target = Target("s", str(tmp_path / "work"), "kernel", 1 << 30, fs="ext4")
    pool = {**registry.WORKLOADS, **registry.MATRIX_WORKLOADS}
    variants = [
        *pool.values(),
        *(with_numjobs(w, 4) for w in registry.WORKLOADS.values() if isinstance(w, FioJob)),
    ]
    seen: dict[str, str] = {}
    for wl in variants:
        key = json.dumps(wl.params(target), sort_keys=True, default=str)
        wid = str(wl.id)
        assert key not in seen, f"{wid} and {seen.get(key)} record the same params: {key}"
        seen[key] = wid
    assert len(seen) == len(variants)


def _copy_result(wl_name: str) -> Result:
    # A copy writes what it reads from tmpfs: the device sees writes, no reads.
    s = Sample(value=1.0, seconds=1.0, bytes=GiB, device=Device(write_bytes=GiB + GiB // 2))
    return Result(subject="a", workload=wl_name, workload_id=f"{wl_name}", metric="t",
                  unit="MiB/s", samples=[1.0], sample_details=[s])  # fmt: skip


def test_amplification_follows_the_declared_direction() -> None:
    # copy-large declares is_write; its name does not end in "write".
    wl = next(w for w in COPY_JOBS if w.name == "copy-large")
    assert wl.is_write is True
    fake = FakeWorkload(name="copy-large")
    fake.is_write = True  # type: ignore[attr-defined]
    run = Run(run_id="r", started="t")
    runner = Runner(run, [], [fake])
    res = _copy_result("copy-large")
    runner.results[("a", "copy-large")] = res
    runner.finish()
    assert res.write_amplification == pytest.approx(1.5)
    assert res.read_amplification is None


def _cpu_sample(app: float, driver: float, kthreads: float) -> Sample:
    per = {"app": app, "driver": driver, "kernel_threads": kthreads}
    kop = {k: 10 * v for k, v in per.items()}
    cpu = CPU(per_gib=per, per_gib_s=sum(per.values()), per_kop_ms=kop)
    return Sample(value=1.0, seconds=1.0, bytes=GiB, cpu=cpu)


def test_cpu_parts_add_up_to_the_total_beside_them() -> None:
    # Per-part medians (2 + 2 + 0) would not add up to the median total (3).
    det = [_cpu_sample(3, 0, 0), _cpu_sample(0, 3, 0), _cpu_sample(2, 2, 2)]
    res = Result(subject="a", workload="w", metric="t", unit="MiB/s",
                 samples=[1.0, 1.0, 1.0], sample_details=det)  # fmt: skip
    aggregate(res)
    assert res.cpu.per_gib_s == pytest.approx(3.0)
    assert sum(res.cpu.per_gib.values()) == pytest.approx(res.cpu.per_gib_s)
    assert res.cpu.per_kop_ms is not None
    assert sum(res.cpu.per_kop_ms.values()) == pytest.approx(30.0)
    # With an even count the total is the mean of the middle two, and so are its parts.
    res.sample_details.append(_cpu_sample(1, 1, 2))
    res.samples.append(1.0)
    aggregate(res)
    assert res.cpu.per_gib_s == pytest.approx(3.5)
    assert sum(res.cpu.per_gib.values()) == pytest.approx(3.5)


def _ctx_result(subject: str, app: int, daemon: int, machine: int) -> Result:
    m = Measurement(value=100.0, seconds=1.0, bytes=GiB, app_ctx=app)
    d = ProbeDelta(daemon_ctx=daemon, system_ctx=machine)
    s = build_sample(m, d, FakeWorkload(name="seq-write"), "n/a", [])
    res = Result(subject=subject, workload="seq-write", metric="t", unit="MiB/s",
                 samples=[s.value], sample_details=[s])  # fmt: skip
    aggregate(res, is_write=True)
    return res


def test_context_switches_are_the_subjects_where_the_label_says_subject() -> None:
    # The app's and the daemon's own switches are the subject's; /proc/stat ctxt is the
    # whole machine's (every other process, every kworker) and is labelled so.
    res = _ctx_result("ntfs-3g", app=1000, daemon=3000, machine=90_000)
    assert res.sample_details[0].subject_ctx_switches == 4000
    assert res.subject_ctx_switches_per_gib == pytest.approx(4000)
    assert res.ctx_switches_per_gib == pytest.approx(90_000)  # still recorded: the machine's
    base = _ctx_result("ext4", app=100, daemon=0, machine=80_000)
    run = Run(run_id="r", started="t", results=[base, res])
    run.subjects = [Subject(id="ext4", driver="ext4", fs="ext4", kind="kernel"),
                    Subject(id="ntfs-3g", driver="ntfs-3g", fs="ntfs", kind="fuse")]  # fmt: skip
    prof = profile(res, run)
    assert prof.ctx == pytest.approx(4000)
    labels = {key: label for key, label, _, _ in prof.figures()}
    assert "app + daemon" in labels["ctx"]
    factor = next(f for f in explain_result(res, base, run).factors if f.name == "context switches")
    assert "4,000" in factor.sentence and "90,000" not in factor.sentence
    assert "app + daemon" in factor.sentence
    html = render_html(run)
    assert "4,000" in html and "90,000" not in html
    # An older run has only the machine's figure: shown, and labelled the machine's.
    old = res.model_copy(update={"subject_ctx_switches_per_gib": None})
    old_prof = profile(old, run)
    assert {k: lab for k, lab, _, _ in old_prof.figures()}["ctx.machine"].startswith("machine")


def test_cleanup_says_what_it_did_and_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(state, "release_orphans", lambda live: [])  # no loop devices here
    images, mnt = tmp_path / "fsbench-img", tmp_path / "fsbench-mnt"
    images.mkdir()
    mnt.mkdir()
    # A canned failure of each kind: a setting that cannot be written back (no such module),
    # a directory that cannot be deleted.
    setting = "/sys/module/fsbench_no_such_module/parameters/x"
    dead = subprocess.Popen(["true"])
    dead.wait()
    rec = state.StateRecord("r1", dead.pid, str(images), str(mnt), restore={setting: "1"})
    rec.save()
    real_rmtree = shutil.rmtree

    def rmtree(path: str, ignore_errors: bool = False, **k: object) -> None:
        if Path(path) != images:
            return real_rmtree(path, ignore_errors)
        if not ignore_errors:  # as the real one: ignore_errors says nothing of the failure
            raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(state.shutil, "rmtree", rmtree)
    r = CliRunner().invoke(cli, ["cleanup"])
    out = r.output
    assert f"restored {setting}" not in out
    assert f"could not restore {setting} = 1" in out
    assert f"removed {images}" not in out and f"could not remove {images}" in out
    assert f"removed {mnt}" in out and not mnt.exists()  # what it did do, it says
    assert r.exit_code == EXIT_FAILED
    # The record stays: the next cleanup tries again what failed.
    assert [x.run_id for x in state.records()] == ["r1"]


def _short_run(tmp_path: Path, wl: FakeWorkload, size: int, **kw: object) -> Result:
    target = AlwaysMounted(Subject(id="s", driver="fake", fs="fake", kind="fake"),
                       Target("s", str(tmp_path), "fake", size))  # fmt: skip
    runner = Runner(Run(run_id="r", started="t"), [target], [wl], repeat=1, **kw)  # type: ignore[arg-type]
    return runner.execute().results[0]


def test_a_sample_shorter_than_min_sample_time_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", "s=50")
    # 1 MiB at 50 MiB/s: 0.02 s an iteration; the iteration cap ends the sample at 0.4 s.
    capped = FakeWorkload(min_sample_s=None)  # type: ignore[arg-type]
    res = _short_run(tmp_path, capped, MiB, min_sample_s=1.0, rewarm=False)
    assert all(any(f.startswith("short-sample-capped: ") and "iterations" in f for f in s.flags)
               for s in res.sample_details)  # fmt: skip
    assert any("short-sample" in f for f in res.flags)
    # Under the ~1 s a sample needs (the design's figure), not only under 0.2 s.
    assert any("too short" in w for w in res.warnings)
    # A workload with its own lower minimum (matrix cells: one pass) says that instead.
    own = _short_run(tmp_path, FakeWorkload(), 32 * MiB, min_sample_s=1.0)
    assert all(
        any(f.startswith("short-sample-own: ") and "own minimum" in f for f in s.flags)
        for s in own.sample_details
    )
    # Long enough: nothing to say.
    long = _short_run(tmp_path, FakeWorkload(), 100 * MiB, min_sample_s=1.0)
    assert not any("short-sample" in f for f in long.flags)
    assert not any("too short" in w for w in long.warnings)


def _rate(subject: str, values: list[float]) -> Result:
    det = [Sample(value=v, seconds=2.0, bytes=GiB) for v in values]
    res = Result(subject=subject, workload="seq-read", params={"variant": "cold"}, metric="t",
                 unit="MiB/s", samples=values, sample_details=det)  # fmt: skip
    aggregate(res)
    return res


def test_one_ratio_formatter_prints_a_ratio_one_way() -> None:
    assert [fmt_ratio(r) for r in (0.0492, 0.61, 1.16, 1.24, 9.63, 12.4, 123.4)] == [
        "0.049×", "0.61×", "1.16×", "1.24×", "9.63×", "12.4×", "123×",
    ]  # fmt: skip
    base = _rate("ext4", [1000.0, 1010.0, 990.0])
    other = _rate("xfs", [1160.0, 1171.6, 1148.4])
    run = Run(run_id="r", started="t", results=[base, other])
    run.subjects = [Subject(id=s, driver=s, fs=s, kind="kernel") for s in ("ext4", "xfs")]
    assert "1.16×" in render_html(run)
    later = run.model_copy(deep=True)
    later.results[1] = _rate("xfs", [1160.0 * 1.16, 1171.6 * 1.16, 1148.4 * 1.16])
    changed = next(r for r in diff_runs(run, later).results if r.subject == "xfs")
    assert diff_ratio_text(changed).startswith("1.16×")


# Sites still formatting ratios their own way (none today): remove each as it moves to
# fmt_ratio.
PENDING_RATIO_SITES: set[tuple[str, str]] = set()


def test_no_ratio_is_formatted_outside_fmt_ratio() -> None:
    # A format spec right before "×" is a ratio printed its own way.
    src = Path(fsbench.__file__).parent
    own_way = re.compile(r"\{[^{}]*:[^{}]*\}×")
    found = set()
    for path in src.rglob("*.py"):
        rel = str(path.relative_to(src))
        if rel == "units.py":
            continue
        for line in path.read_text().splitlines():
            if own_way.search(line):
                found.add((rel, line.strip()))
    stray = {(rel, line) for rel, line in found
             if not any(rel == r and s in line for r, s in PENDING_RATIO_SITES)}  # fmt: skip
    assert not stray


STEADY = [1900.0, 2010.0, 1950.0, 2040.0, 1980.0]
SLOWER = [1210.0, 1260.0, 1190.0, 1240.0, 1230.0]


@pytest.mark.parametrize("end, moved", [(STEADY, False), (SLOWER, True)])
def test_the_noise_floor_is_measured_at_the_start_and_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: list[float], moved: bool
) -> None:
    start = [2000.0, 1950.0, 2050.0, 1990.0, 2020.0]
    runs = iter([start, end])
    monkeypatch.setattr(env_mod, "noise_rates", lambda directory, n: next(runs))
    environment = Environment(noise_floor=env_mod.noise_floor(tmp_path))
    env_mod.remeasure_noise_floor(environment, tmp_path)
    floor = environment.noise_floor
    assert floor is not None and floor["mib_s"] == start and floor["mib_s_end"] == end
    assert floor["cv_end"] == pytest.approx(statistics.stdev(end) / statistics.mean(end))
    run = Run(run_id="r", started="t", environment=environment)
    # The model decides the move (the verdict procedure on the stored rates); the run stores
    # the rates, no note of its own.
    assert not [n for n in environment.notes if "noise floor moved" in n]
    said = [n for n in build(run).environment.notes if "noise floor moved" in n]
    assert bool(said) == moved
    con = Console(record=True, width=100)
    render_table(run, con)
    text, html = con.export_text(), render_html(run)
    assert ("noise floor moved" in text) == moved and ("noise floor moved" in html) == moved
    if moved:  # the end's geometric mean and the ratio it divides, in both
        assert "1,226" in text and "1,226" in html
        assert "0.61× " in said[0] and "▼" in said[0]
    assert "start" in text and "end" in text  # both measurements shown


def test_a_short_run_says_why_its_floor_was_not_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = iter([STEADY])  # a second measurement would raise StopIteration
    monkeypatch.setattr(env_mod, "noise_rates", lambda directory, n: next(runs))
    environment = Environment(noise_floor=env_mod.noise_floor(tmp_path))
    assert environment.noise_floor is not None
    environment.noise_floor["seconds"] = 1.5
    env_mod.remeasure_noise_floor(environment, tmp_path, run_seconds=6.0)
    floor = environment.noise_floor
    assert "mib_s_end" not in floor and "6 s" in floor["end_not_measured"]
    con = Console(record=True, width=200)
    render_table(Run(run_id="r", started="t", environment=environment), con)
    assert "not measured again at the end (the run took 6 s" in con.export_text()
