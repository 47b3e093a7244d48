"""`fsbench judge`: the verdict procedure for samples from anywhere, and a stored run judged
exactly as it printed."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from fsbench.cli.app import cli
from fsbench.records.schema import Run
from fsbench.report.model.naming import ratio_cell
from fsbench.report.model.upgrade import with_centres
from fsbench.report.views.sections import render
from fsbench.stats.verdict import Verdict

FIXTURES = Path(__file__).parent / "fixtures"
CSV = """run,workload,subject,value,round
r1,seq-write,ext4,1752,1
r1,seq-write,ext4,2128,2
r1,seq-write,ext4,1974,3
r1,seq-write,ntfs-3g,123,1
r1,seq-write,ntfs-3g,93,2
r1,seq-write,ntfs-3g,77,3
r1,seq-write,xfs,1900,1
r1,seq-write,xfs,2000,2
r1,seq-write,xfs,2100,3
r2,seq-write,ext4,100,1
r2,seq-write,ext4,101,2
r2,seq-write,ext4,99,3
r2,seq-write,ntfs-3g,300,1
r2,seq-write,ntfs-3g,310,2
r2,seq-write,ntfs-3g,305,3
"""


def _judge(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["judge", *args], catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_samples_from_a_csv_get_the_tables_verdicts(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text(CSV)
    code, out, _ = _judge(str(f), "--json")
    assert code == 0
    rows = json.loads(out)
    assert {r["run"] for r in rows} == {"r1", "r2"}  # tables never cross runs
    assert all(set(r) == {"run", "workload", "subject", "against", "ratio", "low", "high", "mark"}
               for r in rows)  # fmt: skip
    by = {(r["run"], r["subject"], r["against"]): r for r in rows}
    slow = by[("r1", "ntfs-3g", "ext4")]
    assert slow["mark"] == "▼" and slow["low"] < slow["ratio"] < slow["high"] < 1
    assert by[("r1", "xfs", "ext4")]["mark"] == "?"  # 1.03×: not separated
    assert by[("r2", "ntfs-3g", "ext4")]["mark"] == "▲"
    # Every printed comparison is listed: each against the baseline and against the fastest.
    assert ("r1", "ntfs-3g", "xfs") in by and ("r1", "ext4", "xfs") in by
    # The terminal prints the same cells, and the legend.
    code, text, _ = _judge(str(f))
    assert code == 0 and "▲/▼ interval excludes 1" in text and "r2 · seq-write" in text


def test_baseline_and_the_fail_on_gate(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    recs = [dict(zip(("run", "workload", "subject", "value"), ln.split(",")[:4], strict=True))
            for ln in CSV.splitlines()[1:]]  # fmt: skip
    f.write_text(json.dumps(recs))
    code, out, _ = _judge(str(f), "--json", "--baseline", "xfs")
    rows = json.loads(out)
    assert {r["against"] for r in rows if r["run"] == "r1"} == {"xfs"}
    code, _, err = _judge(str(f), "--fail-on", "worse")
    assert code == 1 and "worse" in err
    code, _, err_json = _judge(str(f), "--fail-on", "worse", "--json")
    # --json's gate counts the outcomes as decided, the terminal's count: the same.
    assert code == 1 and err_json == err
    one = tmp_path / "r1.json"
    one.write_text(json.dumps([r for r in recs if r["run"] == "r1"]))
    for fmt in ([], ["--json"]):
        code, _, _ = _judge(str(one), "--fail-on", "worse", "--baseline", "ntfs-3g", *fmt)
        assert code == 0  # against the slowest, nothing is worse (the gate reads the baseline's)


@pytest.mark.parametrize(
    "text,what",
    [
        ("run,workload,value\nr,w,1\n", "missing subject"),
        ("run,workload,subject,value\nr,w,a,fast\n", "not a number"),
        ("run,workload,subject,value\nr,w,a,-3\n", "positive"),
        ("run,workload,subject,value\nr,w,a,1,9\n", "fields"),
        ("run,workload,subject,value\n", "no samples"),
        ("[1, 2]", "JSON must be a list"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_malformed_file_is_one_line_and_exit_2(tmp_path: Path, text: str, what: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    res = CliRunner().invoke(cli, ["judge", str(f)])
    assert res.exit_code == 2, res.output
    assert what in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output


def test_a_stored_run_is_judged_as_it_printed(tmp_path: Path) -> None:
    """Every comparison with the baseline judge lists for the stored default run is the cell
    the run's own table prints (same ratio, interval and mark, at the family it recorded)."""
    run = with_centres(Run.model_validate_json((FIXTURES / "default_compare.json").read_text()))
    con = Console(width=200, record=True, color_system=None)
    render(run, con)
    printed = con.export_text()
    path = tmp_path / "results.json"
    path.write_text((FIXTURES / "default_compare.json").read_text())
    code, out, _ = _judge(str(path), "--json", "--db", str(tmp_path / "none.db"))
    assert code == 0
    rows = json.loads(out)
    # The same file kept under another name (bench/aa.py --keep writes RUN_ID.json) too.
    kept = tmp_path / "kept" / "20261127-000000-aaaaaa.json"
    kept.parent.mkdir()
    kept.write_text(path.read_text())
    assert json.loads(_judge(str(kept), "--json", "--db", str(tmp_path / "none.db"))[1]) == rows
    base = [r for r in rows if r["against"] == "ext4" and "p99" not in r["workload"]]
    assert len(base) >= 10
    for r in base:
        hib = True
        mark = {"▲": "above", "▼": "below", "≈": "same", "?": "open"}[r["mark"]]
        v = Verdict(r["ratio"], (r["low"], r["high"]), 0.99, mark)  # type: ignore[arg-type]
        cell = ratio_cell(v, hib)
        assert cell in printed, (r["subject"], r["workload"], cell)


