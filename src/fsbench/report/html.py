"""The self-contained HTML report: one file, inline CSS and SVG plots, no script, no network.

What the page's sections show, as records for their templates (report/sections.py walks them:
`render_html(run)` returns the page, `write_report(run, out_dir)` writes `report.html`).
Reads finished `Run` records only.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

import jinja2
from markupsafe import Markup

from fsbench.phases import phases_line
from fsbench.report import diff as diffmod
from fsbench.report.explain import (
    Explanation,
    fmt_pct,
    fmt_time,
    fmt_us,
    wakeup_costs,
    workload_key,
)
from fsbench.report.model import Report, Row, Why, best_of, vs_cell
from fsbench.report.naming import centre_of, ci_text
from fsbench.report.notes import counted_lines
from fsbench.report.plots import Plot, colours
from fsbench.report.style import OUTCOMES, css
from fsbench.report.summary import Group, fmt_value, measured_subjects, size_text, usable
from fsbench.report.table import noise_line, schedule_line
from fsbench.schema import Environment, Result, Run
from fsbench.units import fmt_ratio


@dataclass
class WorkloadView:
    key: str
    title: str
    description: str
    unit: str
    rows: list[Row]  # the model's (report/model.py)
    plot: Plot | None
    explanations: list[dict[str, Any]] = field(default_factory=list)
    trace_plot: Plot | None = None
    shared_notes: list[str] = field(default_factory=list)  # every row's, told once above
    colours: dict[str, str] = field(default_factory=dict)  # the plots' colour per subject
    cpu_unit: str = "s/GiB"
    latency: bool = False  # IOPS and p99 columns


@dataclass
class MatrixView:
    plots: list[Plot]
    tables: list[dict[str, Any]]
    skipped: list[str]


def _ratio(base: Result | None, res: Result) -> tuple[str, str, str]:
    """(cell text, page class, words) of res against its baseline (model.vs_cell)."""
    if base is None or not usable(base) or not usable(res):
        return ("baseline" if base is res else "–"), css("empty"), ""
    _, said, text, how = vs_cell(base, res)
    return text, css(said), how


def _explanation_view(e: Explanation) -> dict[str, Any]:
    """An explanation as the template shows it: the sentences, with the seconds each factor
    stands for and the share of the gap to the baseline it accounts for."""
    factors = []
    for f in e.factors:
        bits = []  # the sentence gives the share of the traced run already
        if f.accounts is not None:
            bits.append(f"{fmt_pct(f.accounts)} of the gap to {e.baseline}")
        factors.append({"name": f.name, "sentence": f.sentence, "weight": "; ".join(bits)})
    head = e.subject + (f" [{e.placement}]" if e.placement != "free" else "")
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
    report: Report,
    gs: list[Group],
    plots: dict[str, Plot],
    traces: dict[str, Plot],
    explained: dict[int, Explanation],
) -> list[WorkloadView]:
    run = report.run
    order = measured_subjects(run)
    col = colours(order)
    tables = {t.key: t for t in report.tables}
    # A result no view shows (two placements under one title) is explained under its workload.
    shown = {id(r) for g in gs for r in g.results()}
    hidden: dict[str, list[Explanation]] = {}
    for e in explained.values():
        if id(run.results[e.index]) not in shown:
            hidden.setdefault(e.title, []).append(e)
    views = []
    for g in gs:
        t = tables.get(g.key)
        if g.matrix or t is None:
            continue
        whys = {w.subject: w for w in t.whys}
        first = t.results[0]
        exps = [
            _decided(explained[id(r)], whys.get(r.subject)) for r in t.results if id(r) in explained
        ]
        exps += [_explanation_view(e) for e in hidden.pop(workload_key(first), [])]
        views.append(
            WorkloadView(
                g.key,
                g.title,
                t.described,
                g.unit,
                t.rows,
                plots.get(g.key),
                [e for e in exps if e["factors"] or e["unavailable"] or e["words"]],
                traces.get(workload_key(first)),
                # The terminal's notes with --verbose: one decision (notes.table_notes).
                counted_lines(t.notes_detail),
                {s: col.get(s, "#888") for s in order},
                t.cpu_unit,
                t.latency,
            )
        )
    return views


def matrix_view(run: Run, gs: list[Group], matrix_plots: list[Plot]) -> MatrixView | None:
    op_groups = [g for g in gs if g.matrix]
    if not op_groups:
        return None
    order = measured_subjects(run)
    skipped: dict[str, int] = {}
    tables = []
    for g in op_groups:
        subjects = g.subjects(order)
        rows = []
        for (fs, rs), per in g.cells.items():  # type: ignore[misc]
            if not any(usable(r) for r in per.values()):
                for r in per.values():
                    why = (r.error or r.status).split(";")[0]
                    skipped[f"{r.status}: {why}"] = skipped.get(f"{r.status}: {why}", 0) + 1
                continue
            best = best_of(list(per.values()))
            cells = []
            for s in subjects:
                r = per.get(s)
                if r is None:
                    cells.append({"text": "", "cls": "dim"})
                elif not usable(r):
                    cells.append({"text": r.status, "cls": "bad", "title": r.error or ""})
                else:
                    cells.append(
                        {
                            "text": fmt_value(centre_of(r)),
                            "cls": "best" if r is best else "",
                            "title": ci_text(r, "range"),
                        }
                    )
            base = per.get(subjects[0]) if subjects else None
            ratios = []
            for s in subjects[1:]:
                r = per.get(s)
                if r is not None and base is not None:
                    text, cls, _ = _ratio(base, r)
                    ratios.append({"text": text, "cls": cls})
            rows.append(
                {"file": size_text(fs), "record": size_text(rs), "cells": cells, "ratios": ratios}
            )
        tables.append(
            {
                "op": g.label,
                "unit": g.unit,
                "subjects": subjects,
                "ratio_heads": [f"{s} / {subjects[0]}" for s in subjects[1:]],
                "rows": rows,
            }
        )
    skipped_lines = [f"{n} results {why}" for why, n in skipped.items()]
    return MatrixView(matrix_plots, tables, skipped_lines)


def env_rows(run: Run) -> list[tuple[str, str]]:
    env = run.environment
    rows = [
        ("kernel", env.kernel),
        ("CPU", f"{env.cpu_model} × {env.cpus}" if env.cpus else env.cpu_model),
        ("memory", size_text(env.memory_bytes) if env.memory_bytes else ""),
        ("backing", env.backing),
        ("image size", size_text(env.image_size) if env.image_size else ""),
        ("fio", env.fio_version or ""),
        ("host", env.hostname),
        ("Python", env.python),
        ("fsbench", env.fsbench_version),
        ("wake-up cost", wakeup_text(env)),
        ("noise floor", noise_line(env.noise_floor) or ""),
    ]
    rows += [(f"tool: {k}", v or "missing") for k, v in sorted(env.tools.items()) if k != "fio"]
    rows += [(f"sysctl {k}", v) for k, v in sorted(env.sysctl.items())]
    rows += [(f"{k} cache", size_text(v)) for k, v in env.cpu_caches.items() if v]
    rows += [("note", n) for n in env.notes]
    if run.schedule is not None:
        rows.append(("samples", schedule_line(run).removeprefix("samples: ")))
        if run.schedule.phases:
            line = phases_line(run.schedule.phases, run.schedule.spent_s, label=False)
            rows.append(("measuring time", line))
    rows += [("interrupted by", env.interrupted_by or ""), ("report", env.report_error or "")]
    for k, v in sorted((env.model_extra or {}).items()):
        rows.append((k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)))
    return [(k, str(v)) for k, v in rows if v not in (None, "")]


def wakeup_text(env: Environment) -> str:
    """'1.3 µs on one CPU, 25 µs across CPUs (19×)': the probe's figures as measured."""
    costs = wakeup_costs(env)
    if costs is None:
        return ""
    w = env.wakeup_us
    if w is None or w.cross_cpu is None or w.cross_cpu_end is None or w.same_cpu_end is None:
        same, cross = costs
        return f"{fmt_us(same)} on one CPU, {fmt_us(cross)} across CPUs ({fmt_ratio(cross / same)})"
    # Measured twice: both, and which one the explanation uses (the calmer).
    used = "the end's" if costs == (w.same_cpu_end, w.cross_cpu_end) else "the start's"
    return (
        f"{fmt_us(w.same_cpu)} on one CPU, {fmt_us(w.cross_cpu)} across CPUs at the start; "
        f"{fmt_us(w.same_cpu_end)} and {fmt_us(w.cross_cpu_end)} after the last sample "
        f"(the explanation uses {used}, the calmer)"
    )


def subject_rows(run: Run) -> list[dict[str, str]]:
    out = []
    for s in run.subjects:
        out.append(
            {
                "id": s.id,
                "driver": s.driver,
                "fs": s.fs,
                "kind": s.kind,
                "version": s.driver_version or "",
                "options": s.mount_options or "(defaults)",
                "effective": s.effective_mount_options or "",
                "mkfs": shlex.join(s.mkfs_command) if s.mkfs_command else "",
                "status": s.status,
                "error": s.error or "",
            }
        )
    return out


def comparisons(run: Run, others: list[Run]) -> list[dict[str, Any]]:
    out = []
    for other in others:
        d = diffmod.diff_runs(run, other)
        out.append(
            {
                "run_id": other.run_id,
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
                        "a": fmt_value(r.median_a),
                        "b": fmt_value(r.median_b),
                        "unit": r.unit,
                        "ratio": diffmod.ratio_text(r),
                        "cls": diffmod.verdict_class(r),
                        "test": diffmod.test_text(r),
                        "probes": "; ".join(r.probe_changes),
                    }
                    for r in d.results
                ],
                "only_a": d.only_a,
                "only_b": d.only_b,
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
