"""`fsbench judge FILE|RUN`: the verdicts as a tool of their own, for samples from anywhere.

In: a CSV (a header line naming `run,workload,subject,value` and optionally `round`) or a
JSON file (a list of such records, or a stored run's results.json), or a stored run (id,
prefix or output directory). Out: per run and workload the table `compare` prints for those
samples — each subject's centre and interval, its ratio to the baseline and to the fastest
with the interval and mark — and the legend; `--json` lists every printed comparison.

One procedure: the tables' verdicts come from fsbench.stats.decide.printed, as compare's and the
simulation's do. Tables are grouped by `run` (priors and families never cross runs); a
subject's kind is its driver's (the name before ':'), anything else one kind; the first
subject of a workload is its baseline unless --baseline. Samples from a file are one look
(they were not stopped early); a stored run is judged at the families it recorded.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fsbench.cli.options import db_option
from fsbench.errors import UsageError

GLYPH = {"better": "▲", "worse": "▼", "same": "≈", "open": "?", "none": "?"}
NEEDED = ("run", "workload", "subject", "value")


@dataclass(frozen=True)
class Row:
    run: str
    workload: str
    subject: str
    value: float
    round: int | None = None


def _row(rec: Mapping[str, Any], where: str) -> Row:
    missing = [k for k in NEEDED if rec.get(k) in (None, "")]
    if missing:
        raise UsageError(f"{where}: no {', '.join(missing)} (need run, workload, subject, value)")
    try:
        value = float(rec["value"])
    except (TypeError, ValueError):
        raise UsageError(f"{where}: value {rec['value']!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{where}: value {rec['value']!r} must be a positive finite number")
    rnd = rec.get("round")
    try:
        rnd_i = None if rnd in (None, "") else int(rnd)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: round {rnd!r} is not a whole number") from None
    names = [str(rec[k]).strip() for k in ("run", "workload", "subject")]
    return Row(*names, value=value, round=rnd_i)


def read_rows(path: Path) -> list[Row]:
    """The samples of a CSV or JSON file; one line and exit 2 for anything malformed."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read it ({e})") from None
    if text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
        if isinstance(data, dict) and "samples" in data:
            data = data["samples"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise UsageError(f"{path}: JSON must be a list of {{run, workload, subject, value}}")
        rows = [_row(r, f"{path}: record {i + 1}") for i, r in enumerate(data)]
    else:
        reader = csv.DictReader(text.splitlines())
        head = [h.strip() for h in reader.fieldnames or []]
        missing = [k for k in NEEDED if k not in head]
        if missing:
            raise UsageError(
                f"{path}: the header line must name run,workload,subject,value "
                f"(optional round); missing {', '.join(missing)}"
            )
        rows = []
        for i, rec in enumerate(reader):
            if None in rec or len(rec) != len(head):
                raise UsageError(f"{path}: line {i + 2} has {len(rec)} fields, not {len(head)}")
            clean = {(k or "").strip(): (v or "").strip() for k, v in rec.items()}
            rows.append(_row(clean, f"{path}: line {i + 2}"))
    if not rows:
        raise UsageError(f"{path}: no samples")
    return rows


def kind_of(subject: str) -> str:
    """A subject's driver kind from its driver name (the part before ':'); else one kind."""
    from fsbench.lab.drivers import DRIVERS

    d = DRIVERS.get(subject.split(":", 1)[0].split("@", 1)[0])
    return d.kind if d is not None else "other"


def runs_of(
    rows: Iterable[Row],
    baseline: str | None,
    higher_is_better: bool,
    band: float,
    resolution: float = 0.0,
) -> list[tuple[Any, dict[str, list[str]]]]:
    """One Run per `run` of the rows, its results stamped as compare stamps them (one look),
    with each workload's subject order (its baseline first). A declared ``resolution`` (the
    values' step over a value: fio's percentiles 1/64) is judged as compare judges fio's."""
    from fsbench.records.schema import Result, Run, Schedule, Subject
    from fsbench.stats import decide
    from fsbench.stats.describe import summarize
    from fsbench.stats.verdict import prior_of

    rows = list(rows)
    if baseline is not None and not any(r.subject == baseline for r in rows):
        raise UsageError(f"--baseline {baseline!r}: no such subject in the samples")
    by_run: dict[str, dict[tuple[str, str], list[Row]]] = {}
    for r in rows:
        by_run.setdefault(r.run, {}).setdefault((r.workload, r.subject), []).append(r)
    out = []
    for run_id, cells in by_run.items():
        orders: dict[str, list[str]] = {}
        for wl, subj in cells:
            orders.setdefault(wl, []).append(subj)
        if baseline is not None:
            orders = {w: sorted(o, key=lambda s: s != baseline) for w, o in orders.items()}
        names = list(dict.fromkeys(s for _, s in cells))
        kinds = {s: kind_of(s) for s in names}
        results = []
        for (wl, subj), rs in cells.items():
            rs = sorted(rs, key=lambda r: (r.round is None, r.round or 0))
            results.append(
                Result(
                    subject=subj,
                    workload=wl,
                    workload_id=wl,
                    metric="value",
                    unit="",
                    higher_is_better=higher_is_better,
                    samples=[r.value for r in rs],
                )
            )
        largest = decide.stamp(results, kinds, looks=1, band=band)
        for res in results:
            if resolution:
                res.verdict_family = {**(res.verdict_family or {}), "resolution": resolution}
            sm = summarize(res.samples, prior=prior_of(res))
            res.center, res.median, res.ci95, res.cv = sm.center, sm.median, sm.ci95, sm.cv
        run = Run(
            run_id=run_id,
            started="",
            status="complete",
            subjects=[Subject(id=s, driver=s.split(":", 1)[0], fs="?", kind="fake") for s in names],
            results=results,
            schedule=Schedule(adaptive=False, verdict=decide.schedule_record(largest)),
        )
        out.append((run, orders))
    return out


def comparisons(
    run: Any, orders: Mapping[str, list[str]] | None = None, baseline_only: bool = False
) -> list[dict[str, Any]]:
    """Every comparison the run's tables print, as judge --json lists them (``baseline_only``:
    those against each table's baseline, what --fail-on reads)."""
    from fsbench.stats import decide

    order = [s.id for s in run.subjects]
    out = []
    for wid, p in decide.printed(run.results, order, orders).items():
        hib0 = next(r.higher_is_better for r in run.results if (r.workload_id or r.workload) == wid)
        for (col, ref, subj), v in _printed_pairs(p):
            if baseline_only and ref != p.looks[col].baseline:
                continue
            hib = hib0 if col == "rate" else False
            lo, hi = v.interval if v.interval else (None, None)
            out.append(
                {
                    "run": run.run_id,
                    "workload": wid if col == "rate" else f"{wid} {col}",
                    "subject": subj,
                    "against": ref,
                    "ratio": v.ratio,
                    "low": lo,
                    "high": hi,
                    "mark": GLYPH[_outcome(v, hib)],
                }
            )
    return out


def _printed_pairs(p: Any) -> list[tuple[tuple[str, str, str], Any]]:
    """Each printed comparison once per (column, reference, subject): every subject against
    the baseline and against the fastest (the baseline's row against the fastest too)."""
    out = []
    for col, tl in p.looks.items():
        subjects = dict.fromkeys(s for pair in tl.verdicts for s in pair)
        for ref in dict.fromkeys((tl.baseline, tl.best)):
            for s in subjects:
                v = tl.against(ref, s)
                if v is not None and ref is not None:
                    out.append(((col, ref, s), v))
    return out


def _outcome(v: Any, hib: bool) -> str:
    from fsbench.report.naming import outcome

    return outcome(v, hib)


def print_tables(run: Any, orders: Mapping[str, list[str]] | None, con: Console) -> list[str]:
    """The run's tables as compare prints their verdict columns; returns each comparison's
    word (better, worse, same, open) for --fail-on."""
    from fsbench.report.naming import ci_text, outcome, ratio_cell
    from fsbench.stats import decide
    from fsbench.stats.verdict import Family
    from fsbench.units import fmt_value

    words: list[str] = []
    order = [s.id for s in run.subjects]
    per = {(r.workload_id or r.workload, r.subject): r for r in run.results}
    for wid, p in decide.printed(run.results, order, orders).items():
        for col, tl in p.looks.items():
            if tl.baseline is None:
                continue
            base = per[(wid, tl.baseline)]
            hib = base.higher_is_better if col == "rate" else False
            title = f"{run.run_id} · {wid}" + ("" if col == "rate" else f" · {col}")
            t = Table(title=title, title_justify="left")
            for c in ("subject", "±CI95", f"vs {tl.baseline}", f"vs {tl.best}", "n"):
                t.add_column(c, justify="left" if c == "subject" else "right", no_wrap=True)
            subjects = [s for s in (orders or {}).get(wid, order) if (wid, s) in per]
            subjects = subjects or [s for s in order if (wid, s) in per]
            for s in subjects:
                r = per[(wid, s)]
                vb, vf = tl.against(tl.baseline, s), tl.against(tl.best, s)
                cells = [
                    ratio_cell(v, hib)
                    if v is not None
                    else ("baseline" if s == tl.baseline else "fastest")
                    for v in (vb, vf)
                ]
                centre = ci_text(r) if col == "rate" else fmt_value(None)
                t.add_row(s, centre, *cells, str(len(r.samples)))
                if vb is not None:
                    words.append(outcome(vb, hib))  # the gate: against the baseline
            con.print(t)
            fam = Family.from_record(base.verdict_family)
            con.print(f"  {fam.legend()}", style="dim")
    return words


@click.command("judge")
@click.argument("source", metavar="FILE|RUN")
@click.option(
    "--baseline",
    default=None,
    help="The subject every other is compared with (default: each workload's first).",
)
@click.option("--lower-is-better", is_flag=True, help="The values are times or latencies.")
@click.option(
    "--equivalence",
    type=click.FloatRange(0.1, 50.0),
    default=2.0,
    show_default=True,
    help="≈ when the interval lies within ±PCT % (samples from a file).",
)
@click.option(
    "--resolution",
    type=click.FloatRange(0.0, 50.0, max_open=True),
    default=0.0,
    help="The values' step in % of a value (fio's latency percentiles: 1.5625), so a step alone "
    "never makes a mark; 0: read from the values (where a side's samples tie, the last digit "
    "they are written to). Samples from a file.",
)
@click.option(
    "--fail-on",
    "fail_on",
    default=None,
    metavar="worse",
    help="Exit 1 when any comparison is ▼ (a regression gate).",
)
@click.option("--json", "as_json", is_flag=True, help="Every printed comparison as JSON.")
@db_option
def judge_command(
    source: str,
    baseline: str | None,
    lower_is_better: bool,
    equivalence: float,
    resolution: float,
    fail_on: str | None,
    as_json: bool,
    db: Path | None,
) -> None:
    """The ▲/▼/≈ verdicts of samples from anywhere (dd, fio, another tool, a stored run):
    the tables, intervals, marks and legend compare prints for them."""
    from fsbench.errors import EXIT_FAILED
    from fsbench.report.diff import check_fail_on, gate_failures

    gate = check_fail_on(fail_on)
    runs = _load(source, baseline, not lower_is_better, equivalence / 100.0, db, resolution / 100)
    warn_serial(runs)
    if as_json:
        click.echo(
            json.dumps(
                [c for run, o in runs for c in comparisons(run, o)], indent=2, ensure_ascii=False
            )
        )
        words = [
            {"▲": "better", "▼": "worse"}.get(c["mark"], "open")
            for run, o in runs
            for c in comparisons(run, o, baseline_only=True)
        ]
    else:
        con = Console()
        words = [w for run, o in runs for w in print_tables(run, o, con)]
    failing = gate_failures(words, gate)
    if failing:
        click.echo(f"fsbench: {failing} comparison(s) worse (--fail-on {gate})", err=True)
        raise SystemExit(EXIT_FAILED)


def warn_serial(runs: Iterable[tuple[Any, Any]]) -> None:
    """One line on stderr for a run whose samples clearly depend on the one before them
    (fsbench.stats.serial): the intervals assume they do not."""
    from fsbench.stats.decide import tables
    from fsbench.stats.serial import serial

    for run, _o in runs:
        s = serial([[list(r.samples) for r in rs] for rs in tables(run.results).values()])
        if s.flagged:
            click.echo(f"fsbench: warning: run {run.run_id}: {s.words()}", err=True)


def _load(
    source: str,
    baseline: str | None,
    higher_is_better: bool,
    band: float,
    db: Path | None,
    resolution: float = 0.0,
) -> list[tuple[Any, dict[str, list[str]] | None]]:
    path = Path(source).expanduser()
    if path.is_file() and path.suffix != ".db" and not _is_results_json(path):
        return list(runs_of(read_rows(path), baseline, higher_is_better, band, resolution))
    if resolution:
        raise UsageError(
            "--resolution is for samples from a file: a stored run is judged at the "
            "resolutions it recorded (fio's percentiles already carry theirs)"
        )
    from fsbench.cli.commands.report import _store, load_run

    with _store(db, [source]) as store:
        run = load_run(store, source)  # a results.json by any name, a directory or an id
    orders = None
    if baseline is not None:
        if not any(s.id == baseline for s in run.subjects):
            raise UsageError(f"--baseline {baseline!r}: no such subject in run {run.run_id}")
        orders = {
            (r.workload_id or r.workload): sorted(
                [s.id for s in run.subjects], key=lambda s: s != baseline
            )
            for r in run.results
        }
    return [(run, orders)]


def _is_results_json(path: Path) -> bool:
    if not path.is_file() or path.suffix != ".json":
        return False
    try:
        head = path.read_text()[:4096]
    except (OSError, UnicodeDecodeError):
        return False
    return '"schema_version"' in head and '"run_id"' in head
