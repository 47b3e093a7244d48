"""The Iozone matrix in a terminal: one table per operation, a row per (file, record) cell, a
column per subject with the best of each row marked, and each subject's ratio to the baseline.
Cells nobody could run (files larger than the image) are counted below, not listed.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from fsbench.report.comparison import verdict_of
from fsbench.report.naming import ranked, styled_ratio
from fsbench.report.summary import (
    fmt_value,
    groups,
    is_matrix,
    measured_subjects,
    size_text,
    usable,
)
from fsbench.schema import Result, Run


def has_matrix(run: Run) -> bool:
    return any(is_matrix(r) for r in run.results)


def _best(per: dict[str, Result]) -> Result | None:
    ok = [r for r in per.values() if usable(r) and ranked(r)]
    if len(ok) < 2:
        return None
    hib = ok[0].higher_is_better
    return (max if hib else min)(ok, key=lambda r: r.median or 0.0)


def _ratio(base: Result | None, res: Result | None) -> Text:
    if base is None or res is None or not usable(base) or not usable(res):
        return Text("–", style="dim")
    c = verdict_of(base, res)
    if c.ratio is None:
        return Text("–", style="dim")
    return styled_ratio(c, res.higher_is_better, interval=False)


def matrix_tables(run: Run) -> list[Table | Text]:
    order = measured_subjects(run)
    out: list[Table | Text] = []
    skipped: dict[str, int] = {}
    for g in groups(run):
        if not g.matrix:
            continue
        subjects = g.subjects(order)
        base_subject = subjects[0] if subjects else None
        op = g.label
        t = Table(
            title=f"iozone {op}  ({g.unit}, median; ★ best per row)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        t.add_column("file", justify="right")
        t.add_column("record", justify="right")
        for s in subjects:
            t.add_column(s, justify="right")
        others = subjects[1:]
        for s in others:
            t.add_column(f"{s}/{base_subject}", justify="right")
        last_file = None
        rows = 0
        for (fs, rs), per in g.cells.items():  # type: ignore[misc]
            if not any(usable(r) for r in per.values()):
                for r in per.values():
                    why = (r.error or r.status).split(";")[0]
                    key = f"{r.status}: {why}"
                    skipped[key] = skipped.get(key, 0) + 1
                continue
            best = _best(per)
            cells: list[Text | str] = [size_text(fs) if fs != last_file else "", size_text(rs)]
            last_file = fs
            for s in subjects:
                r = per.get(s)
                if r is None:
                    cells.append("")
                elif not usable(r):
                    cells.append(Text(r.status, style="red"))
                elif r is best:
                    cells.append(Text(f"{fmt_value(r.median)} ★", style="bold green"))
                else:
                    cells.append(fmt_value(r.median))
            base = per.get(base_subject) if base_subject else None
            cells += [_ratio(base, per.get(s)) for s in others]
            t.add_row(*cells)
            rows += 1
        if rows:
            out.append(t)
    for why, n in skipped.items():
        out.append(Text(f"not run: {n} iozone results {why}", style="dim"))
    if out:
        out.append(
            Text(
                "ratio: median / the first subject's; green faster, red slower, ≈ not "
                "significant, ? too few samples to test",
                style="dim",
            )
        )
    return out


def render_matrix(run: Run, console: Console | None = None) -> None:
    """Print the run's Iozone results (nothing when it has none)."""
    parts = matrix_tables(run)
    if parts:
        (console or Console()).print(Group(*parts))
