"""Results to share, from a stored real run: `export --format markdown` (the answer, a table per
workload with median, ratio, interval and mark, the environment in one line), CSV with the
verdict against the table's baseline and every sample, `--figures DIR` (the report's plots as
PNG and SVG), and rows in the report's order everywhere."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

from click.testing import CliRunner

from fsbench.cli.app import cli
from fsbench.cli.commands.report import with_driver_quirks
from fsbench.records.schema import Run
from fsbench.report.exports.export import to_csv, to_markdown, write_figures
from fsbench.report.model.answer import answers
from fsbench.report.model.comparison import verdict_of
from fsbench.report.model.grouping import groups, report_order
from fsbench.report.model.naming import result_title
from fsbench.report.model.notes import counted_lines, table_notes

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"


def _run() -> Run:
    return with_driver_quirks(Run.model_validate_json(FIXTURE.read_text()))


def test_markdown_has_the_answer_a_table_per_workload_and_the_environment() -> None:
    run = _run()
    md = to_markdown(run)
    lines = md.splitlines()
    for a in answers(run):
        line = next(ln for ln in lines if ln.startswith(f"- **{a.title}**: "))
        assert a.winner is not None
        crown = f"**{a.winner.subject}**" if a.separated else f"not separated — {a.winner.subject}"
        assert line.startswith(f"- **{a.title}**: {crown} ")
        assert line.count(" › ") == len(a.others)
    for title in ("seq-write/fsync", "seq-read/cold"):
        assert f"### {title}" in lines
    cols = ("subject", "MiB/s (geometric mean)", "95 % CI", "vs ext4", "interval", "mark")
    head = "| " + " | ".join((*cols, "CPU s/GiB", "cache", "n")) + " |"
    assert lines.count(head) == 2
    xfs = next(ln for ln in lines if ln.startswith("| xfs | 3,325 |"))
    # The terminal's ratio, interval, mark, CPU and n (with why sampling stopped).
    assert "| 1.56× | 0.53–4.55 | ? | 0.3+0.0+0.1 |  | 3… |" in xfs
    env = next(ln for ln in lines if ln.startswith("Environment: "))
    assert "Linux 6.18.44" in env and "backing ram" in env and "fio-3.33" in env
    assert "raise --repeat" not in md
    # Under each table the terminal's counted notes, in its words (notes.table_notes).
    for g in groups(run):
        for line in counted_lines(table_notes(g.results(), run.schedule, detail=False)):
            assert f"{line}  " in lines


def test_csv_has_verdict_columns_and_every_sample() -> None:
    run = _run()
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert len(rows) == len(run.results)
    by = {(r["subject"], r["variant"]): r for r in rows}
    ext4, xfs = by[("ext4", "fsync")], by[("xfs", "fsync")]
    assert ext4["verdict"] == "baseline" and ext4["baseline"] == "ext4"
    res = {(r.subject, r.params.get("variant")): r for r in run.results}
    v = verdict_of(res[("ext4", "fsync")], res[("xfs", "fsync")])
    assert xfs["verdict"] == "open" and float(xfs["ratio"]) == v.ratio
    assert v.interval is not None and float(xfs["ratio_low"]) == v.interval[0]
    assert by[("ntfs-3g", "fsync")]["verdict"] == "worse"
    samples = [float(x) for x in xfs["samples"].split(";")]
    assert samples == [float(f"{x:.6g}") for x in res[("xfs", "fsync")].samples]
    assert "ci-wide" in xfs["note_codes"] and "raise --repeat" not in xfs["flags"]


def test_rows_follow_the_reports_order() -> None:
    run = _run()
    # Stored in another order than the report shows (by name; the workloads' order stays).
    run.results.sort(key=lambda r: r.subject)
    order = [(result_title(r), r.subject) for r in report_order(run)]
    assert order[0] == ("seq-write/fsync", "ext4") and order[1] == ("seq-write/fsync", "ext2")
    assert order[8] == ("seq-read/cold", "ext4")
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert [(f"{r['workload']}/{r['variant']}", r["subject"]) for r in rows] == order


def test_figures_are_written_as_png_and_svg(tmp_path: Path) -> None:
    drawn = write_figures(_run(), tmp_path / "fig")
    assert len(drawn) >= 2 and drawn[0][0] == "seq-write/fsync"
    for _title, png in drawn:
        assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        svg = png.with_suffix(".svg").read_text()
        assert "<svg" in svg and "</svg>" in svg
    md = to_markdown(_run(), drawn)
    assert f"![seq-write/fsync]({drawn[0][1]})" in md


def test_export_command_markdown_and_figures(tmp_path: Path) -> None:
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    shutil.copy(FIXTURE, out_dir / "results.json")
    db = ["--db", str(tmp_path / "results.db")]
    runner = CliRunner()
    res = runner.invoke(cli, ["export", str(out_dir), "--format", "markdown", *db])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("## fsbench 20261124-220519-2dd0")
    fig = tmp_path / "fig"
    res = runner.invoke(
        cli, ["export", str(out_dir), "--format", "csv", "--figures", str(fig), *db]
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.suffix for p in fig.iterdir()).count(".png") >= 2
    bad = runner.invoke(cli, ["export", str(out_dir), "--figures", str(out_dir / "results.json")])
    assert bad.exit_code == 2 or "not a directory" in str(bad.exception)


def _diff_text(width: int) -> tuple[str, list[str]]:
    from rich.console import Console

    from fsbench.cli.commands.report import _print_diff
    from fsbench.report.model.diff import diff_runs

    a = _run()
    b = a.model_copy(deep=True)
    b.run_id = "20261125-000000-bbbb"
    b.results.reverse()  # stored in another order: the diff still follows the report's
    for r in b.results:
        r.samples = [x * 1.1 for x in r.samples]
    d = diff_runs(a, b)
    changes = [f"cross-CPU wake-ups per GiB {65 + i} → {58 + i}" for i in range(6)]
    d.results[0].probe_changes = changes
    con = Console(width=width, record=True, color_system=None)
    _print_diff(d, con)
    return con.export_text(), changes


def test_diff_follows_the_report_and_fits_80_and_100_columns() -> None:
    for width in (80, 100):
        out, changes = _diff_text(width)
        lines = out.splitlines()
        assert all(len(ln) <= width for ln in lines), width
        assert "seq-write/fsync" in out and "seq-write/f" + "\n" not in out
        for c in changes:  # every figure whole on one line
            assert any(c in ln for ln in lines), (width, c)
        rows = [ln.split("│")[1].strip() for ln in lines if ln.startswith("│")]
        assert rows[:3] == ["ext4", "ext2", "xfs"]  # A's report order, not B's store order
        assert out.index("seq-write/fsync") < out.index("seq-read/cold")
