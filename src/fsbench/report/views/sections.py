"""The report as sections: one record per section, in the one order every output follows.

A `Section` names its anchor and navigation label, what it prints in the terminal
(`terminal(view) -> renderables`) and what it gives the page (`html(view) -> the template's
variables`, None when it has nothing to show; its template is templates/sections/<id>.html).
`render` (terminal) and `render_html` (the page) walk SECTIONS; neither orders anything itself,
so adding a view is adding one record here (and its template when it shows on the page).
A `View` is what every section reads: the run, the width, --verbose, and what several sections
share, computed once (the report model, the plots).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from fsbench import __version__
from fsbench.report.model import (
    Report,
    Run,
    build,
    diff_runs,
    measured_subjects,
    result_title,
)
from fsbench.report.views import table as term
from fsbench.report.views import tune as tune_view
from fsbench.report.views.diskmark import grid_table as diskmark_table
from fsbench.report.views.diskmark import grid_view as diskmark_view
from fsbench.report.views.html_views import (
    answer_view,
    integrity_view,
    missing_view,
    semantics_view,
    summary_table,
)
from fsbench.report.views.integrity import (
    failure_banners,
    integrity_lines,
    semantics_line,
    semantics_table,
)
from fsbench.report.views.matrix_table import matrix_tables

if TYPE_CHECKING:
    from fsbench.report.plots.rates import Plot, Plots

# The page's modules draw with matplotlib: imported where a page is made, so the terminal
# (and a command refused before it measures) never loads it or writes its cache.

REPORT_NAME = "report.html"


@dataclass
class View:
    """What the sections read: the run and how it is shown, and what they share (once)."""

    run: Run
    width: int = 100
    verbose: bool = False
    out_dir: str | None = None
    compare_with: list[Run] = field(default_factory=list)

    @cached_property
    def model(self) -> Report:
        return build(self.run)

    @cached_property
    def plots(self) -> Plots:
        from fsbench.report.plots.rates import plan

        return plan(self.model)

    @cached_property
    def scaling(self) -> list[Plot]:
        from fsbench.report.plots.scaling import scaling_plots

        return scaling_plots(self.run)

    @cached_property
    def latency_plots(self) -> list[Plot]:
        from fsbench.report.plots.latency_plots import latency_plots

        return latency_plots(self.model)


Terminal = Callable[[View], list[RenderableType]]
Page = Callable[[View], dict[str, Any] | None]


@dataclass(frozen=True)
class Section:
    id: str  # the page's anchor; templates/sections/<id>.html
    nav: str = ""  # the page's navigation label ('' not in the navigation)
    terminal: Terminal | None = None
    html: Page | None = None

    @property
    def template(self) -> str:
        return f"sections/{self.id}.html"


# -- the sections' renderers, in SECTIONS' order -------------------------------------------------
def _banners_terminal(v: View) -> list[RenderableType]:
    env = v.run.environment
    head = Text.assemble(
        ("fsbench ", "bold"),
        (v.run.run_id, "cyan"),
        f"  {env.kernel} · {env.cpus} CPUs · {env.backing}",
        ("  (incomplete)" if v.run.status == "incomplete" else "", "yellow"),
    )
    # A volume that came back damaged is the first thing a reader must see; then what makes
    # the answer unrepresentative (an emulated VM).
    out: list[RenderableType] = [head, *failure_banners(v.model.integrity)]
    out += [Text(f"note: {n}", style="bold yellow") for n in v.model.vm_notes]
    return out


def _banners_html(v: View) -> dict[str, Any]:
    i = v.model.integrity
    return {"integrity_failures": i.failures if i else [], "vm_notes": v.model.vm_notes}


def _answer_terminal(v: View) -> list[RenderableType]:
    out: list[RenderableType] = list(term.answer_lines(v.model, v.width))
    return out + list(term.subject_lines(v.model, v.width))


def _answer_html(v: View) -> dict[str, Any]:
    problems = [
        {"id": s.id, "status": s.status, "error": s.error or ""}
        for s in v.run.subjects
        if s.status == "failed"
    ]
    return {
        "answer": answer_view(v.model),
        "integrity_line": v.model.integrity.all_ok if v.model.integrity else "",
        "missing": missing_view(v.model),
        "problems": problems,
    }


def _aging_terminal(v: View) -> list[RenderableType]:
    return [
        *(Text(line, style="cyan") for line in v.model.aging_effects),
        *(Text(line, style="dim") for line in v.model.aging_notes),
    ]


def _aging_html(v: View) -> dict[str, Any] | None:
    lines = v.model.aging_effects + v.model.aging_notes
    return {"aging_lines": lines} if lines else None


def _run_notes_terminal(v: View) -> list[RenderableType]:
    """How the run went (the page has them in its environment table)."""
    env = v.model.environment
    assert env is not None
    out: list[RenderableType] = []
    if env.backing_note:
        out.append(Text(env.backing_note, style="dim"))
    if env.noise:
        out.append(Text(f"machine noise floor: {env.noise}", style="dim"))
    if env.schedule:
        out.append(Text(env.schedule, style="dim"))
    if v.verbose and env.phases:
        out.append(Text(env.phases, style="dim"))
    out += [Text(f"note: {n}", style="yellow") for n in env.notes]
    return out


def _summary_html(v: View) -> dict[str, Any]:
    g = v.model.summary
    problems = [{"title": t, "problems": p} for t, p in (g.problems if g else [])]
    return {"summary": summary_table(g), "findings": problems}


def _workloads_terminal(v: View) -> list[RenderableType]:
    tables = list(term.workload_tables(v.model, v.width, v.verbose))
    # What the tables' columns and marks mean, under them.
    return [*tables, Text(term.legend(v.model), style="dim")] if tables else []


def _page() -> Any:
    from fsbench.report.views import html

    return html


def _workloads_html(v: View) -> dict[str, Any] | None:
    page, p = _page(), v.plots
    views = page.workload_views(v.model, p.workloads, p.traces)
    return {"workloads": views} if views else None


def _matrix_terminal(v: View) -> list[RenderableType]:
    return list(matrix_tables(v.model.matrix))


def _matrix_html(v: View) -> dict[str, Any] | None:
    m = _page().matrix_view(v.model.matrix, v.plots.matrix)
    return {"matrix": m} if m else None


def _latency_terminal(v: View) -> list[RenderableType]:
    return list(diskmark_table(v.model.diskmark))


def _latency_html(v: View) -> dict[str, Any] | None:
    grid, plots = diskmark_view(v.model.diskmark), v.latency_plots
    return {"diskmark": grid, "latency_plots": plots} if grid or plots else None


def _definitions_html(v: View) -> dict[str, Any] | None:
    return {} if v.run.definitions else None


def _placement_html(v: View) -> dict[str, Any] | None:
    p = v.plots.placement
    return {"placement": p} if p else None


def _clients_html(v: View) -> dict[str, Any] | None:
    from fsbench.report.plots.scaling import client_rows

    rows = client_rows(v.run)
    return {"scaling": v.scaling, "client_rows": rows} if v.scaling or rows else None


def _costs_html(v: View) -> dict[str, Any] | None:
    return {"costs": v.plots.costs} if v.plots.costs else None


def _integrity_terminal(v: View) -> list[RenderableType]:
    out: list[RenderableType] = []
    m = v.model
    # The table with --verbose; otherwise what differs, in a line.
    sem = semantics_table(m.semantics, v.width) if v.verbose else semantics_line(m.semantics)
    if sem is not None:
        out.append(sem)
    return out + integrity_lines(m.integrity, v.verbose)


def _integrity_html(v: View) -> dict[str, Any] | None:
    m = v.model
    rows, sem = integrity_view(m.integrity), semantics_view(m.semantics)
    if not rows and not sem["rows"]:
        return None
    line = m.integrity.all_ok if m.integrity else ""
    return {"integrity": rows, "semantics": sem, "integrity_line": line}


def _environment_html(v: View) -> dict[str, Any]:
    env = v.model.environment
    assert env is not None
    return {"env_rows": env.rows, "subject_rows": env.subjects}


def _comparison_html(v: View) -> dict[str, Any] | None:
    c = _page().comparisons([diff_runs(v.run, other) for other in v.compare_with])
    return {"comparisons": c} if c else None


def _paths_terminal(v: View) -> list[RenderableType]:
    out: list[RenderableType] = []
    # What only the page shows, named (report/model/facts.py PAGE_ONLY): never dropped in silence.
    not_shown = v.model.not_shown(verbose_shows=True)
    if not_shown:
        out.append(Text(f"only in report.html: {not_shown}", style="dim"))
    if v.out_dir:
        report = Path(v.out_dir) / REPORT_NAME
        also = f" · report: {report}" if report.exists() else ""
        out.append(Text(f"results: {v.out_dir}/results.json{also}", style="dim"))
    error = v.run.environment.report_error
    if error:
        out.append(Text(error, style="bold red"))
    return out


# The one order. The page's header ends after the banners; the terminal's last lines are
# where the results are.
SECTIONS: tuple[Section, ...] = (
    Section("banners", "", _banners_terminal, _banners_html),
    Section("tune", "Tune", lambda v: tune_view.terminal(v.run), lambda v: tune_view.html(v.run)),
    Section("answer", "Answer", _answer_terminal, _answer_html),
    Section("aging", "Fresh and aged", _aging_terminal, _aging_html),
    Section("run-notes", "", _run_notes_terminal, None),
    Section("summary", "Summary", None, _summary_html),
    Section("workloads", "Workloads", _workloads_terminal, _workloads_html),
    Section("matrix", "Iozone matrix", _matrix_terminal, _matrix_html),
    Section("latency", "Queue depth and latency", _latency_terminal, _latency_html),
    Section("definitions", "Your workloads", None, _definitions_html),
    Section("placement", "Placement", None, _placement_html),
    Section("clients", "Clients", None, _clients_html),
    Section("costs", "Costs", None, _costs_html),
    Section("integrity", "Integrity and semantics", _integrity_terminal, _integrity_html),
    Section("environment", "Environment", None, _environment_html),
    Section("comparison", "Other runs", None, _comparison_html),
    Section("paths", "", _paths_terminal, None),
)


def render(
    run: Run, console: Console | None = None, out_dir: str | None = None, verbose: bool = False
) -> None:
    """The run in the terminal: every section's terminal part, in SECTIONS' order."""
    console = console or Console()
    v = View(run, console.width, verbose, out_dir)
    parts: list[RenderableType] = []
    for s in SECTIONS:
        if s.terminal is not None:
            parts += s.terminal(v)
    console.print(Group(*parts))


def render_html(run: Run, compare_with: list[Run] | None = None) -> str:
    """The report of a run as one self-contained HTML page (optionally against other runs):
    every section with something to show, in SECTIONS' order."""
    from fsbench.report.plots.rates import baseline, colours

    v = View(run, compare_with=compare_with or [])
    subjects = measured_subjects(run)
    col = colours(subjects)
    context: dict[str, Any] = {
        "run": run,
        "title": f"fsbench {run.run_id}",
        "command": shlex.join(run.command[1:]) if run.command else "",
        "subjects": [{"id": s, "colour": col[s]} for s in subjects],
        "baseline": baseline(run),
        "verdict_legend": v.model.verdict_legend,
        "version": __version__,
        "result_title": result_title,
    }
    shown = []
    for s in SECTIONS:
        data = s.html(v) if s.html is not None else None
        if data is not None:
            context.update(data)
            shown.append(s)
    context["sections"] = shown
    context["n_plots"] = len(v.plots.all()) + len(v.scaling) + len(v.latency_plots)
    return _page().jinja().get_template("report.html").render(**context)


def write_report(run: Run, out_dir: str | os.PathLike[str]) -> Path:
    """Write `report.html` into out_dir (atomically: a reader never sees half a page)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_NAME
    tmp = out / (REPORT_NAME + ".tmp")
    tmp.write_text(render_html(run), encoding="utf-8")
    os.replace(tmp, path)
    return path
