"""The diskmark suite's grid, as KDiskMark shows it: the model's grid (report/model/grids.py, via
report/model/) formatted for the terminal and the page. Rows are its eight tests, columns the
subjects; each cell MB/s (10^6 bytes a second, KDiskMark's unit) and IOPS, the mean of the
passes as KDiskMark averages them, and the p99 latency (geometric mean over the passes). The
mark beside MB/s is the verdict on the subject's rate against the first subject's."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from fsbench.report.model import DiskmarkGrid
from fsbench.report.style import colour, css, glyph

TITLE = "diskmark (KDiskMark's tests): mean of the passes"
DIRECT_NOTE = "* O_DIRECT not honoured: the driver ran it buffered"


def grid_table(g: DiskmarkGrid | None) -> list[Table | Text]:
    """The terminal's grid (nothing when the run has no diskmark results)."""
    if g is None:
        return []
    t = Table(title=Text(TITLE, style="bold"), title_justify="left")
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
            mb = Text(c.mb)
            if glyph(c.outcome):
                mb.append(" " + glyph(c.outcome), style=colour(c.outcome))
            row += [mb, c.iops, c.p99]
        t.add_row(*row)
    out: list[Table | Text] = [t]
    said = f"  p99: fio's {g.latency}, µs, the geometric mean over the passes"
    out.append(Text(said, style="dim"))
    if g.direct_not_honoured:
        out.append(Text(f"  {DIRECT_NOTE}", style="dim"))
    return out


def grid_view(g: DiskmarkGrid | None) -> dict[str, Any] | None:
    """The grid for the page's template and the markdown: header and rows of cells."""
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
            mark = glyph(c.outcome)
            out.append(
                {"mb": c.mb, "iops": c.iops, "p99": c.p99, "mark": mark,
                 "css": css(c.outcome) if mark else ""}
            )  # fmt: skip
        rows.append({"test": name, "cells": out})
    return {
        "subjects": g.subjects,
        "rows": rows,
        "direct_note": g.direct_not_honoured,
        "latency": g.latency,
    }
