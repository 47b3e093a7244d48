"""The Iozone matrix in a terminal: the model's matrix (report/model/grids.py, via report/model/)
as one table per operation, a row per (file, record) cell, a column per subject with the best
of each row starred, and each subject's ratio to the first subject. Cells nobody could run
(files larger than the image) are counted below, not listed.
"""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from fsbench.report.model import Matrix
from fsbench.report.style import colour, glyph


def matrix_tables(m: Matrix | None) -> list[Table | Text]:
    if m is None:
        return []
    out: list[Table | Text] = []
    for mt in m.tables:
        t = Table(
            title=f"iozone {mt.op}  ({mt.unit}; ★ best per row)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        t.add_column("file", justify="right")
        t.add_column("record", justify="right")
        for s in mt.subjects:
            t.add_column(s, justify="right")
        for s in mt.subjects[1:]:
            t.add_column(f"{s}/{mt.baseline}", justify="right")
        last_file = None
        for row in mt.rows:
            cells: list[Text | str] = [row.file if row.file != last_file else "", row.record]
            last_file = row.file
            for c in row.cells:
                star = f" {glyph(c.outcome)}" if glyph(c.outcome) else ""
                cells.append(Text(c.text + star, style=colour(c.outcome)))
            # The ratio without its interval: a column per subject must fit the width.
            for r in row.ratios:
                text = r.comparison.cell(interval=False) if r.comparison else r.text
                cells.append(Text(text, style=colour(r.outcome)))
            t.add_row(*cells)
        out.append(t)
    out += [Text(f"not run: {line.replace('results', 'iozone results', 1)}", style="dim")
            for line in m.skipped]  # fmt: skip
    if out:
        out.append(
            Text(
                "figures: geometric means; ratio: to the first subject, with the verdict's mark: "
                "▲▼ decided, ≈ same, ? not separated",
                style="dim",
            )
        )
    return out
