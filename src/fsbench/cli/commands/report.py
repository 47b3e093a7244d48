"""`fsbench report`, `fsbench diff` and `fsbench export`: what a stored run says, as a page, as a
comparison with another run, or as data. They read runs; they never measure.

RUN is a run id, a unique prefix of one, or a run's output directory (see `fsbench show --list`).
Bad input (an unknown run, a bad format, an unwritable path) is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsbench.cli.options import db_option
from fsbench.errors import UsageError

if TYPE_CHECKING:
    # Imported where used: `fsbench --help` should not pay for pydantic and matplotlib.
    from fsbench.records.schema import Run
    from fsbench.records.store import Store
    from fsbench.report.model.diff import ResultDiff, RunDiff


def load_run(store: Store, ref: str) -> Run:
    """A stored run as every command shows it: brought to the current schema once (its
    centres and verdicts, report/model/upgrade.py), its subjects with their driver's quirks."""
    from fsbench.report.model.upgrade import upgrade

    return upgrade(with_driver_quirks(store.load_run(ref)))


def with_driver_quirks(run: Run) -> Run:
    """Runs stored before subjects carried their driver's quirks (schema.Quirk) get them from
    today's driver table, so an old ntfs-3g run keeps its big_writes remark. A subject that
    recorded its quirks keeps what it recorded."""
    from fsbench.lab.drivers import DRIVERS

    for s in run.subjects:
        known = DRIVERS.get(s.driver)
        if not s.quirks and known is not None and known.quirks:
            s.quirks = list(known.quirks)
    return run


def _store(db: Path | None, refs: list[str]) -> Store:
    """The results store, or (when none exists yet) an in-memory one that can still read run
    directories: looking at runs must not create a database."""
    from fsbench.records.store import Store, default_db_path

    db_path = db or default_db_path()
    if db_path.exists():
        return Store(db_path)
    for ref in refs:
        if not ref.strip() or not _expand(ref).exists():
            raise UsageError(f"no run {ref!r}: no runs stored yet ({db_path} does not exist)")
    return Store(":memory:")


def _expand(ref: str) -> Path:
    """~ expanded; a `~name` of no such user stays as written (Path raises on it)."""
    try:
        return Path(ref).expanduser()
    except RuntimeError:
        return Path(ref)


def out_dir_of(store: Store, ref: str, run: Run) -> Path | None:
    """Where the run's results.json lives: the directory given, or the one the store recorded."""
    p = _expand(ref)
    if p.is_dir():
        return p
    if p.is_file():
        return p.parent
    for row in store.list_runs(limit=1_000_000):
        if row["run_id"] == run.run_id and row.get("out_dir"):
            d = Path(row["out_dir"])
            return d if d.is_dir() else None
    return None


def _default_html(store: Store, ref: str, run: Run) -> Path:
    d = out_dir_of(store, ref, run)
    if d is not None and os.access(d, os.W_OK):
        return d / "report.html"
    return Path.cwd() / f"report-{run.run_id}.html"


def _check_writable(path: Path, what: str) -> Path:
    if path.is_dir():
        path = path / "report.html"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{what} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{what} {path}: cannot write there")
    return path


@click.command("report")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the page (default: report.html in the run's output directory, "
    "else ./report-RUN_ID.html).",
)
@click.option(
    "--with",
    "others",
    multiple=True,
    metavar="RUN",
    help="Also show this run against another one (repeatable): what differs between the "
    "environments and, per matching result, the ratio and its significance.",
)
@db_option
def report(run_ref: str, html_path: Path | None, others: tuple[str, ...], db: Path | None) -> None:
    """Write the self-contained HTML report of a stored RUN (no network needed to view it)."""
    with _store(db, [run_ref, *others]) as store:
        run = load_run(store, run_ref)
        other_runs = [load_run(store, o) for o in others]
        path = html_path if html_path is not None else _default_html(store, run_ref, run)
    path = _check_writable(path, "--html")
    # matplotlib (imported with the renderer) writes caches under $HOME: only once the input
    # is known to be good, so a refused command leaves nothing behind.
    from fsbench.report.views.sections import render_html

    page = render_html(run, compare_with=other_runs or None)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    click.echo(str(path))