def test_a_declared_resolution_keeps_a_step_from_making_a_mark(tmp_path: Path) -> None:
    """fio's p99 is a bucket of its histogram (1/64 of a value): two identical subjects' p99
    sit in buckets 1.5 steps apart, each side constant. Read from the digits the values carry,
    the step is 0.001 and the difference a mark; declared (--resolution 1.5625), not."""
    f = tmp_path / "p99.csv"
    rows = [f"r,p99,{s},{v}" for s, v in (("a", 89.6), ("b", 91.648)) for _ in range(3)]
    f.write_text("run,workload,subject,value\n" + "\n".join(rows) + "\n")
    code, out, _ = _judge(str(f), "--lower-is-better", "--json")
    assert code == 0 and json.loads(out)[0]["mark"] == "▼"
    code, out, _ = _judge(str(f), "--lower-is-better", "--resolution", "1.5625", "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["mark"] == "?"
    assert row["low"] < 1.0 < row["high"] and row["ratio"] == pytest.approx(91.648 / 89.6)
    code, _, err = _judge(str(f), "--resolution", "50")
    assert code == 2 and "--resolution" in err
    # A stored run keeps the resolutions it recorded: the option is refused, not ignored.
    stored = tmp_path / "results.json"
    stored.write_text((FIXTURES / "default_compare.json").read_text())
    code, _, err = _judge(str(stored), "--resolution", "1.5625", "--db", str(tmp_path / "x.db"))
    assert code == 2 and err.count("\n") == 1 and "--resolution: a stored run is judged" in err


@pytest.mark.parametrize("name", ["default_compare.json", "diskmark_compare.json"])
@pytest.mark.parametrize("fmt", ["csv-samples", "json"])
def test_what_export_writes_judge_reads_and_reproduces_the_runs_marks(
    tmp_path: Path, name: str, fmt: str
) -> None:
    """`fsbench export RUN --format csv-samples > s.csv && fsbench judge s.csv --json` (and the
    same with --format json) lists every comparison the stored run prints: the same ratios,
    intervals and marks as judging the run itself, and against each table's baseline the
    run's own verdicts (Run.verdicts: its rate and, latency-bound, its p99)."""
    from fsbench.records.store import _read_results_json
    from fsbench.report.exports.export import export
    from fsbench.report.model.upgrade import upgrade

    stored = tmp_path / "results.json"
    stored.write_text((FIXTURES / name).read_text())
    run = upgrade(_read_results_json(stored))
    f = tmp_path / ("s.csv" if fmt == "csv-samples" else "s.json")
    f.write_text(export(run, fmt))
    db = str(tmp_path / "x.db")
    code, out, err = _judge(str(f), "--json", "--db", db)
    assert code == 0, err
    got = json.loads(out)
    code, out, _ = _judge(str(stored), "--json", "--db", db)
    assert code == 0 and got == json.loads(out)
    by = {(c["workload"], c["subject"], c["against"]): c for c in got}
    checked = 0
    glyphs = {"better": "▲", "worse": "▼", "same": "≈", "open": "?"}
    for v in run.verdicts:
        res = run.results[v["index"]]
        wid = res.workload_id or res.workload
        for col, rec in (("", v), (" p99", v.get("p99"))):
            if not rec or "ratio" not in rec:
                continue
            c = by[(wid + col, res.subject, v["baseline"])]
            assert c["ratio"] == pytest.approx(rec["ratio"], rel=1e-12)
            assert (c["low"], c["high"]) == pytest.approx((rec["ratio_low"], rec["ratio_high"]))
            assert c["mark"] == glyphs[rec["verdict"]], (wid, res.subject, col)
            checked += 1
    assert checked >= (14 if name.startswith("default") else 12)


def test_a_damaged_volume_is_said_in_csv_samples_and_judge_keeps_it_unranked(
    tmp_path: Path,
) -> None:
    """csv-samples has an `integrity` column: a subject whose volume came back damaged is
    "failed" on every row of it, and judge reads it as the run ranked it: shown, never a
    table's baseline, the same comparisons as judging the stored run itself."""
    from fsbench.records.schema import INTEGRITY_FAILED_FLAG, Integrity, Note
    from fsbench.records.store import _read_results_json
    from fsbench.report.exports.export import export
    from fsbench.report.model.upgrade import upgrade

    stored = tmp_path / "results.json"
    stored.write_text((FIXTURES / "default_compare.json").read_text())
    run = upgrade(_read_results_json(stored))
    damaged = "ext4"  # every table's baseline while it is ranked
    (subj,) = [s for s in run.subjects if s.id == damaged]
    subj.integrity = Integrity(status="failed", problems=["e2fsck: 1 error"])
    for r in run.results:
        if r.subject == damaged:
            r.notes.append(Note(code=INTEGRITY_FAILED_FLAG, params={"problem": "ntfsck"}))
    run = run.model_copy(update={"verdicts": []})  # decided again, on the damage
    stored.write_text(run.model_dump_json())
    rows = list(csv.DictReader(io.StringIO(export(upgrade(run), "csv-samples"))))
    assert {r["integrity"] for r in rows if r["subject"] == damaged} == {"failed"}
    assert {r["integrity"] for r in rows if r["subject"] != damaged} <= {"ok", "not-checked", ""}
    f = tmp_path / "s.csv"
    f.write_text(export(upgrade(run), "csv-samples"))
    db = str(tmp_path / "x.db")
    code, out, err = _judge(str(f), "--json", "--db", db)
    assert code == 0, err
    got = json.loads(out)
    assert got and all(c["against"] != damaged for c in got)
    code, out, _ = _judge(str(stored), "--json", "--db", db)
    assert code == 0 and got == json.loads(out)


def test_the_variants_of_a_workload_are_tables_apart(tmp_path: Path) -> None:
    """csv-samples names the workload and its variant: seq-read/cold and seq-read/warm are two
    tables, never one (a file naming only `variant` too)."""
    f = tmp_path / "s.csv"
    rows = [f"r,seq-read,{v},{s},{x}" for v, b in (("cold", 100.0), ("warm", 900.0))
            for s, k in (("ext4", 1.0), ("xfs", 1.02)) for x in (b * k, b * k * 1.01)]  # fmt: skip
    f.write_text("run_id,workload,variant,subject,value\n" + "\n".join(rows) + "\n")
    code, out, err = _judge(str(f), "--json")
    assert code == 0, err
    assert {c["workload"] for c in json.loads(out)} == {"seq-read/cold", "seq-read/warm"}


def test_options_a_recorded_source_answers_are_refused_not_ignored(tmp_path: Path) -> None:
    """--equivalence and --lower-is-better on a stored run, or on samples that carry their
    run's family and direction (csv-samples): one line, exit 2. On plain samples, honoured."""
    from fsbench.records.store import _read_results_json
    from fsbench.report.exports.export import export
    from fsbench.report.model.upgrade import upgrade

    stored = tmp_path / "results.json"
    stored.write_text((FIXTURES / "default_compare.json").read_text())
    samples = tmp_path / "s.csv"
    samples.write_text(export(upgrade(_read_results_json(stored)), "csv-samples"))
    db = str(tmp_path / "x.db")
    for source in (stored, samples):
        for opt in (["--equivalence", "5"], ["--lower-is-better"], ["--equivalence", "2"]):
            code, out, err = _judge(str(source), *opt, "--db", db)
            assert code == 2 and err.count("\n") == 1 and opt[0] in err and not out, err
    close = tmp_path / "c.csv"
    close.write_text("run,workload,subject,value\n" + "".join(
        f"r,w,{s},{v}\n" for s, vs in (("a", (100, 101, 99)), ("b", (103, 104, 102))) for v in vs
    ))  # fmt: skip
    for band, mark in (("2", "?"), ("20", "≈")):
        code, out, _ = _judge(str(close), "--equivalence", band, "--json")
        assert code == 0 and json.loads(out)[0]["mark"] == mark, out
    plain = tmp_path / "p.csv"
    plain.write_text(CSV)
    code, out, _ = _judge(str(plain), "--lower-is-better", "--json")
    marks = {(r["run"], r["subject"], r["against"]): r["mark"] for r in json.loads(out)}
    assert code == 0 and marks[("r1", "ntfs-3g", "ext4")] == "▲"
