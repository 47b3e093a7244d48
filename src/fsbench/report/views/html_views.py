"""What the HTML report's first screen and its compact tables show, as plain records for the
template: the answer (per workload the fastest, the others' ratios to it with the terminal's
marks, each subject's first reason), the drivers not measured, the summary as a table, the
semantics and integrity tables. Formats the report model (report/model/); the page's class of
every outcome is the style table's (report/style.py).
"""

from __future__ import annotations

from typing import Any

from fsbench.report.model import IntegrityView, Report, SemanticsView, SummaryGrid
from fsbench.report.style import css


def answer_view(report: Report) -> list[dict[str, Any]]:
    """Per workload: the fastest with its rate, the others best first with their ratio to it,
    those not ranked, and per subject the first-ranked reason it differs from the baseline
    (only a decided difference has one: the others get the verdict's words)."""
    out = []
    for a in report.answers:
        whys = [
            {"subject": w.subject, "why": w.answer_reason, "against": a.baseline or ""}
            for w in a.whys
        ]
        out.append(
            {
                "title": a.title,
                "winner": a.winner,
                "value": a.value,
                "separated": a.separated,
                "others": [
                    {"subject": i.subject, "text": i.text, "cls": css(i.outcome)} for i in a.items
                ],
                "unranked": [{"subject": i.subject, "why": i.text} for i in a.unranked],
                "baseline": a.baseline or "",
                "whys": whys,
            }
        )
    return out


def missing_view(report: Report) -> list[dict[str, str]]:
    """The subjects not measured here, one entry per reason; the kernel's with its command."""
    m = report.missing
    out = []
    if m.kernel_lacks:
        some = "" if m.covered == m.kernel_lacks else f" ({', '.join(m.covered)})"
        out.append(
            {
                "ids": ", ".join(m.kernel_lacks),
                "why": "not in this kernel",
                "how": f"in a VM{some}:" if m.command else "",
                "command": m.command or "",
                "caveat": " ".join(m.caveat) if m.caveat else "",
            }
        )
    by_why: dict[str, list[str]] = {}
    for sid, why in m.other:
        by_why.setdefault(why.replace(sid, "<fs>"), []).append(sid)
    for why, ids in by_why.items():
        text = why.replace("<fs>", ids[0]) if len(ids) == 1 else why
        out.append({"ids": ", ".join(ids), "why": text, "how": "", "command": "", "caveat": ""})
    return out


def summary_table(g: SummaryGrid | None) -> dict[str, Any]:
    """The model's summary grid with the page's class per cell."""
    if g is None:
        return {"rows": [], "subjects": []}
    rows = []
    for row in g.rows:
        cells = {
            s: {"value": c.value, "ratio": c.ratio, "cls": css(c.outcome), "cpu": c.cpu}
            for s, c in row.cells.items()
        }
        rows.append({"title": row.title, "unit": row.unit, "cells": cells})
    return {"rows": rows, "subjects": g.subjects}


def semantics_view(view: SemanticsView | None) -> dict[str, Any]:
    """Subjects as rows, features as columns (short marks; the probe's words on hover); the
    features every subject shares are said once under the table."""
    if view is None:
        return {"heads": [], "rows": [], "same": ""}
    rows = [
        {
            "id": subject,
            "cells": [{"text": c.text, "cls": css(c.outcome), "title": c.detail} for c in cells],
        }
        for subject, cells in view.rows
    ]
    same = ", ".join(f"{words} {mark}" for words, mark in view.same)
    return {"heads": view.heads, "rows": rows, "same": same}


def integrity_view(view: IntegrityView | None) -> list[dict[str, Any]]:
    """Per subject whose volume was checked: its status with the page's class, the checker,
    what was checked."""
    if view is None:
        return []
    return [
        {
            "id": r.subject,
            "status": r.status,
            "cls": css(r.outcome),
            "problems": r.problems,
            "command": r.command,
            "version": r.version,
            "covers": r.covers,
            "summary": r.summary,
            "kernel_log": r.kernel_log,
        }
        for r in view.rows
    ]
