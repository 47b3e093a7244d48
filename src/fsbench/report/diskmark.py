"""The diskmark suite's summary grid, as KDiskMark shows it: rows are its eight tests, columns
the subjects; each cell MB/s (10^6 bytes a second, KDiskMark's unit) and IOPS, the mean of the
passes as KDiskMark averages them (one fsbench sample is one pass: workloads/diskmark.py), and
the p99 latency, submit to completion (fio's total latency; median over the passes). The mark
beside MB/s is the verdict on the subject's rate against the first subject's (fsbench.verdict,
the tables' own)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from fsbench import latency
from fsbench.report.comparison import verdict_of
from fsbench.report.naming import STYLES, SYMBOLS, baseline_result, outcome
from fsbench.report.style import css
from fsbench.report.summary import measured_subjects, usable
from fsbench.schema import Result, Run
from fsbench.units import fmt_value

MB_PER_MIB = 1024 * 1024 / 1e6
NAME = "diskmark"  # the workload's name (workloads/diskmark.py; report/ imports no workload)


def label(variant: str) -> str:
    """'SEQ1M Q8T1 read' for the variant 'seq1m-q8t1-read' (a -qdN/-engine suffix kept)."""
    parts = variant.split("-")
    return " ".join([p.upper() for p in parts[:2]] + parts[2:])


@dataclass
class Cell:
    mb_s: float | None
    iops: float | None
    p99_us: float | None
    mark: str  # better | worse | same | open | none | "" (the baseline)
    status: str = "ok"
    direct_not_honored: bool = False


@dataclass
class Grid:
    subjects: list[str]
    rows: list[tuple[str, dict[str, Cell]]]  # (KDiskMark's test name, cell per subject)
    latency: str = latency.WORDS[latency.LAT_TOTAL]  # what the p99 is (latency.words)


def _cell(res: Result, base: Result | None) -> Cell:
    if not usable(res):
        return Cell(None, None, None, "none", status=res.status)
    iops = latency.per_sample(res, "iops")
    mark = "" if base is None or base is res else outcome(verdict_of(base, res), True)
    return Cell(
        mb_s=statistics.mean(res.samples) * MB_PER_MIB,
        iops=statistics.mean(iops) if iops else None,
        p99_us=latency.figures(res).get("p99_us"),
        mark=mark,
        direct_not_honored=res.cache == "direct-not-honored",
    )


def grid(run: Run) -> Grid | None:
    """The grid of the run's diskmark results; None without any."""
    subjects = measured_subjects(run)
    by_test: dict[str, list[Result]] = {}
    for r in run.results:
        if r.workload == NAME:
            by_test.setdefault(str(r.params.get("variant") or r.variant), []).append(r)
    if not by_test:
        return None
    rows = []
    for variant, results in by_test.items():
        base = baseline_result(results, subjects)
        rows.append((label(variant), {r.subject: _cell(r, base) for r in results}))
    said = latency.words([r for rs in by_test.values() for r in rs])
    return Grid([s for s in subjects if any(s in c for _, c in rows)], rows, said)


def _num(v: float | None, digits: int = 1) -> str:
    return fmt_value(v, digits) if v is not None else "–"


def grid_table(run: Run) -> list[Table | Text]:
    """The terminal's grid (nothing when the run has no diskmark results)."""
    g = grid(run)
    if g is None:
        return []
    t = Table(
        title=Text("diskmark (KDiskMark's tests): mean of the passes", style="bold"),
        title_justify="left",
    )
    t.add_column("test", style="bold")
    for s in g.subjects:
        t.add_column(f"{s} MB/s", justify="right")
        t.add_column("IOPS", justify="right")
        t.add_column("p99 µs", justify="right")
    for name, cells in g.rows:
        row: list[Text | str] = [name]
        for s in g.subjects:
            c = cells.get(s)
            if c is None or c.status != "ok":
                row += [Text(c.status if c else "–", style="red"), "", ""]
                continue
            mb = Text(_num(c.mb_s) + ("*" if c.direct_not_honored else ""))
            if c.mark:
                mb.append(" " + SYMBOLS[c.mark], style=STYLES[c.mark])
            row += [mb, _num(c.iops, 0), _num(c.p99_us)]
        t.add_row(*row)
    out: list[Table | Text] = [t]
    out.append(Text(f"  p99: fio's {g.latency}, µs, the median over the passes", style="dim"))
    if any(c.direct_not_honored for _, cs in g.rows for c in cs.values()):
        out.append(Text("  * O_DIRECT not honoured: the driver ran it buffered", style="dim"))
    return out


def grid_view(run: Run) -> dict | None:
    """The grid for the HTML template: header and rows of formatted cells."""
    g = grid(run)
    if g is None:
        return None
    rows = []
    for name, cells in g.rows:
        out = []
        for s in g.subjects:
            c = cells.get(s)
            if c is None or c.status != "ok":
                out.append({"mb": c.status if c else "–", "iops": "", "p99": "", "mark": ""})
                continue
            out.append(
                {
                    "mb": _num(c.mb_s) + ("*" if c.direct_not_honored else ""),
                    "iops": _num(c.iops, 0),
                    "p99": _num(c.p99_us),
                    "mark": SYMBOLS[c.mark] if c.mark else "",
                    "css": css(c.mark) if c.mark else "",
                }
            )
        rows.append({"test": name, "cells": out})
    star = any(c.direct_not_honored for _, cs in g.rows for c in cs.values())
    return {"subjects": g.subjects, "rows": rows, "direct_note": star, "latency": g.latency}