@click.command("diff")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--force",
    is_flag=True,
    help="Compare even when kernel, driver versions, mount or mkfs options, fio or the "
    "backing differ (they are then listed as warnings).",
)
@click.option(
    "--fail-on",
    "fail_on",
    default=None,
    metavar="worse",
    help="Exit 1 when any result of B is decided worse than A's (▼): a regression gate "
    "for CI. The comparison is printed as without it.",
)
@db_option
def diff(
    run_a: str, run_b: str, as_json: bool, force: bool, fail_on: str | None, db: Path | None
) -> None:
    """Per matching result of RUN_A and RUN_B: both geometric means, B / A with its interval,
    and the verdict (fsbench.stats.verdict: ▲/▼ when the ratio's interval excludes 1)."""
    from fsbench.report.model.diff import check_fail_on, diff_runs

    gate = check_fail_on(fail_on)
    with _store(db, [run_a, run_b]) as store:
        a = load_run(store, run_a)
        b = load_run(store, run_b)
    from fsbench.report.views.tune import tune_diff

    d = diff_runs(a, b)
    tuned = tune_diff(a, b)  # two `fsbench tune` runs: their changes side by side too
    if not d.results and tuned is None:
        raise UsageError(
            f"runs {a.run_id} and {b.run_id} share no result (same subject, workload and "
            "parameters): nothing to compare"
        )
    matters = d.mattering
    if matters and not force:
        shown = "; ".join(f"{e.what}: {e.a} → {e.b}" for e in matters[:3])
        more = f" (and {len(matters) - 3} more)" if len(matters) > 3 else ""
        raise UsageError(
            f"the runs' environments differ in ways that change results: {shown}{more}; "
            "use --force to compare anyway"
        )
    for e in matters:
        click.echo(f"fsbench: warning: {e.what} differs: {e.a} → {e.b}", err=True)
    info = [e.what for e in d.environment if not e.matters]
    if info:
        click.echo(f"fsbench: note: also different (for information): {', '.join(info)}", err=True)
    if as_json:
        click.echo(json.dumps({**d.to_dict(), **({"tune": tuned} if tuned else {})}, indent=2))
    else:
        if d.results:
            _print_diff(d)
        if tuned:
            from fsbench.report.views.tune import tune_diff_lines

            con = Console(soft_wrap=False)
            for line in tune_diff_lines(tuned):
                con.print(line)
    _gate(d, gate)


def _gate(d: RunDiff, gate: str | None) -> None:
    """`--fail-on`: exit 1 with one line naming what failed (report.diff.gate_failures)."""
    from fsbench.errors import EXIT_FAILED
    from fsbench.report.model.diff import FAIL_ON, gate_failures

    n = gate_failures((r.verdict for r in d.results), gate)
    if n and gate is not None:
        named = [f"{r.subject} · {r.title}" for r in d.results if r.verdict in FAIL_ON[gate]][:3]
        more = f" and {n - len(named)} more" if n > len(named) else ""
        click.echo(
            f"fsbench: --fail-on {gate}: {n} of {len(d.results)} results {gate} in B "
            f"({'; '.join(named)}{more})",
            err=True,
        )
        # sys.exit, not click's Exit: main() runs click with standalone_mode=False, where
        # click returns Exit's code instead of exiting with it.
        sys.exit(EXIT_FAILED)


