"""`diff` and `export` on synthetic runs: matching, ratios and significance, environment
differences that matter (refused without --force), CSV columns and rows; and the three
commands as a user runs them (exit codes, one-line errors)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from run_parts import fsbench_cli, subject

from fsbench.cli.commands.report import _print_diff
from fsbench.errors import UsageError
from fsbench.records.schema import CPU, Environment, Result, Run
from fsbench.records.store import Store
from fsbench.report.exports.export import CSV_COLUMNS, export, to_csv
from fsbench.report.model.diff import diff_runs, environment_differences, ratio_text
from fsbench.report.model.diff import test_text as words_of
from fsbench.stats.describe import summarize

MiB = 1024**2


def _result(subject: str, variant: str, samples: list[float], **params) -> Result:
    s = summarize(samples) if samples else None
    return Result(
        subject=subject,
        workload="seq-write",
        params={"engine": "fio", "variant": variant, "block_size": "1M", **params},
        metric="throughput",
        unit="MiB/s",
        samples=samples,
        median=s.median if s else None,
        ci95=s.ci95 if s else None,
        cpu=CPU(per_gib_s=2.5, per_gib={"app": 2.0, "driver": 0.4, "kernel_threads": 0.1}),
        ctx_switches_per_gib=1234.0,
        cache="n/a",
        status="ok" if samples else "failed",
        error=None if samples else "No space left on device",
    )


def _run(
    run_id: str,
    values: dict[str, list[float]],
    kernel: str = "6.1.0",
    ntfs_version: str = "ntfs-3g 2022.10.3",
    options: str = "",
) -> Run:
    return Run(
        run_id=run_id,
        started="2025-01-01T00:00:00",
        status="complete",
        environment=Environment(
            kernel=kernel, fio_version="fio-3.33", backing="ram", cpus=2, hostname=run_id
        ),
        subjects=[
            subject("ext4", mkfs_command=["mkfs.ext4", "-q", f"/dev/loop{len(run_id) % 7}"]),
            subject("ntfs-3g", driver_version=ntfs_version, mount_options=options),
        ],
        results=[_result(k.split("/")[0], k.split("/")[1], v) for k, v in values.items()],
    )


A = {
    "ext4/fsync": [600.0, 605.0, 610.0, 602.0, 608.0],
    "ntfs-3g/fsync": [50.0, 51.0, 49.0, 50.5, 49.5],
    "ntfs-3g/buffered": [80.0, 82.0, 81.0],
}
B = {
    "ext4/fsync": [601.0, 606.0, 609.0, 603.0, 607.0],  # the same, within noise
    "ntfs-3g/fsync": [100.0, 101.0, 99.0, 100.5, 99.5],  # twice as fast
    "ext4/buffered": [4000.0, 4100.0, 3900.0],
}


def test_diff_matches_results_and_tests_each() -> None:
    d = diff_runs(_run("run-a", A), _run("run-b", B))
    rows = {(r.subject, r.title): r for r in d.results}
    assert set(rows) == {("ext4", "seq-write/fsync"), ("ntfs-3g", "seq-write/fsync")}
    same = rows[("ext4", "seq-write/fsync")]
    assert same.median_a == 605.0 and same.median_b == 606.0
    # The ratio of geometric means (fsbench.stats.verdict), near the ratio of medians.
    assert same.ratio == pytest.approx(606 / 605, abs=0.002)
    # Two comparisons in the diff: each interval at 97.5 %, within ±2 % of 1.
    assert same.confidence == pytest.approx(0.975) and same.verdict == "same"
    assert same.mark == "same" and "≈" in ratio_text(same)
    faster = rows[("ntfs-3g", "seq-write/fsync")]
    assert faster.ratio == pytest.approx(2.0, rel=0.01)
    lo, hi = faster.ratio_ci95 or (0, 0)
    assert 1 < lo <= 2.0 <= hi
    assert faster.mark == "above" and faster.verdict == "better" and "▲" in ratio_text(faster)
    assert d.only_a == ["ntfs-3g · seq-write/buffered"]
    assert d.only_b == ["ext4 · seq-write/buffered"]
    assert d.environment and not d.mattering  # only the host name differs


def test_three_samples_a_side_decide_a_halving() -> None:
    """Rank tests cannot decide 3 against 3 (Mann-Whitney's smallest p is 0.10); the verdict's
    interval (Welch on logs) can, and says worse."""
    a = _run("a", {"ext4/fsync": [600.0, 610.0, 620.0]})
    b = _run("b", {"ext4/fsync": [300.0, 305.0, 310.0]})
    (r,) = diff_runs(a, b).results
    assert r.mark == "below" and r.verdict == "worse" and r.confidence == pytest.approx(0.95)


def test_environment_differences_that_matter() -> None:
    a = _run("a", A)
    b = _run("b", A, kernel="6.9.0", ntfs_version="ntfs-3g 2023.1", options="big_writes")
    diffs = {e.what: e for e in environment_differences(a, b)}
    assert diffs["kernel"].matters and diffs["kernel"].b == "6.9.0"
    assert diffs["ntfs-3g: driver version"].matters
    assert diffs["ntfs-3g: mount options"].matters
    assert not diffs["host"].matters
    # mkfs differs only in which loop device was free: not a difference.
    assert "ext4: mkfs" not in diffs


def test_a_difference_that_matters_takes_the_verdict_of_what_it_concerns() -> None:
    """A driver's new version leaves the other subjects' verdicts standing; a tool both runs
    recorded in another version (mkfs makes the layout) takes every verdict."""
    a = _run("a", A)
    b = _run("b", A, ntfs_version="ntfs-3g 2023.1")
    rows = {r.subject: r for r in diff_runs(a, b).results}
    assert rows["ntfs-3g"].verdict == "not comparable"
    assert rows["ntfs-3g"].not_comparable == ["ntfs-3g: driver version"]
    assert rows["ext4"].verdict == "same" and rows["ext4"].not_comparable == []
    a.environment.tools["mkfs.ext4"] = "mke2fs 1.47.0"
    b.environment.tools["mkfs.ext4"] = "mke2fs 1.47.1"
    b.environment.tools["nginx"] = "nginx/1.22.1"  # recorded by B only: context, not a verdict
    d = diff_runs(a, b)
    assert {r.verdict for r in d.results} == {"not comparable"}
    assert "tool nginx" in {e.what for e in d.environment if not e.matters}


def test_csv_has_a_row_per_result_and_the_promised_columns() -> None:
    run = _run("run-a", {**A, "ext4/broken": []})
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert len(rows) == len(run.results) == 4
    for col in (
        "subject",
        "workload",
        "variant",
        "params",
        "metric",
        "unit",
        "median",
        "ci_low",
        "ci_high",
        "cpu_per_gib_s",
        "cache",
        "status",
    ):
        assert col in CSV_COLUMNS
    assert list(rows[0]) == list(CSV_COLUMNS)
    first = rows[0]
    assert first["subject"] == "ext4" and first["variant"] == "fsync"
    assert float(first["median"]) == 605.0
    assert float(first["ci_low"]) <= 605.0 <= float(first["ci_high"])
    assert float(first["cpu_per_gib_s"]) == 2.5 and first["status"] == "ok"
    assert json.loads(first["params"])["block_size"] == "1M"
    broken = rows[-1]
    assert broken["status"] == "failed" and broken["median"] == "" and "No space" in broken["error"]


def test_json_export_is_the_results_document() -> None:
    run = _run("run-a", A)
    doc = json.loads(export(run, "JSON"))
    # The report's verdicts beside the document: each result against its table's baseline.
    said = doc.pop("verdicts")
    assert Run.model_validate(doc) == run
    assert said and {v["subject"] for v in said} == {r.subject for r in run.results}
    assert all(
        v["verdict"] in ("baseline", "better", "worse", "same", "open", "none") for v in said
    )
    with pytest.raises(UsageError, match="give json, csv, csv-samples, markdown"):
        export(run, "xml")


# -- the commands --------------------------------------------------------------------------------
def _fsbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return fsbench_cli(*args, env=env)


Stored = tuple[dict[str, str], Path, Path]


@pytest.fixture
def stored(tmp_path: Path) -> Stored:
    """Two runs with output directories, in a private store; (env, dir A, dir B)."""
    db = tmp_path / "db" / "results.db"
    dirs = []
    with Store(db) as store:
        for run_id, values, kernel in (
            ("20250101-000000-aaaa", A, "6.1.0"),
            ("20250102-000000-bbbb", B, "6.9.0"),
        ):
            run = _run(run_id, values, kernel=kernel)
            out = tmp_path / run_id
            out.mkdir()
            (out / "results.json").write_text(run.to_json())
            store.begin_run(run, out)
            store.finish_run(run)
            dirs.append(out)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "db-home")}
    env["FSBENCH_TEST_DB"] = str(db)
    return env, dirs[0], dirs[1]


def test_diff_refuses_when_the_kernel_differs(stored: Stored) -> None:
    env, a, b = stored
    db = env["FSBENCH_TEST_DB"]
    res = _fsbench("diff", str(a), str(b), "--db", db, env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "kernel: 6.1.0 → 6.9.0" in res.stderr
    assert "--force" in res.stderr
    res = _fsbench("diff", "20250101", "20250102", "--db", db, "--force", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert "warning: kernel differs" in res.stderr
    doc = json.loads(res.stdout)
    # Forced, the rows are shown, but a verdict across kernels would compare apples with
    # oranges: none is given.
    assert {r["verdict"] for r in doc["results"]} == {"not comparable"}
    assert all(r["not_comparable"] == ["kernel"] for r in doc["results"])
    assert doc["environment_differences"][0]["what"] == "kernel"


def test_export_and_report_commands(stored: Stored, tmp_path: Path) -> None:
    env, a, _b = stored
    db = env["FSBENCH_TEST_DB"]
    res = _fsbench("export", "20250101-000000-aaaa", "--format", "csv", "--db", db, env=env)
    assert res.returncode == 0, res.stderr
    assert len(list(csv.DictReader(io.StringIO(res.stdout)))) == 3
    out = tmp_path / "x.json"
    res = _fsbench("export", str(a), "--output", str(out), "--db", db, env=env)
    assert res.returncode == 0 and json.loads(out.read_text())["run_id"] == "20250101-000000-aaaa"
    res = _fsbench("export", str(a), "--format", "yaml", "--db", db, env=env)
    assert (
        res.returncode == 2
        and res.stderr.strip() == "fsbench: --format 'yaml': give json, csv, csv-samples, markdown"
    )
    res = _fsbench("export", "nosuchrun", "--db", db, env=env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    # report: by default into the run's output directory
    res = _fsbench("report", "20250101-000000-aaaa", "--db", db, env=env)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == a / "report.html" and (a / "report.html").is_file()
    page = tmp_path / "page.html"
    res = _fsbench("report", str(a), "--html", str(page), "--with", "20250102", "--db", db, env=env)
    assert res.returncode == 0, res.stderr
    assert "Against other runs" in page.read_text()
    res = _fsbench(
        "report", str(a), "--html", str(tmp_path / "no" / "dir.html"), "--db", db, env=env
    )
    assert res.returncode == 2 and "does not exist" in res.stderr


def test_export_output_dash_is_standard_output(stored: Stored, tmp_path: Path) -> None:
    """`--output -` is the usual spelling of standard output: no file named '-'."""
    env, a, _b = stored
    res = subprocess.run(
        [sys.executable, "-m", "fsbench", "export", str(a), "--output", "-"],
        capture_output=True, text=True, env={**env}, timeout=120, cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["run_id"] == "20250101-000000-aaaa"
    assert not (tmp_path / "-").exists()


def test_diff_judges_at_the_runs_equivalence_band() -> None:
    """#45: runs measured with --equivalence 5 are re-judged by `diff` at ±5 %, and its words
    say ±5 % (they said ±2 % whatever the run used)."""
    a_samples = [100.0, 104.0, 96.0, 101.0, 99.0, 103.0, 97.0, 100.0]
    b_samples = [x * 1.005 for x in reversed(a_samples)]  # interval about 0.976-1.035
    a = _run("20250101-000000-aaaa", {"ext4/fsync": a_samples})
    b = _run("20250101-000000-bbbb", {"ext4/fsync": b_samples})
    (row,) = diff_runs(a, b).results
    assert row.band == 0.02 and row.verdict == "open"
    for run in (a, b):
        for r in run.results:
            r.verdict_family = {"looks": 1, "comparisons": 1, "band": 0.05}
    d = diff_runs(a, b)
    (row,) = d.results
    assert row.band == 0.05 and row.verdict == "same", row
    assert "within ±5 %" in words_of(row)
    con = Console(record=True, width=120)
    _print_diff(d, con)
    assert "≈ within ±5 %" in con.export_text()
