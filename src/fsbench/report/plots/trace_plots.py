"""What the kernel saw, per workload: the kernel probes' distributions from each subject's traced
warm-up run, as small multiples — a row of panels per distribution (FUSE request sizes, FUSE
latency, readahead windows, block request sizes), a panel per subject, a line per opcode or
direction, the legend beside the row and never over a panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from fsbench.report.model import (
    OpFigures,
    Profile,
    Run,
    is_matrix,
    measured_subjects,
    placement_of,
    profile,
    usable,
    workload_key,
)
from fsbench.report.plots.figure import (
    PAGE_WIDTH_IN,
    Plot,
    colours,
    headed,
    short_size,
    slug,
    styled,
)

# A colour per series inside a panel (opcode or direction); the subject is the panel's title.
SERIES_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
MAX_SERIES = 4  # per panel: the opcodes with most requests (GETATTR, LOOKUP… trail far behind)
MIN_SHARE = 0.01  # of the subject's requests: fewer would be a line along the floor
MAX_COLS = 4
PANEL_W, PANEL_H = 2.2, 1.75  # inches: each panel's axes box, at the page's width
LEGEND_W = 1.5  # inches right of the panels for each row's legend
MAX_TICKS = 5  # labelled buckets per panel axis, so labels never overlap


@dataclass
class Row:
    """One distribution: per subject label, its series (name, bucket -> count per unit)."""

    title: str
    xlabel: str
    ylabel: str
    panels: dict[str, list[tuple[str, dict[int, float]]]]
    latency: bool = False
    series: str = "opcode"  # what a line is: the legend's title


def _ops(figs: dict[str, OpFigures] | None, latency: bool) -> list[tuple[str, dict[int, float]]]:
    ops = sorted((figs or {}).items(), key=lambda kv: -kv[1].count)
    total = sum(f.count for _, f in ops) or 1.0
    out = []
    for name, f in ops:
        h = f.latency_hist if latency else f.size_hist
        if h and f.count >= MIN_SHARE * total:
            out.append((name, h))
    return out[:MAX_SERIES]


def rows_of(profiles: list[tuple[str, Profile]]) -> list[Row]:
    per = profiles[0][1].per if profiles else "GiB"
    rows = [
        Row("FUSE request sizes", "request size", f"requests per {per}", {}),
        Row("FUSE request latency", "latency (send → end)", f"requests per {per}", {}, True),
        Row("Readahead windows", "window size", f"windows per {per}", {}, series=""),
        Row(
            "Block request sizes",
            "request size at the device",
            f"requests per {per}",
            {},
            series="direction",
        ),
    ]
    for label, p in profiles:
        ra = p.measured.get("readahead")
        for row, series in (
            (rows[0], _ops(p.measured.get("fuse"), False)),
            (rows[1], _ops(p.measured.get("fuse"), True)),
            (rows[2], [("windows", ra[1])] if ra and ra[1] else []),
            (rows[3], _ops(p.measured.get("block"), False)),
        ):
            if series:
                row.panels[label] = series
    return [r for r in rows if r.panels]


def _us_label(n: int) -> str:
    return f"{n} µs" if n < 1000 else f"{round(n / 1000, 1):g} ms"


def _count(v: float) -> str:
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _count_axis(ax) -> None:
    """A log y axis of counts ticked at powers of ten in plain words (1k, 100k): no minor ticks
    and no mathtext, which are most of a panel's drawing time."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(numticks=5))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _count(v)))


def _bucket_axis(ax, buckets: list[int], latency: bool) -> None:
    """A log2 x axis over the row's buckets, at most MAX_TICKS of them labelled."""
    ax.set_xscale("log", base=2)
    step = max(1, math.ceil(len(buckets) / MAX_TICKS))
    ticks = buckets[::step]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([_us_label(v) if latency else short_size(v) for v in ticks])
    ax.set_xlim(buckets[0] / 1.6, buckets[-1] * 1.6)


