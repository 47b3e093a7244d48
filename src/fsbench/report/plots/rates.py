"""Plots of a finished run as inline SVG (matplotlib, no pyplot, no network, no fonts embedded).

Every function returns a `Plot` (or None when there is nothing to draw); `plan(run)` lists the
plots a report of the run contains, in order, so the HTML and its tests agree on the count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING

from matplotlib.ticker import (
    FuncFormatter,
    NullFormatter,
)

from fsbench.report.model import (
    Group,
    Result,
    Run,
    baseline_result,
    groups,
    is_matrix,
    measured_subjects,
    placement_of,
    usable,
    workload_key,
)
from fsbench.report.plots.figure import (
    CPU_PARTS,
    PAGE_WIDTH_IN,
    Plot,
    centre,
    ci_err,
    colours,
    headed,
    new_figure,
    row_labels,
    rows_figure,
    slug,
    styled,
    to_svg,
)
from fsbench.report.plots.matrix_plots import knees, matrix_op_plot, ratio_heatmap, stride_plot
from fsbench.report.plots.trace_plots import trace_plots
from fsbench.report.style import glyph

if TYPE_CHECKING:
    from fsbench.report.model import Report
from fsbench.units import fmt_ratio


# -- per workload -----------------------------------------------------------------------------
@styled
def workload_plot(
    group: Group, subjects: Sequence[str], base: str | None, report: Report
) -> Plot | None:
    """The geometric mean (the centre every ratio divides) with its 95 % CI per subject; beside
    it, the ratio to the baseline with its interval (fsbench.verdict; hollow and marked ≈ or ?
    where not decided ▲/▼)."""
    per = next(iter(group.cells.values()), {})
    rows = [s for s in subjects if s in per]
    if not rows or not any(usable(per[s]) for s in rows):
        return None
    col = colours(subjects)
    with_ratio = base is not None and usable(per.get(base)) and len(rows) > 1
    fig = new_figure(PAGE_WIDTH_IN, max(2.4, 0.34 * len(rows) + 1.0))
    axes = fig.subplots(1, 2 if with_ratio else 1, squeeze=False, sharey=True)[0]
    ax = axes[0]
    ys = list(range(len(rows)))[::-1]
    for y, s in zip(ys, rows, strict=True):
        r = per[s]
        if not usable(r):
            ax.text(0, y, f"  {r.status}", va="center", color="#b00", fontsize=8)
            continue
        below, above = ci_err(r)
        ax.barh(y, centre(r), color=col[s], alpha=0.85, height=0.6)
        ax.errorbar(centre(r), y, xerr=[[below], [above]], color="black", capsize=3, lw=1)
    ax.set_yticks(ys, rows)
    ax.set_xlabel(f"{group.unit} (geometric mean, 95 % CI)")
    ax.set_xlim(left=0)
    ax.grid(axis="y", visible=False)
    if with_ratio:
        assert base is not None
        rx = axes[1]
        rx.axvline(1.0, color="#555", lw=1)
        for y, s in zip(ys, rows, strict=True):
            r = per[s]
            if s == base or not usable(r):
                continue
            c = report.comparison_of(per[base], r)  # the tables' own
            if c is None or c.ratio is None:
                continue
            lo, hi = c.interval or (c.ratio, c.ratio)
            said = c.outcome
            ns = said not in ("better", "worse")
            rx.errorbar(
                c.ratio,
                y,
                xerr=[[max(0.0, c.ratio - lo)], [max(0.0, hi - c.ratio)]],
                fmt="o",
                ms=6,
                capsize=3,
                color=col[s],
                mfc="white" if ns else col[s],
            )
            tag = glyph(said)
            if tag:
                rx.annotate(
                    tag,
                    (c.ratio, y),
                    xytext=(6, 5),
                    textcoords="offset points",
                    fontsize=7.5,
                    color="#444",
                )
        rx.set_xscale("log")
        rx.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_ratio(v)))
        rx.xaxis.set_minor_formatter(NullFormatter())
        rx.set_xlabel(f"ratio to {base} (its verdict's interval)")
        rx.grid(axis="y", visible=False)
    pid = f"workload-{slug(group.key)}"
    return Plot(pid, group.title, to_svg(fig, pid))


# -- costs ------------------------------------------------------------------------------------
@dataclass
class CostRow:
    label: str  # "seq-write/fsync" or "Iozone write (median of 9 cells)"
    subject: str
    cpu: dict[str, float]
    ctx_per_gib: float | None  # the app's and the daemon's; an older run's: the machine's
    ctx_machine: bool
    read_amp: float | None
    write_amp: float | None


def cost_rows(run: Run) -> list[CostRow]:
    """Per workload and subject (per Iozone op: the median over its cells) what a GiB cost."""
    order = measured_subjects(run)
    rows = []
    for g in groups(run):
        for s in g.subjects(order):
            rs = [per[s] for per in g.cells.values() if usable(per.get(s))]
            if not rs:
                continue
            cpu = {}
            for key, _, _ in CPU_PARTS:
                vals = [r.cpu.per_gib.get(key) for r in rs if r.cpu.per_gib]
                vals = [v for v in vals if v is not None]
                if vals:
                    cpu[key] = median(vals)

            def med(vals: list[float | None]) -> float | None:
                got = [v for v in vals if v is not None]
                return median(got) if got else None

            label = g.title if not g.matrix else f"{g.title} (median of {len(rs)} cells)"
            ctx = [r.subject_ctx_switches_per_gib for r in rs]
            machine = all(v is None for v in ctx)
            if machine:
                ctx = [r.ctx_switches_per_gib for r in rs]
            rows.append(
                CostRow(
                    label,
                    s,
                    cpu,
                    med(ctx),
                    machine,
                    med([r.read_amplification for r in rs]),
                    med([r.write_amplification for r in rs]),
                )
            )
    return rows


@styled
def cpu_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.cpu]
    if not rows:
        return None
    fig, ax = rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    for key, name, colour in CPU_PARTS:
        lefts = [sum(r.cpu.get(k, 0.0) for k, _, _ in CPU_PARTS[: _part_index(key)]) for r in rows]
        widths = [r.cpu.get(key, 0.0) for r in rows]
        ax.barh(ys, widths, left=lefts, color=colour, label=name, height=0.7)
    row_labels(ax, ys, [f"{r.label} · {r.subject}" for r in rows])
    ax.set_xlabel("CPU seconds per GiB moved")
    fig.legend(loc="outside upper right", ncols=3)
    return headed(
        fig,
        "cost-cpu",
        "CPU per GiB",
        "Where the CPU went, per GiB",
        "CPU seconds per GiB moved, stacked: the benchmark process (application: fio or "
        "fsbench's worker, user + system), the driver's daemon (FUSE, all threads) and the "
        "kernel threads: the device's own (loop, jbd2, …) and every kworker on the machine, "
        "whose names do not say which device they served. Medians over samples; for "
        "an Iozone operation, the median over its cells.",
    )


def _part_index(key: str) -> int:
    return [k for k, _, _ in CPU_PARTS].index(key)


@styled
def ctx_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.ctx_per_gib is not None]
    # One scope per plot: the subjects' own (an older run has only the machine's).
    machine = all(r.ctx_machine for r in rows)
    rows = [r for r in rows if r.ctx_machine == machine]
    if not rows:
        return None
    col = colours(subjects)
    fig, ax = rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    vals = [r.ctx_per_gib or 0.0 for r in rows]
    ax.barh(ys, vals, color=[col.get(r.subject, "#888") for r in rows], height=0.7)
    row_labels(ax, ys, [f"{r.label} · {r.subject}" for r in rows])
    if max(vals) > 0 and max(vals) / max(min(v for v in vals if v > 0), 1e-9) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(
        "context switches per GiB (whole machine)"
        if machine
        else "context switches per GiB (app + daemon)"
    )
    return headed(
        fig,
        "cost-ctx",
        "Context switches per GiB",
        "Context switches per GiB",
        (
            "Context switches of the whole machine during the sample (an older run: the "
            "subject's own were not recorded), per GiB moved"
            if machine
            else "Context switches of the benchmark process and the driver's daemon (all "
            "threads) during the sample, per GiB moved"
        )
        + ": a FUSE driver pays at least two per request (seed 002).",
    )


@styled
def amplification_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.read_amp is not None or r.write_amp is not None]
    if not rows:
        return None
    fig, ax = rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    reads = [r.read_amp or 0.0 for r in rows]
    writes = [r.write_amp or 0.0 for r in rows]
    ax.barh([y + 0.18 for y in ys], reads, height=0.36, color="#4c72b0", label="device read / read")
    ax.barh(
        [y - 0.18 for y in ys],
        writes,
        height=0.36,
        color="#c44e52",
        label="device written / written",
    )
    ax.axvline(1.0, color="#555", lw=0.8, ls="--")
    row_labels(ax, ys, [f"{r.label} · {r.subject}" for r in rows])
    ax.set_xlabel("bytes at the device per byte the workload moved")
    for y, r, w in zip(ys, reads, writes, strict=True):
        for dy, v in ((0.18, r), (-0.18, w)):
            if v:
                ax.text(v, y + dy, f" {v:.2f}", va="center", fontsize=6.5, color="#333")
    fig.legend(loc="outside upper right", ncols=2)
    return headed(
        fig,
        "cost-amplification",
        "Read and write amplification",
        "Read and write amplification",
        "Bytes the block device read or wrote per byte the workload read or wrote: above 1 "
        "is readahead or metadata and journal traffic, near 0 a read served from a cache.",
    )


# -- placement ------------------------------------------------------------------------------------
@styled
def placement_plot(run: Run) -> Plot | None:
    """Median rate with 95 % CI per placement, for every subject and workload measured under
    more than one placement."""
    by: dict[tuple[str, str], dict[str, Result]] = {}
    for r in run.results:
        if usable(r) and not is_matrix(r):  # a bar per Iozone cell would bury the others
            by.setdefault((workload_key(r), r.subject), {})[placement_of(r)] = r
    rows = [(k, v) for k, v in by.items() if len(v) > 1]
    if not rows:
        return None
    order = ["free", "same", "split"]
    places = sorted(
        {p for _, v in rows for p in v}, key=lambda p: order.index(p) if p in order else 9
    )
    shade = dict(zip(places, ("#4c72b0", "#dd8452", "#55a868", "#8172b3"), strict=False))
    fig = new_figure(PAGE_WIDTH_IN, 0.3 * len(rows) * len(places) + 1.1)
    ax = fig.subplots(1, 1)
    h = 0.8 / len(places)
    ys = list(range(len(rows)))[::-1]
    for y, (_, per) in zip(ys, rows, strict=True):
        for i, place in enumerate(places):
            r = per.get(place)
            if r is None:
                continue
            below, above = ci_err(r)
            yy = y + 0.4 - h * (i + 0.5)
            ax.barh(yy, centre(r), height=h * 0.9, color=shade[place], label=place)
            ax.errorbar(centre(r), yy, xerr=[[below], [above]], color="black", capsize=2, lw=0.8)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    fig.legend(uniq.values(), uniq.keys(), loc="outside upper right", ncols=len(uniq))
    row_labels(ax, ys, [f"{key} · {subject}" for key, subject in (k for k, _ in rows)])
    unit = rows[0][1][next(iter(rows[0][1]))].unit
    ax.set_xlabel(f"{unit} (geometric mean, 95 % CI)")
    ax.set_xlim(left=0)
    return headed(
        fig,
        "placement",
        "CPU placement",
        "Where the processes ran: CPU placement",
        "free: no pinning; same: the application and the driver's daemon on one CPU; split: on "
        "different CPUs. The explanation gives the ratios and whether they are significant.",
    )


# -- all of them ------------------------------------------------------------------------------
@dataclass
class Plots:
    matrix: list[Plot]
    workloads: dict[str, Plot]  # by group key
    costs: list[Plot]
    traces: dict[str, Plot] = field(default_factory=dict)  # by explain.workload_key
    placement: Plot | None = None

    def all(self) -> list[Plot]:
        extra = [self.placement] if self.placement else []
        return [*self.matrix, *self.workloads.values(), *self.traces.values(), *extra, *self.costs]


def plan(report: Report) -> Plots:
    """Every plot of the run's report, in report order; each mark the model's."""
    run = report.run
    subjects = measured_subjects(run)
    gs = groups(run)
    base = _baseline(run, subjects)
    op_groups = [g for g in gs if g.matrix]
    matrix: list[Plot] = []
    for g in op_groups:
        p = matrix_op_plot(g, subjects, run.environment)
        if p:
            matrix.append(p)
    for stride in (g for g in op_groups if g.op == "stride-read"):
        p = stride_plot(stride, subjects)
        if p:
            matrix.append(p)
    if base is not None:
        for other in subjects:
            if other != base:
                p = ratio_heatmap(op_groups, base, other, report)
                if p:
                    matrix.append(p)
    per_workload: dict[str, Plot] = {}
    for g in gs:
        if not g.matrix:
            first = baseline_result(next(iter(g.cells.values()), {}).values(), subjects)
            p = workload_plot(g, subjects, first.subject if first else None, report)
            if p:
                per_workload[g.key] = p
    rows = cost_rows(run)
    costs = [
        p
        for p in (
            cpu_plot(rows, subjects),
            ctx_plot(rows, subjects),
            amplification_plot(rows, subjects),
        )
        if p
    ]
    return Plots(matrix, per_workload, costs, trace_plots(run), placement_plot(run))


def _baseline(run: Run, subjects: Sequence[str]) -> str | None:
    """The run's baseline (the matrix's ratios are relative to it): the shared rule over all
    of the run's results."""
    first = baseline_result((r for r in run.results if usable(r)), subjects)
    return first.subject if first else None


def baseline(run: Run) -> str | None:
    return _baseline(run, measured_subjects(run))


__all__ = [
    "PAGE_WIDTH_IN",
    "Plot",
    "Plots",
    "baseline",
    "colours",
    "cost_rows",
    "knees",
    "plan",
]
