"""`fsbench judge FILE|RUN`: the verdicts as a tool of their own, for samples from anywhere.

In: a CSV (a header line naming `run,workload,subject,value` and optionally `round`) or a
JSON file (a list of such records, or a stored run's results.json), or a stored run (id,
prefix or output directory). What `fsbench export` writes is read as it is: `--format json` is
a stored run, and `--format csv-samples` names `run_id`, the workload's `variant` and table
(`workload_id`: seq-read/cold and seq-read/warm are two tables), each sample's p99, and the
direction and verdict family the run recorded (`higher_is_better`, `family`), so its samples
are judged as the run judged them. Out: per run and workload the table `compare` prints for those
samples — each subject's centre and interval, its ratio to the baseline and to the fastest
with the interval and mark — and the legend; `--json` lists every printed comparison.

One procedure: the tables' verdicts come from fsbench.stats.decide.printed, as compare's and the
simulation's do. Tables are grouped by `run` (priors and families never cross runs); a
subject's kind is its driver's (the name before ':'), anything else one kind; the first
subject of a workload is its baseline unless --baseline. Samples from a file are one look
(they were not stopped early); a stored run, and samples that carry their family, are judged
at the families they recorded: --equivalence, --lower-is-better and --resolution, which would
judge them otherwise, are refused with one line (exit 2), never ignored.
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

from fsbench.cli.options import db_option
from fsbench.errors import UsageError

NEEDED = ("run", "workload", "subject", "value")


@dataclass(frozen=True)
class Row:
    run: str
    workload: str  # its table: the workload with its variant (seq-read/cold)
    subject: str
    value: float
    round: int | None = None
    # What fsbench's csv-samples export adds: the direction and the verdict family the run
    # recorded (JSON), the sample's p99 (µs) and the workload's parameters (JSON).
    higher_is_better: bool | None = None
    family: str | None = None
    p99: float | None = None
    params: str | None = None
    # The subject's volume after the run (fsbench's csv-samples): "failed" is shown, not ranked.
    integrity: str | None = None


def _row(rec: Mapping[str, Any], where: str) -> Row:
    rec = {**rec, "run": rec.get("run") or rec.get("run_id")}
    missing = [k for k in NEEDED if rec.get(k) in (None, "")]
    if missing:
        raise UsageError(f"{where}: no {', '.join(missing)} (need run, workload, subject, value)")
    value = _number(rec["value"], where, "value")
    if value is None or not value > 0 or value == float("inf"):
        raise UsageError(f"{where}: value {rec['value']!r} must be a positive finite number")
    rnd = rec.get("round", rec.get("sample"))
    try:
        rnd_i = None if rnd in (None, "") else int(rnd)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: round {rnd!r} is not a whole number") from None
    run, workload, subject = (str(rec[k]).strip() for k in ("run", "workload", "subject"))
    table, variant = str(rec.get("workload_id") or "").strip(), str(rec.get("variant") or "")
    if not table and variant.strip() and not workload.endswith(f"/{variant.strip()}"):
        table = f"{workload}/{variant.strip()}"  # the variants of a workload: tables apart
    hib = rec.get("higher_is_better")
    if isinstance(hib, str):
        hib = {"true": True, "false": False, "": None}.get(hib.strip().lower(), hib)
    if hib is not None and not isinstance(hib, bool):
        raise UsageError(f"{where}: higher_is_better {hib!r} is not true or false")
    fam = rec.get("family")
    return Row(
        run, table or workload, subject, value, rnd_i, hib,
        None if fam in (None, "") else (fam if isinstance(fam, str) else json.dumps(fam)),
        _number(rec.get("p99_us"), where, "p99_us"),
        None if rec.get("params") in (None, "") else str(rec["params"]),
        str(rec.get("integrity") or "").strip() or None,
    )  # fmt: skip


def _number(v: Any, where: str, what: str) -> float | None:
    if v in (None, ""):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: {what} {v!r} is not a number") from None


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
        missing = [k for k in NEEDED if k not in head and not (k == "run" and "run_id" in head)]
        if missing:
            raise UsageError(
                f"{path}: the header line must name run (or run_id),workload,subject,value "
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
    values' step over a value: fio's percentiles 1/64) is judged as compare judges fio's.
    Rows that carry the family their run recorded (fsbench's csv-samples) keep it, and their
    direction: judged as the run judged them."""
    from fsbench.records.schema import Run, Schedule, Subject
    from fsbench.stats import decide
    from fsbench.stats.describe import summarize
    from fsbench.stats.verdict import Family, prior_of

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
        results = [_result(wl, subj, rs, higher_is_better) for (wl, subj), rs in cells.items()]
        if all(r.verdict_family is not None for r in results):
            largest = max((Family.from_record(r.verdict_family) for r in results),
                          key=lambda f: f.n_tails)  # fmt: skip
        else:
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


