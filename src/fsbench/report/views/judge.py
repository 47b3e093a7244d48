"""`fsbench judge`'s tables in the terminal: the cells report/model/judge.py decided, laid out
as compare lays out its verdict columns, each table with its own family's legend."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsbench.report.model.judge import JudgeTable


def print_tables(tables: list[JudgeTable], con: Console) -> None:
    for tb in tables:
        t = Table(title=tb.title, title_justify="left")
        for c in ("subject", "±CI95", f"vs {tb.baseline}", f"vs {tb.best}", "n"):
            t.add_column(c, justify="left" if c == "subject" else "right", no_wrap=True)
        for r in tb.rows:
            t.add_row(r.subject, r.centre, r.vs_baseline, r.vs_best, str(r.n))
        con.print(t)
        con.print(f"  {tb.legend}", style="dim")
