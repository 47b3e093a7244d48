"""What the HTML report's first screen and its compact tables show, as plain records for the
template: the answer (per workload the fastest, the others' ratios to it with the terminal's
marks, each subject's first reason), one line for integrity when all is well, one line for the
drivers not measured, the summary as a table, the semantics table with subjects as rows.
Reads finished `Run` records only.
"""

from __future__ import annotations

from typing import Any

from fsbench.report.answer import answer_factor, answer_text, answers, missing
from fsbench.report.integrity import checked_subjects, failed_subjects, short_mark
from fsbench.report.model import Report, vs_cell
from fsbench.report.naming import centre_of
from fsbench.report.style import css
from fsbench.report.summary import Finding, findings, usable
from fsbench.schema import FEATURES, Result, Run
from fsbench.units import fmt_ratio, fmt_value


def ratio_view(base: Result, res: Result, interval: bool = True) -> dict[str, str]:
    """The tables' ratio cell (model.vs_cell) with the page's class for its outcome
    (style.OUTCOMES); without the interval for a cell too narrow for it."""
    c, said, text, _ = vs_cell(base, res)
    return {"text": c.cell(interval) if c is not None else text, "cls": css(said)}


def answer_view(report: Report) -> list[dict[str, Any]]:
    """Per workload: the fastest with its rate, the others best first with their ratio to it,
    those not ranked, and per subject the first-ranked reason it differs from the baseline
    (only a decided difference has one: the others get the verdict's words)."""
    out = []
    for a in report.answers:
        whys = []
        for w in a.whys:
            e = w.explanation
            f = answer_factor(e) if e is not None else None
            text = answer_text(e, f) if e is not None and f is not None else w.words
            whys.append({"subject": w.subject, "why": text, "against": a.baseline or ""})
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


def integrity_line(run: Run) -> str:
    """One line when every checked subject is ok ('' when some is not, or none was checked:
    then the table says it, and failures lead the page)."""
    checked = checked_subjects(run)
    if (
        not checked
        or failed_subjects(run)
        or any(
            s.integrity.status != "ok"  # type: ignore[union-attr]
            for s in checked
        )
    ):
        return ""
    return (
        f"Integrity: ok — {', '.join(s.id for s in checked)} (the format's checker clean, "
        "digests re-read and matching, kernel log quiet)."
    )


def missing_view(run: Run) -> list[dict[str, str]]:
    """The subjects not measured here, one entry per reason; the kernel's with its command."""
    m = missing(run)
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


# -- the summary as a table -------------------------------------------------------------------
def summary_table(run: Run, order: list[str]) -> dict[str, Any]:
    """Workloads as rows, subjects as columns (rows grow with a suite, columns stay few): per
    cell the rate (★ the fastest), the ratio to the fastest with its mark, and the CPU per GiB;
    an Iozone operation gives the geometric mean over the cells every subject ran."""
    found: list[Finding] = [f for f in findings(run) if f.best is not None]
    # A workload whose leaders are not separated has no fastest to star (answer.leaders).
    open_titles = {a.title for a in answers(run) if a.winner is not None and not a.separated}
    cols = []
    for f in found:
        results = _results_of(run, f)
        best = results.get(f.best or "")
        cells: dict[str, dict[str, str]] = {}
        standing = {st.subject: st for st in f.standings}
        for s in order:
            r = results.get(s)
            if s == f.best and f.title in open_titles:
                cells[s] = {"value": fmt_value(f.best_value), "ratio": "not separated", "cls": "ns"}
            elif s == f.best:
                cells[s] = {"value": fmt_value(f.best_value), "ratio": "fastest", "cls": "best"}
            elif s in standing and standing[s].ratio is not None:
                st = standing[s]
                if st.cells == 1 and best is not None and r is not None:
                    rv = ratio_view(best, r, interval=False)
                else:
                    rv = {"text": f"{fmt_ratio(st.ratio or 0)} (geo. mean)", "cls": ""}
                value = fmt_value(centre_of(r)) if r is not None and st.cells == 1 else ""
                cells[s] = {"value": value, "ratio": rv["text"], "cls": rv["cls"]}
            elif r is not None and not usable(r):
                cells[s] = {"value": r.status, "ratio": "", "cls": "bad"}
            if s in cells:
                cpu = r.cpu.per_gib_s if r is not None and usable(r) else None
                cells[s]["cpu"] = "" if cpu is None else f"{cpu:.2f}"
        cols.append({"title": f.title, "unit": f.unit, "cells": cells})
    subjects = [s for s in order if any(s in c["cells"] for c in cols)]
    return {"rows": cols, "subjects": subjects}


def _results_of(run: Run, f: Finding) -> dict[str, Result]:
    """A single-cell group's result per subject (empty for an Iozone operation)."""
    from fsbench.report.summary import groups

    for g in groups(run):
        if g.key == f.key and not g.matrix:
            return dict(next(iter(g.cells.values())))
    return {}


# -- semantics ---------------------------------------------------------------------------------
def semantics_view(run: Run) -> dict[str, Any]:
    """Subjects as rows, features as columns (short marks; the probe's words on hover); the
    features every subject shares are said once under the table."""
    subjects = [s for s in run.subjects if s.semantics]
    marks = {s.id: {k: short_mark((s.semantics or {}).get(k)) for k in FEATURES} for s in subjects}
    differ = [k for k in FEATURES if len({marks[s.id][k] for s in subjects}) > 1]
    if len(subjects) < 2:
        differ = list(FEATURES)
    same = [k for k in FEATURES if k not in differ and subjects and marks[subjects[0].id][k]]
    rows = []
    for s in subjects:
        cells = []
        for k in differ:
            f = (s.semantics or {}).get(k)
            text = marks[s.id][k]
            cls = {"✓": "better", "✗": "worse", "?": "dim"}.get(text, "")
            cells.append({"text": text, "cls": cls, "title": f.detail if f else ""})
        rows.append({"id": s.id, "cells": cells})
    return {
        "heads": [FEATURES[k] for k in differ],
        "rows": rows,
        "same": ", ".join(f"{FEATURES[k]} {marks[subjects[0].id][k]}" for k in same),
    }