def _result(workload: str, subject: str, rows: list[Row], higher_is_better: bool) -> Any:
    """One cell's samples as a Result, in the order they were taken; with each sample's p99
    and the workload's parameters when the rows carry them (a latency-bound table then judges
    its p99 column as compare does), and the family and direction the run recorded."""
    from fsbench.records.schema import INTEGRITY_FAILED_FLAG, Note, Result, Sample

    rows = sorted(rows, key=lambda r: (r.round is None, r.round or 0))
    first = rows[0]
    if len({(r.family, r.higher_is_better, r.params) for r in rows}) > 1:
        raise UsageError(
            f"run {first.run}, {workload}, {subject}: its samples disagree on their family, "
            "direction or parameters"
        )
    details = []
    if all(r.p99 is not None for r in rows):
        details = [Sample(value=r.value, seconds=0.0, extra={"lat_us": {"p99": r.p99}})
                   for r in rows]  # fmt: skip
    try:
        params = json.loads(first.params) if first.params else {}
        family = json.loads(first.family) if first.family else None
    except json.JSONDecodeError as e:
        raise UsageError(f"run {first.run}, {workload}, {subject}: not JSON ({e.msg})") from None
    if not isinstance(params, dict) or not isinstance(family, dict | None):
        raise UsageError(f"run {first.run}, {workload}, {subject}: params and family are objects")
    hib = first.higher_is_better
    # A volume that came back damaged: its figures shown, never the baseline or the best, as
    # the run that measured it ranked them (stats.baseline.ranked).
    notes = [Note(code=INTEGRITY_FAILED_FLAG)] if any(r.integrity == "failed" for r in rows) else []
    return Result(
        subject=subject,
        workload=workload.split("/", 1)[0],
        workload_id=workload,
        metric="value",
        unit="",
        higher_is_better=higher_is_better if hib is None else hib,
        samples=[r.value for r in rows],
        sample_details=details,
        params=params,
        verdict_family=family,
        notes=notes,
    )


def comparisons(run: Any, orders: Mapping[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Every comparison the run's tables print, as judge --json lists them."""
    from fsbench.report.model.judge import compared
    from fsbench.report.style import glyph

    return [c | {"mark": glyph(outcome)} for c, outcome in compared(run, orders)]


def gate_words(run: Any, orders: Mapping[str, list[str]] | None = None) -> list[str]:
    """Each comparison's outcome against its table's baseline (better, worse, same, open,
    none): what --fail-on reads, as decided, never read back from a mark."""
    from fsbench.report.model.judge import compared

    return [o for _, o in compared(run, orders, baseline_only=True)]


def print_tables(run: Any, orders: Mapping[str, list[str]] | None, con: Console) -> list[str]:
    """The run's tables (report/model/judge.py) as compare prints their verdict columns;
    returns each comparison's outcome against its baseline for --fail-on."""
    from fsbench.report.model.judge import tables
    from fsbench.report.views.judge import print_tables as show

    decided = tables(run, orders)
    show(decided, con)
    return [w for t in decided for w in t.outcomes]


@click.command("judge")
@click.argument("source", metavar="FILE|RUN")
@click.option(
    "--baseline",
    default=None,
    help="The subject every other is compared with (default: each workload's first).",
)
@click.option(
    "--lower-is-better",
    is_flag=True,
    help="The values are times or latencies (samples that do not say their direction).",
)
@click.option(
    "--equivalence",
    type=click.FloatRange(0.1, 50.0),
    default=None,
    help="≈ when the interval lies within ±PCT % (default 2; samples from a file that carry "
    "no family of their own).",
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
    equivalence: float | None,
    resolution: float,
    fail_on: str | None,
    as_json: bool,
    db: Path | None,
) -> None:
    """The ▲/▼/≈ verdicts of samples from anywhere (dd, fio, another tool, a stored run):
    the tables, intervals, marks and legend compare prints for them."""
    from fsbench.errors import EXIT_FAILED
    from fsbench.report.model.diff import check_fail_on, gate_failures

    gate = check_fail_on(fail_on)
    given = Given(equivalence is not None, lower_is_better, bool(resolution))
    band = (2.0 if equivalence is None else equivalence) / 100.0
    runs = _load(source, baseline, given, band, db, resolution / 100)
    warn_serial(runs)
    if as_json:
        click.echo(
            json.dumps(
                [c for run, o in runs for c in comparisons(run, o)], indent=2, ensure_ascii=False
            )
        )
        words = [w for run, o in runs for w in gate_words(run, o)]
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


@dataclass(frozen=True)
class Given:
    """The options that would judge samples otherwise than as they were recorded."""

    equivalence: bool
    lower_is_better: bool
    resolution: bool

    def refuse(self, recorded: str, family: bool = True, direction: bool = True) -> None:
        """One line and exit 2 for an option the source already answers (``recorded``: what
        it is), never ignored: its families (band, resolution) and/or its direction."""
        asked = (("--equivalence", self.equivalence and family),
                 ("--resolution", self.resolution and family),
                 ("--lower-is-better", self.lower_is_better and direction))  # fmt: skip
        said = [f for f, on in asked if on]
        if said:
            raise UsageError(
                f"{' and '.join(said)}: {recorded} is judged as it was recorded (its run's "
                "equivalence band and resolutions, each result's direction); to judge it "
                "otherwise, give the samples without those columns"
            )


def _load(
    source: str,
    baseline: str | None,
    given: Given,
    band: float,
    db: Path | None,
    resolution: float = 0.0,
) -> list[tuple[Any, dict[str, list[str]] | None]]:
    path = Path(source).expanduser()
    if path.is_file() and path.suffix != ".db" and not _is_results_json(path):
        rows = read_rows(path)
        given.refuse(f"{path} (samples with the family their run recorded)",
                     direction=False, family=any(r.family is not None for r in rows))  # fmt: skip
        if any(r.higher_is_better is not None for r in rows):
            given.refuse(f"{path} (samples that say their direction)", family=False)
        hib = not given.lower_is_better
        return list(runs_of(rows, baseline, hib, band, resolution))
    given.refuse("a stored run")
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
