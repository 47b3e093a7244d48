"""The self-contained HTML report: one file, inline CSS and SVG plots, no script, no network.

What the page's sections show, as records for their templates (report/views/sections.py walks them:
`render_html(run)` returns the page, `write_report(run, out_dir)` writes `report.html`).
Reads finished `Run` records only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import jinja2
from markupsafe import Markup

from fsbench.records.probes.numbers import fmt_pct, fmt_time
from fsbench.report.model import Explanation, Matrix, Report, Row, RunDiff, Why
from fsbench.report.plots.rates import Plot, colours
from fsbench.report.style import OUTCOMES, css
from fsbench.units import fmt_ratio, fmt_value


@dataclass
class WorkloadView:
    key: str
    title: str
    description: str
    unit: str
    rows: list[Row]  # the model's (report/model/)
    plot: Plot | None
    explanations: list[dict[str, Any]] = field(default_factory=list)
    trace_plot: Plot | None = None
    shared_notes: list[str] = field(default_factory=list)  # every row's, told once above
    colours: dict[str, str] = field(default_factory=dict)  # the plots' colour per subject
    cpu_unit: str = "s/GiB"
    latency: bool = False  # IOPS and p99 columns
    legend: str = ""  # its own confidence, where the tables' differ (Table.legend)


@dataclass
class MatrixView:
    plots: list[Plot]
    tables: list[dict[str, Any]]
    skipped: list[str]


def _explanation_view(e: Explanation) -> dict[str, Any]:
    """An explanation as the template shows it: the sentences, with the seconds each factor
    stands for and the share of the gap to the baseline it accounts for."""
    factors = []
    for f in e.factors:
        bits = []  # the sentence gives the share of the traced run already
        if f.accounts is not None:
            bits.append(f"{fmt_pct(f.accounts)} of the gap to {e.baseline}")
        factors.append({"name": f.name, "sentence": f.sentence, "weight": "; ".join(bits)})
    head = e.label
    gap = ""
    if e.seconds is not None and e.baseline_seconds is not None:
        gap = (
            f"{fmt_time(e.seconds)} per {e.per} against {e.baseline}'s "
            f"{fmt_time(e.baseline_seconds)}"
        )
    elif e.seconds is not None:
        gap = f"{fmt_time(e.seconds)} per {e.per}"
    if e.traced_speed is not None:
        # The figures come from one untimed traced run: say what the probes cost it.
        gap += f"{'; ' if gap else ''}traced run at {fmt_ratio(e.traced_speed)} the timed speed"
    return {
        "subject": head,
        "words": "",
        "baseline": e.baseline,
        "is_baseline": e.is_baseline,
        "gap": gap,
        "factors": factors,
        "unavailable": e.unavailable,
    }


def _decided(e: Explanation, why: Why | None) -> dict[str, Any]:
    """The explanation as the model decided it: a subject not separated from the baseline
    gets the verdict's words and no reason (only its own decided placements)."""
    if why is None or not why.words:
        return _explanation_view(e)
    kept = why.explanation or replace(e, factors=[])
    return {**_explanation_view(kept), "words": why.words}


def workload_views(
    report: Report, plots: dict[str, Plot], traces: dict[str, Plot]
) -> list[WorkloadView]:
    order = [s.id for s in report.run.subjects if s.status != "unavailable"]
    col = colours(order)
    hidden = {k: list(v) for k, v in report.unshown.items()}
    views = []
    for t in report.tables:
        exps = [_decided(e, w) for e, w in t.explained]
        # A result no view shows (two placements under one title) is explained under its workload.
        exps += [_explanation_view(e) for e in hidden.pop(t.trace_key, [])]
        views.append(
            WorkloadView(
                t.key,
                t.title,
                t.described,
                t.unit,
                t.rows,
                plots.get(t.key),
                [e for e in exps if e["factors"] or e["unavailable"] or e["words"]],
                traces.get(t.trace_key),
                # The terminal's notes with --verbose: one decision (notes.table_notes).
                t.note_lines(detail=True),
                {s: col.get(s, "#888") for s in order},
                t.cpu_unit,
                t.latency,
                "" if report.shared_family is not None else t.legend,
            )
        )
    return views


def matrix_view(m: Matrix | None, matrix_plots: list[Plot]) -> MatrixView | None:
    """The model's matrix with the page's class per cell; the plots above it."""
    if m is None:
        return None
    tables = []
    for mt in m.tables:
        rows = [
            {
                "file": row.file,
                "record": row.record,
                "cells": [{"text": c.text, "cls": css(c.outcome), "title": c.interval}
                          for c in row.cells],
                "ratios": [{"text": r.text, "cls": css(r.outcome)} for r in row.ratios],
            }
            for row in mt.rows
        ]  # fmt: skip
        tables.append(
            {
                "op": mt.op,
                "unit": mt.unit,
                "subjects": mt.subjects,
                "ratio_heads": [f"{s} / {mt.baseline}" for s in mt.subjects[1:]],
                "rows": rows,
            }
        )
    return MatrixView(matrix_plots, tables, m.skipped)


def comparisons(diffs: list[RunDiff]) -> list[dict[str, Any]]:
    """This run against others (report/model/diff.py's records), for the page."""
    out = []
    for d in diffs:
        out.append(
            {
                "run_id": d.run_b,
                "env": [
                    {
                        "what": e.what,
                        "a": e.a,
                        "b": e.b,
                        "matters": e.matters,
                    }
                    for e in d.environment
                ],
                "rows": [
                    {
                        "subject": r.subject,
                        "title": r.title,
                        "a": fmt_value(r.centre_a),
                        "b": fmt_value(r.centre_b),
                        "unit": r.unit,
                        "ratio": r.cell,
                        "cls": r.css,
                        "test": r.words,
                        "probes": "; ".join(r.probe_changes),
                    }
                    for r in d.results
                ],
                "only_a": d.only_a,
                "only_b": d.only_b,
                "legend": d.legend,
            }
        )
    return out


def jinja() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fsbench.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["svg"] = lambda p: Markup(p.svg) if p else ""
    # The one style table: an outcome's class on the page (report/style.py).
    env.globals["look"] = OUTCOMES
    return env