def _print_diff(d: RunDiff, con: Console | None = None) -> None:
    """A table per workload, in the report's order (diff_runs), that fits 80 columns without
    splitting a name or a figure: subject, both centres (the geometric means), B / A with its
    interval and mark; the verdict's words from 100 columns; the legend the model words.
    Under each table the figures that moved, broken between figures only."""
    from fsbench.report.model.diff import ratio_text, verdict_class
    from fsbench.report.model.naming import confidence_text
    from fsbench.report.views.table import pack
    from fsbench.units import fmt_value

    con = con or Console()
    wide = con.width >= 100
    styles = {"better": "green", "worse": "red", "ns": "yellow", "dim": "dim"}
    conf = d.family.confidence
    con.print(Text(f"B = {d.run_b}  against  A = {d.run_a}", style="bold"))
    by_title: dict[str, list[ResultDiff]] = {}
    for r in d.results:
        by_title.setdefault(r.title, []).append(r)
    for title, rows in by_title.items():
        t = Table(title=Text(f"{title}  ({rows[0].unit})"), title_justify="left")
        t.add_column("subject", style="bold", no_wrap=True)
        t.add_column("A", justify="right", no_wrap=True)
        t.add_column("B", justify="right", no_wrap=True)
        t.add_column(f"B / A [{confidence_text(conf)} %]", justify="right", no_wrap=True)
        if wide:
            t.add_column("verdict", no_wrap=True, overflow="ellipsis")
        for r in rows:
            a = fmt_value(r.centre_a) if r.status_a == "ok" else r.status_a
            b = fmt_value(r.centre_b) if r.status_b == "ok" else r.status_b
            cells: list[str | Text] = [
                r.subject,
                a,
                b,
                Text(ratio_text(r), style=styles[verdict_class(r)]),
            ]
            if wide:
                cells.append(Text(_short_test(r), style="dim"))
            t.add_row(*cells)
        con.print(t)
        for r in rows:
            if r.probe_changes:
                n = len(r.probe_changes)
                items = [
                    Text(c + (";" if i < n - 1 else "")) for i, c in enumerate(r.probe_changes)
                ]
                for line in pack(items, con.width, f"  {r.subject}: ", indent="    ", sep=" "):
                    con.print(line, overflow="fold")
    for line in d.subject_changes:
        style = "bold red" if ": integrity " in line else "yellow"
        con.print(Text(f"changed: {line}", style=style))
    if d.only_a:
        con.print(Text(f"only in A ({len(d.only_a)}): " + ", ".join(d.only_a[:8]), style="dim"))
    if d.only_b:
        con.print(Text(f"only in B ({len(d.only_b)}): " + ", ".join(d.only_b[:8]), style="dim"))
    con.print(Text(d.legend, style="dim"))


def _short_test(r: ResultDiff) -> str:
    """The verdict's word (its confidence is the column head's)."""
    if r.not_comparable:
        return "not comparable"
    if r.confidence is None:
        return "untested"
    return r.verdict


@click.command("export")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--format",
    "fmt",
    default="json",
    show_default=True,
    metavar="json|csv|csv-samples|markdown",
    help="json (results.json with the report's verdicts), csv (a row per result, with its "
    "verdict against the table's baseline, IOPS and p99), csv-samples (a row per sample) or "
    "markdown (the answer, a table per workload, the diskmark grid, the environment: for an "
    "issue or a forum post).",
)
@click.option(
    "--output",
    "output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write to FILE instead of standard output ('-': standard output).",
)
@click.option(
    "--figures",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Also write the report's plots to DIR as PNG and SVG (markdown links them).",
)
@db_option
def export(
    run_ref: str, fmt: str, output: Path | None, figures: Path | None, db: Path | None
) -> None:
    """Print (or write) a stored RUN as JSON, CSV (per result or per sample) or markdown, rows
    in the report's order."""
    from fsbench.report.exports.export import ALIASES, FORMATS
    from fsbench.report.exports.export import export as do_export

    if fmt.strip().lower() not in (*FORMATS, *ALIASES):
        raise UsageError(f"--format {fmt!r}: give {', '.join(FORMATS)}")
    if output is not None and str(output) == "-":
        output = None  # the usual spelling of standard output
    if output is not None:
        if output.is_dir():
            raise UsageError(f"--output {output}: is a directory; give a file name")
        parent = output.parent if str(output.parent) else Path(".")
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise UsageError(f"--output {output}: cannot write there")
    if figures is not None:
        if figures.exists() and not figures.is_dir():
            raise UsageError(f"--figures {figures}: not a directory")
        parent = figures if figures.is_dir() else figures.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise UsageError(f"--figures {figures}: cannot write there")
    with _store(db, [run_ref]) as store:
        run = load_run(store, run_ref)
    drawn = None
    if figures is not None:
        from fsbench.report.exports.export import write_figures

        drawn = write_figures(run, figures)
        click.echo(f"fsbench: {len(drawn)} figures (PNG and SVG) in {figures}", err=True)
    text = do_export(run, fmt, drawn)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