def _draw_row(fig: Figure, row: Row, top: float, height: float, labels: list[str], col) -> None:
    """The row's panels in a band of the figure (fractions from the bottom), its legend right."""
    w = fig.get_size_inches()[0]
    ncols = min(MAX_COLS, len(labels))
    nrows = math.ceil(len(labels) / ncols)
    grid = fig.add_gridspec(
        nrows,
        MAX_COLS,
        left=0.75 / w,
        right=(0.75 + MAX_COLS * PANEL_W + (MAX_COLS - 1) * 0.25) / w,
        top=top,
        bottom=top - height,
        wspace=0.25 / PANEL_W,
        hspace=0.75 / PANEL_H,
    )
    names = list(dict.fromkeys(n for series in row.panels.values() for n, _ in series))
    colour = {n: SERIES_COLOURS[i % len(SERIES_COLOURS)] for i, n in enumerate(names)}
    buckets = sorted({k for series in row.panels.values() for _, hh in series for k in hh if k > 0})
    first = None
    for i, label in enumerate(labels):
        ax = fig.add_subplot(grid[i // ncols, i % ncols], sharex=first, sharey=first)
        first = first or ax
        for name, hist in row.panels[label]:
            xs = sorted(k for k in hist if k > 0)
            ax.plot(xs, [hist[x] for x in xs], marker="o", ms=3, lw=1.2, color=colour[name])
        _count_axis(ax)
        _bucket_axis(ax, buckets, row.latency)
        ax.set_title(label, loc="left", color=col(label), fontsize=8.5, fontweight="bold")
        if i % ncols == 0:
            ax.set_ylabel(row.ylabel)
        else:
            ax.tick_params(labelleft=False)
        if i // ncols == nrows - 1 or i + ncols >= len(labels):
            ax.set_xlabel(row.xlabel)
    handles = [Line2D([], [], color=colour[n], marker="o", ms=3, lw=1.2) for n in names]
    # Beside the last panel column, in the figure's right margin: never over a panel. A row
    # of one unnamed series (readahead windows) needs none.
    if row.series:
        fig.legend(
            handles,
            names,
            loc="upper left",
            bbox_to_anchor=((0.75 + MAX_COLS * PANEL_W + (MAX_COLS - 1) * 0.25 + 0.2) / w, top),
            title=row.series,
            title_fontsize=8.5,
            alignment="left",
        )
    fig.text(0.1 / w, top + 0.45 / fig.get_size_inches()[1], row.title, fontsize=9.5, va="top")


@styled
def trace_plot(
    key: str, profiles: list[tuple[str, Profile]], subjects: Sequence[str]
) -> Plot | None:
    rows = rows_of(profiles)
    if not rows:
        return None
    cols = colours(subjects)

    def col(label: str) -> str:
        return cols.get(label.split(" [")[0], "#333")

    order = [label for label, _ in profiles]
    heights = []
    for row in rows:
        n = math.ceil(len(row.panels) / MAX_COLS)
        heights.append(n * PANEL_H + (n - 1) * 0.75 + 1.05)  # panels, gaps, titles, x label
    head = 0.45
    total = head + sum(heights)
    width = max(PAGE_WIDTH_IN, 0.75 + MAX_COLS * PANEL_W + (MAX_COLS - 1) * 0.25 + LEGEND_W)
    fig = Figure(figsize=(width, total))
    top = 1 - head / total
    for row, hh in zip(rows, heights, strict=True):
        labels = [label for label in order if label in row.panels]
        _draw_row(fig, row, top - 0.5 / total, (hh - 1.05) / total, labels, col)
        top -= hh / total
    per = profiles[0][1].per
    return headed(
        fig,
        f"trace-{slug(key)}",
        f"Kernel probes: {key}",
        f"What the kernel saw: {key}",
        "From the kernel's tracepoints during each subject's traced run (its last warm-up run, "
        f"untimed: no timed sample is traced), per {per} moved. A row per distribution, a panel "
        "per subject, a line per FUSE opcode or block direction (the four with most requests); "
        "each point is a power-of-two bucket (its lower bound) and how many events fell in it.",
    )


def trace_plots(run: Run) -> dict[str, Plot]:
    """A kernel-probe plot per workload (by `workload_key`) whose results carry probe data."""
    subjects = measured_subjects(run)
    by: dict[str, list[tuple[str, Profile]]] = {}
    for r in run.results:
        if not usable(r) or is_matrix(r):  # the report shows no Iozone cell on its own
            continue
        p = profile(r, run)
        if not any(p.measured.get(k) for k in ("fuse", "readahead", "block")):
            continue
        label = r.subject if placement_of(r) == "free" else f"{r.subject} [{placement_of(r)}]"
        by.setdefault(workload_key(r), []).append((label, p))
    out = {}
    for key, profs in by.items():
        plot = trace_plot(key, profs, subjects)
        if plot:
            out[key] = plot
    return out
