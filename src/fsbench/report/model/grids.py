"""The report's grids as records, decided once (report/model/ puts them in the `Report`): the
Iozone matrix (per operation a row per file and record size, a cell per subject, the best of
the row, each subject's comparison with the baseline) and the diskmark grid (KDiskMark's tests
as rows, per subject MB/s with its mark, IOPS and p99). Every comparison is the one the run
decided (Run.verdicts) or comparison.vs_cell's; renderers format these records.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fsbench.records.schema import Result, Run
from fsbench.report.model.answer import rank
from fsbench.report.model.comparison import Comparison
from fsbench.report.model.decided import Decided, leaders
from fsbench.report.model.grouping import groups, measured_subjects, usable
from fsbench.report.model.naming import baseline_result, centre_of, ci_text
from fsbench.report.model.summary import Finding, findings
from fsbench.stats import latency
from fsbench.units import fmt_ratio, fmt_value, size_text


# -- the Iozone matrix ---------------------------------------------------------------------------
@dataclass
class MatrixCell:
    """One subject's figure in a row: its centre, '' when it has none here."""

    text: str  # '2,203', or the status of a result without a figure
    outcome: str  # the look (style.OUTCOMES): best, plain, unranked (no figure), empty
    interval: str = ""  # '1,370 – 3,570' (the page's hover), or the error


@dataclass
class MatrixRatio:
    """A subject's comparison with the baseline in one row ('–' without one)."""

    comparison: Comparison | None
    outcome: str
    text: str  # the cell: '0.25× 0.20–0.31 ▼'


@dataclass
class MatrixRow:
    file: str
    record: str
    cells: list[MatrixCell]
    ratios: list[MatrixRatio]  # the subjects after the first, against it


@dataclass
class MatrixTable:
    op: str  # the operation's label ('write', 'write-j4')
    unit: str
    subjects: list[str]
    rows: list[MatrixRow]

    @property
    def baseline(self) -> str:
        return self.subjects[0] if self.subjects else ""


@dataclass
class Matrix:
    tables: list[MatrixTable]
    skipped: list[str]  # '2 results unsupported: file larger than the image'


def best_of(results: list[Result]) -> Result | None:
    """The fastest to star: none when fewer than two ranked, or when the leaders are not
    separated (answer.leaders, the answer line's rule)."""
    ok = rank(results)
    if len(ok) < 2 or len(leaders(ok)) > 1:
        return None
    return ok[0]


def _matrix_cell(r: Result | None, best: Result | None) -> MatrixCell:
    if r is None:
        return MatrixCell("", "empty")
    if not usable(r):
        return MatrixCell(r.status, "unranked", r.error or "")
    return MatrixCell(
        fmt_value(centre_of(r)), "best" if r is best else "plain", ci_text(r, "range")
    )


def _ratio(decide: Decided, base: Result | None, r: Result | None) -> MatrixRatio:
    if base is None or r is None or not usable(base) or not usable(r):
        return MatrixRatio(None, "empty", "–")
    c, said, text, _ = decide(base, r)
    return MatrixRatio(c, said, text)


def matrix(run: Run, decide: Decided) -> Matrix | None:
    """The run's Iozone results, one table per operation (None without any). Cells nobody
    could run (files larger than the image) are counted, not listed."""
    order = measured_subjects(run)
    skipped: dict[str, int] = {}
    tables = []
    for g in groups(run):
        if not g.matrix:
            continue
        subjects = g.subjects(order)
        rows = []
        for (fs, rs), per in g.cells.items():  # type: ignore[misc]
            if not any(usable(r) for r in per.values()):
                for r in per.values():
                    why = f"{r.status}: {(r.error or r.status).split(';')[0]}"
                    skipped[why] = skipped.get(why, 0) + 1
                continue
            best = best_of(list(per.values()))
            base = baseline_result(per.values(), order)
            # The ratio columns are against the first subject: a cell it lacks has none.
            base = base if base is not None and base.subject == subjects[0] else None
            rows.append(
                MatrixRow(
                    size_text(fs),
                    size_text(rs),
                    [_matrix_cell(per.get(s), best) for s in subjects],
                    [_ratio(decide, base, per.get(s)) for s in subjects[1:]],
                )
            )
        if rows:
            tables.append(MatrixTable(g.label, g.unit, subjects, rows))
    if not tables and not skipped:
        return None
    return Matrix(tables, [f"{n} results {why}" for why, n in skipped.items()])


# -- the diskmark grid ---------------------------------------------------------------------------
MB_PER_MIB = 1024 * 1024 / 1e6
DISKMARK = "diskmark"  # the workload's name (workloads/diskmark.py; report/ imports no workload)


def kdiskmark_label(variant: str) -> str:
    """'SEQ1M Q8T1 read' for the variant 'seq1m-q8t1-read' (a -qdN/-engine suffix kept)."""
    parts = variant.split("-")
    return " ".join([p.upper() for p in parts[:2]] + parts[2:])


@dataclass
class DiskmarkCell:
    """One subject in one test: MB/s (10^6 bytes a second, KDiskMark's unit) and IOPS, the mean
    of the passes as KDiskMark averages them; the p99 (geometric mean over the passes); the mark
    of its rate against the baseline's."""

    status: str
    mb: str = ""  # '1,234' ('*' when O_DIRECT was not honoured)
    iops: str = ""
    p99: str = ""
    comparison: Comparison | None = None
    outcome: str = "empty"  # the mark's look; 'empty' for the baseline


@dataclass
class DiskmarkGrid:
    subjects: list[str]
    rows: list[tuple[str, dict[str, DiskmarkCell]]]  # (KDiskMark's test, cell per subject)
    latency: str  # what the p99 is (latency.words)
    direct_not_honoured: bool  # some cell ran buffered: the '*' is explained


def _num(v: float | None, digits: int = 1) -> str:
    return fmt_value(v, digits) if v is not None else "–"


def _dm_cell(decide: Decided, res: Result, base: Result | None) -> DiskmarkCell:
    if not usable(res):
        return DiskmarkCell(res.status)
    iops = latency.per_sample(res, "iops")
    c, said = None, "empty"
    if base is not None and base is not res:
        c, said, _, _ = decide(base, res)
    star = "*" if res.cache == "direct-not-honored" else ""
    return DiskmarkCell(
        "ok",
        _num(statistics.mean(res.samples) * MB_PER_MIB) + star,
        _num(statistics.mean(iops) if iops else None, 0),
        _num(latency.printed(res).get("p99_us")),
        c,
        said if c is not None else "empty",
    )


def diskmark(run: Run, decide: Decided) -> DiskmarkGrid | None:
    """The grid of the run's diskmark results; None without any."""
    subjects = measured_subjects(run)
    by_test: dict[str, list[Result]] = {}
    for r in run.results:
        if r.workload == DISKMARK:
            by_test.setdefault(str(r.params.get("variant") or r.variant), []).append(r)
    if not by_test:
        return None
    rows = []
    for variant, results in by_test.items():
        base = baseline_result(results, subjects)
        cells = {r.subject: _dm_cell(decide, r, base) for r in results}
        rows.append((kdiskmark_label(variant), cells))
    everything = [r for rs in by_test.values() for r in rs]
    return DiskmarkGrid(
        [s for s in subjects if any(s in c for _, c in rows)],
        rows,
        latency.words(everything),
        any(r.cache == "direct-not-honored" and usable(r) for r in everything),
    )


# -- the summary grid: workloads × subjects ------------------------------------------------------
@dataclass
class SummaryCell:
    value: str  # the rate ('' an Iozone operation's geometric mean over cells)
    ratio: str  # 'fastest', 'not separated', '0.44× ▼', '0.52× (geo. mean)', or a status
    outcome: str  # the look: best, same (leaders not separated), a verdict's, plain, unranked
    cpu: str = ""  # CPU s/GiB


@dataclass
class SummaryRow:
    title: str
    unit: str
    cells: dict[str, SummaryCell]


@dataclass
class SummaryGrid:
    """Workloads as rows, subjects as columns (rows grow with a suite, columns stay few): per
    cell the rate (the fastest starred), the ratio to the fastest with its mark, and the CPU
    per GiB; an Iozone operation gives the geometric mean over the cells every subject ran."""

    rows: list[SummaryRow]
    subjects: list[str]
    problems: list[tuple[str, list[str]]]  # (workload, what went wrong there)


def _summary_cell(decide: Decided, f: Finding, s: str, r: Result | None, best: Result | None,
                  open_: bool) -> SummaryCell | None:  # fmt: skip
    standing = {st.subject: st for st in f.standings}
    if s == f.best:
        said = ("not separated", "same") if open_ else ("fastest", "best")
        return SummaryCell(fmt_value(f.best_value), *said)
    if s in standing and standing[s].ratio is not None:
        st = standing[s]
        if st.cells == 1 and best is not None and r is not None:
            c, said, text, _ = decide(best, r)
            text = c.cell(interval=False) if c is not None else text
        else:
            text, said = f"{fmt_ratio(st.ratio or 0)} (geo. mean)", "plain"
        return SummaryCell(fmt_value(centre_of(r)) if r is not None and st.cells == 1 else "",
                           text, said)  # fmt: skip
    if r is not None and not usable(r):
        return SummaryCell(r.status, "", "unranked")
    return None


def summary(run: Run, decide: Decided, open_titles: set[str]) -> SummaryGrid:
    """`open_titles`: the workloads whose leaders are not separated (no fastest to star)."""
    order = measured_subjects(run)
    every = findings(run, decide)
    rows = []
    singles = {g.key: dict(next(iter(g.cells.values()))) for g in groups(run) if not g.matrix}
    for f in every:
        if f.best is None:
            continue
        results = singles.get(f.key, {})
        best = results.get(f.best)
        cells = {}
        for s in order:
            r = results.get(s)
            cell = _summary_cell(decide, f, s, r, best, f.title in open_titles)
            if cell is not None:
                cpu = r.cpu.per_gib_s if r is not None and usable(r) else None
                cell.cpu = "" if cpu is None else f"{cpu:.2f}"
                cells[s] = cell
        rows.append(SummaryRow(f.title, f.unit, cells))
    subjects = [s for s in order if any(s in row.cells for row in rows)]
    return SummaryGrid(rows, subjects, [(f.title, f.problems) for f in every if f.problems])
