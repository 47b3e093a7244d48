"""Plots of a finished run as inline SVG (matplotlib, no pyplot, no network, no fonts embedded).

Every function returns a `Plot` (or None when there is nothing to draw); `plan(run)` lists the
plots a report of the run contains, in order, so the HTML and its tests agree on the count.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import matplotlib
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from fsbench.report.explain import placement_of, workload_key
from fsbench.report.naming import SYMBOLS, baseline_result, outcome
from fsbench.report.summary import (
    Group,
    compare,
    groups,
    is_matrix,
    measured_subjects,
    size_text,
    usable,
)
from fsbench.schema import Environment, Result, Run
from fsbench.units import fmt_ratio

P = ParamSpec("P")
R = TypeVar("R")

# A colour per subject, the same in every plot of a report (matplotlib's tab10, colour-blind
# distinguishable enough for up to ten subjects).
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
CPU_PARTS = (
    ("app", "application", "#4c72b0"),
    ("driver", "driver daemon", "#dd8452"),
    ("kernel_threads", "kernel threads", "#55a868"),
)
_RC = {
    "svg.fonttype": "none",  # text stays text: small files, selectable, no embedded glyphs
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8,
    "legend.frameon": False,
}


def _styled(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a plotting function inside fsbench's matplotlib style (axes take it when made)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with matplotlib.rc_context(_RC):
            return fn(*args, **kwargs)

    return wrapper


# Figures are drawn this wide: the page shows them at its width (≈1130 px), where 8.5 pt text
# reads as ~12 px. Narrower figures would be blown up, wider ones shrunk below legibility.
PAGE_WIDTH_IN = 11.0


class Svg(str):
    """An inline <svg> element that also carries what its figure measured when drawn: its size
    in inches, the smallest axes' height, and the layout problems a reader would meet (a legend
    over an axes, tick labels on top of each other) — for the tests, never shown."""

    size_in: tuple[float, float] = (0.0, 0.0)
    min_axes_height_in: float = 0.0
    problems: tuple[str, ...] = ()


@dataclass
class Plot:
    id: str
    title: str
    svg: str
    caption: str = ""


def colours(subjects: Sequence[str]) -> dict[str, str]:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(subjects)}


def _svg(fig: Figure, plot_id: str) -> str:
    """The figure as an <svg> element to inline: no XML prolog or DOCTYPE (it names a URL),
    no metadata, and ids prefixed so several figures can share one document."""
    buf = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": plot_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", plot_id) + "-"

    def local(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(1) + (prefix + name if name in ids else name)

    text = re.sub(r'(\bid="|url\(#|href="#)([^")]+)', local, text)
    # matplotlib names some elements by a hash of their content: two identical ones share an
    # id. References find the first; later copies get a suffix so the page's ids stay unique.
    seen: dict[str, int] = {}

    def unique(m: re.Match[str]) -> str:
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        return f'id="{name}"' if seen[name] == 1 else f'id="{name}-{seen[name]}"'

    text = re.sub(r'\bid="([^"]+)"', unique, text)
    # Scale with the page; the viewBox keeps the aspect ratio.
    text = re.sub(r'(<svg[^>]*?)\swidth="[^"]*"\s+height="[^"]*"', r"\1", text, count=1)
    out = Svg(text.replace("<svg ", f'<svg role="img" aria-label="{plot_id}" ', 1))
    _measure(fig, out)
    return out


def _measure(fig: Figure, out: Svg) -> None:
    """What the drawn figure looks like to a reader (positions are those savefig just laid
    out; text extents come from an Agg renderer of the figure's size, without drawing)."""
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.legend import Legend

    w, h = fig.get_size_inches()
    r = RendererAgg(int(w * fig.dpi), int(h * fig.dpi), fig.dpi)
    axes = [a for a in fig.findobj(Axes) if a.get_visible()]
    legends = [lg for lg in fig.findobj(Legend) if lg.get_visible()]
    problems = []
    for lg in legends:
        box = lg.get_window_extent(r)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > w * fig.dpi + 1 or box.y1 > h * fig.dpi + 1:
            problems.append("legend cut off at the figure's edge")
        for ax in axes:
            a = ax.get_window_extent(r)
            dx = min(box.x1, a.x1) - max(box.x0, a.x0)
            dy = min(box.y1, a.y1) - max(box.y0, a.y0)
            if dx > 1 and dy > 1:
                title = ax.get_title(loc="left") or ax.get_title() or ax.get_ylabel()
                problems.append(f"legend over axes {title!r}")
    for ax in axes:
        for axis, lo, hi in ((ax.xaxis, "x0", "x1"), (ax.yaxis, "y0", "y1")):
            boxes = sorted(
                (t.get_window_extent(r) for t in axis.get_ticklabels() if t.get_text()),
                key=lambda b: getattr(b, lo),
            )
            for a, b in itertools.pairwise(boxes):
                if getattr(a, hi) - getattr(b, lo) > 0.5:
                    problems.append(f"tick labels overlap on {ax.get_title(loc='left')!r}")
                    break
    out.size_in = (float(w), float(h))
    heights = [
        ax.get_window_extent(r).height / fig.dpi for ax in axes if ax.get_label() != "<colorbar>"
    ]
    out.min_axes_height_in = min(heights, default=0.0)
    out.problems = tuple(problems)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _panel_figure(ncols: int, nrows: int) -> Figure:
    """A grid of small panels with fixed margins (inches) for the title, legend and labels:
    a report has a dozen of these, and the constrained layout engine doubles each one's cost."""
    width, height = max(PAGE_WIDTH_IN, 2.6 * ncols + 0.8), 2.3 * nrows + 0.7
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(
        left=0.75 / width,
        right=1 - 0.15 / width,
        top=1 - 0.65 / height,
        bottom=0.5 / height,
        wspace=0.08,
        hspace=0.45,
    )
    return fig


def _log2_axis(ax, values: Sequence[int], axis: str = "x") -> None:
    """A log2 axis with ticks at the measured sizes, labelled 64K, 1M, 2G."""
    vals = sorted(set(values))
    if axis == "x":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(vals))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([_short(v) for v in vals], rotation=0)
        if len(vals) == 1:
            ax.set_xlim(vals[0] / 2, vals[0] * 2)
    else:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_locator(FixedLocator(vals))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_yticklabels([_short(v) for v in vals])


def _log_rate_axis(ax) -> None:
    """A log y axis of rates ticked at 1, 2, 5 × 10^k in plain numbers (1,000 not 10³): the
    default minor ticks and their mathtext labels are most of a small panel's drawing time."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.{0 if v >= 1 else 2}f}"))


def _short(n: int) -> str:
    return size_text(n).replace(" ", "").replace("iB", "")


def _err(res: Result) -> tuple[float, float]:
    """Error bar lengths below/above the median from the 95 % CI (0 when unknown)."""
    if res.ci95 is None or res.median is None:
        return 0.0, 0.0
    lo, hi = res.ci95
    return max(0.0, res.median - lo), max(0.0, hi - res.median)


def _ylog_err(res: Result) -> tuple[float, float]:
    # On a log axis a CI reaching below zero (a t interval at n = 3) cannot be drawn: clip it
    # to a tenth of the median, so the bar still says "very uncertain".
    assert res.median is not None
    below, above = _err(res)
    return min(below, res.median * 0.9), above


# -- knees ------------------------------------------------------------------------------------
def knees(env: Environment, op: str | None = None) -> list[tuple[int, str]]:
    """Sizes where cached behaviour ends: RAM, the dirty-page limits (writes), CPU caches
    (when the environment recorded them). Only those a file size might cross."""
    marks: list[tuple[int, str]] = []
    mem = env.memory_bytes or 0
    if mem:
        marks.append((mem, f"RAM {size_text(mem)}"))
        if op in (None, "write", "rewrite", "rand-write"):
            try:
                bg = int(env.sysctl.get("vm.dirty_background_bytes", "0")) or (
                    int(env.sysctl.get("vm.dirty_background_ratio", "0")) * mem // 100
                )
                hard = int(env.sysctl.get("vm.dirty_bytes", "0")) or (
                    int(env.sysctl.get("vm.dirty_ratio", "0")) * mem // 100
                )
            except ValueError:
                bg = hard = 0
            if bg:
                marks.append((bg, f"writeback starts ≈ {size_text(bg)}"))
            if hard:
                marks.append((hard, f"writers throttled ≈ {size_text(hard)}"))
    caches = env.cpu_caches or (env.model_extra or {}).get("cpu_caches") or {}
    if isinstance(caches, dict) and op in (None, "reread"):
        for name, size in caches.items():
            if isinstance(size, int | float) and size > 0:
                marks.append((int(size), f"{name} cache {size_text(size)}"))
    return marks


def _mark_knees(ax, marks: list[tuple[int, str]], lo: int, hi: int) -> list[str]:
    shown = []
    for x, label in marks:
        if lo / 2 <= x <= hi * 2:
            ax.axvline(x, color="#555", lw=0.9, ls="--", alpha=0.8)
            ax.text(
                x,
                0.98,
                " " + label,
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="top",
                ha="left",
                fontsize=7,
                color="#444",
            )
            shown.append(label)
    return shown


# -- the matrix -------------------------------------------------------------------------------
@_styled
def matrix_op_plot(group: Group, subjects: Sequence[str], env: Environment) -> Plot | None:
    """Rate vs file size, one line per subject, one panel per record size (seed 003 figures)."""
    op = group.label
    results = [r for r in group.results() if usable(r)]
    if not results:
        return None
    records = sorted({int(r.params["record_size"]) for r in results})
    files = sorted({int(r.params["file_size"]) for r in results})
    col = colours(subjects)
    n = len(records)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    fig = _panel_figure(ncols, nrows)
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    marks = knees(env, group.op)
    shown: set[str] = set()
    for i, rs in enumerate(records):
        ax = axes[i // ncols][i % ncols]
        for s in subjects:
            pts = sorted(
                (int(r.params["file_size"]), r)
                for r in results
                if r.subject == s and int(r.params["record_size"]) == rs
            )
            if not pts:
                continue
            xs = [x for x, _ in pts]
            ys = [r.median for _, r in pts]
            errs = list(zip(*[_ylog_err(r) for _, r in pts], strict=True))
            ax.errorbar(
                xs, ys, yerr=errs, marker="o", ms=3.5, lw=1.4, capsize=2, color=col[s], label=s
            )
        _log_rate_axis(ax)
        _log2_axis(ax, files)
        ax.set_xlim(files[0] / 1.5, files[-1] * 1.5)  # the same sizes line up in every panel
        ax.set_title(f"{size_text(rs)} records")
        if i % ncols == 0:
            ax.set_ylabel(group.unit)
        if i // ncols == nrows - 1:
            ax.set_xlabel("file size")
        shown |= set(_mark_knees(ax, marks, files[0], files[-1]))
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncols=min(len(labels), 4), borderaxespad=0.2)
    fig.suptitle(f"Iozone {op}: rate vs file size", x=0.01, ha="left", fontsize=10)
    caption = (
        f"{group.unit} (median, 95 % CI) per file size; one panel per record size, one line "
        "per subject; log scales."
    )
    if shown:
        caption += " Dashed: " + ", ".join(sorted(shown)) + "."
    elif marks:
        caption += (
            f" No cache limit falls within {size_text(files[0])}–{size_text(files[-1])}: "
            f"every file fits in the page cache ({marks[0][1]})."
        )
    return Plot(f"matrix-{op}", f"Iozone {op}", _svg(fig, f"matrix-{op}"), caption)


@_styled
def stride_plot(group: Group, subjects: Sequence[str]) -> Plot | None:
    """Strided read vs record size, one panel per file size, one line per subject."""
    results = [r for r in group.results() if usable(r)]
    if not results:
        return None
    files = sorted({int(r.params["file_size"]) for r in results})
    records = sorted({int(r.params["record_size"]) for r in results})
    col = colours(subjects)
    ncols = min(len(files), 4)
    nrows = math.ceil(len(files) / ncols)
    fig = _panel_figure(ncols, nrows)
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    for i, fs in enumerate(files):
        ax = axes[i // ncols][i % ncols]
        for s in subjects:
            pts = sorted(
                (int(r.params["record_size"]), r)
                for r in results
                if r.subject == s and int(r.params["file_size"]) == fs
            )
            if not pts:
                continue
            errs = list(zip(*[_ylog_err(r) for _, r in pts], strict=True))
            ax.errorbar(
                [x for x, _ in pts],
                [r.median for _, r in pts],
                yerr=errs,
                marker="s",
                ms=3.5,
                lw=1.4,
                capsize=2,
                color=col[s],
                label=s,
            )
        _log_rate_axis(ax)
        _log2_axis(ax, records)
        ax.set_xlim(records[0] / 1.5, records[-1] * 1.5)
        ax.set_title(f"{size_text(fs)} files")
        ax.set_xlabel("record size")
        if i % ncols == 0:
            ax.set_ylabel(group.unit)
    for j in range(len(files), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncols=min(len(labels), 4), borderaxespad=0.2)
    jobs = group.label.removeprefix("stride-read")  # "" or "-j4"
    fig.suptitle(f"Iozone strided read{jobs}: rate vs record size", x=0.01, ha="left", fontsize=10)
    pid = f"matrix-stride-records{jobs}"
    return Plot(
        pid,
        f"Strided read{jobs} vs record size",
        _svg(fig, pid),
        "Cold strided reads (records 0, 8, 16, … then 1, 9, …) per record size; one panel per "
        "file size. Readahead helps large records and wastes work on small ones.",
    )


@_styled
def ratio_heatmap(op_groups: list[Group], base: str, other: str) -> Plot | None:
    """other / base per cell of every op: green faster, red slower, '~' not significant."""
    panels = []
    for g in op_groups:
        cells = {
            c: (per[base], per[other])
            for c, per in g.cells.items()
            if usable(per.get(base)) and usable(per.get(other))
        }
        if cells:
            panels.append((g, cells))
    if not panels:
        return None
    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(max(PAGE_WIDTH_IN, 2.5 * ncols + 0.9), 2.4 * nrows + 0.4)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    norm = TwoSlopeNorm(vmin=-4, vcenter=0, vmax=4)
    image = None
    for i, (g, cells) in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        files = sorted({c[0] for c in cells})  # type: ignore[index]
        records = sorted({c[1] for c in cells})  # type: ignore[index]
        grid = [[math.nan] * len(records) for _ in files]
        for (fs, rs), (b, o) in cells.items():  # type: ignore[misc]
            cmp_ = compare(b, o)
            if cmp_.ratio is None or cmp_.ratio <= 0:
                continue
            r, c = files.index(fs), records.index(rs)
            grid[r][c] = math.log2(cmp_.ratio)
            # The cell's mark from the one verdict procedure: ▲/▼ decided, ≈ within ±2 %, ? open.
            said = outcome(cmp_, o.higher_is_better)
            label = fmt_ratio(cmp_.ratio).rstrip("×") + (
                "" if said in ("better", "worse") else SYMBOLS[said]
            )
            ax.text(
                c,
                r,
                label,
                ha="center",
                va="center",
                fontsize=6.5,
                color="black" if abs(grid[r][c]) < 2.5 else "white",
            )
        # Vector cells (not imshow's embedded PNG): crisp at any zoom, and searchable text.
        image = ax.pcolormesh(
            [x - 0.5 for x in range(len(records) + 1)],
            [y - 0.5 for y in range(len(files) + 1)],
            grid,
            cmap="RdYlGn",
            norm=norm,
            edgecolors="white",
            linewidth=0.5,
        )
        ax.set_xticks(range(len(records)), [_short(x) for x in records], rotation=45)
        ax.set_yticks(range(len(files)), [_short(x) for x in files])
        ax.grid(False)
        ax.set_title(g.label)
        if i % ncols == 0:
            ax.set_ylabel("file size")
        ax.set_xlabel("record size")
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.8, label=f"log2({other} / {base})")
        bar.set_ticks([-4, -2, 0, 2, 4], labels=["1/16", "1/4", "1", "4", "16"])
    fig.suptitle(f"{other} vs {base}, per cell (ratio of medians)", x=0.01, ha="left", fontsize=10)
    pid = f"matrix-ratio-{_slug(other)}"
    return Plot(
        pid,
        f"{other} / {base} over the matrix",
        _svg(fig, pid),
        f"Each cell: median rate of {other} divided by {base}'s. Green: {other} faster; red: "
        "slower; a cell without ≈ or ? is decided (its interval excludes 1: ▲/▼ in the tables), ≈ "
        "is within ±2 %, ? is open (not decided).",
    )


# -- per workload -----------------------------------------------------------------------------
@_styled
def workload_plot(group: Group, subjects: Sequence[str], base: str | None) -> Plot | None:
    """Median with 95 % CI per subject; beside it, the ratio to the baseline with its
    interval (fsbench.verdict; hollow and marked ≈ or ? where not decided ▲/▼)."""
    per = next(iter(group.cells.values()), {})
    rows = [s for s in subjects if s in per]
    if not rows or not any(usable(per[s]) for s in rows):
        return None
    col = colours(subjects)
    with_ratio = base is not None and usable(per.get(base)) and len(rows) > 1
    fig = _figure(PAGE_WIDTH_IN, max(2.4, 0.34 * len(rows) + 1.0))
    axes = fig.subplots(1, 2 if with_ratio else 1, squeeze=False, sharey=True)[0]
    ax = axes[0]
    ys = list(range(len(rows)))[::-1]
    for y, s in zip(ys, rows, strict=True):
        r = per[s]
        if not usable(r):
            ax.text(0, y, f"  {r.status}", va="center", color="#b00", fontsize=8)
            continue
        below, above = _err(r)
        ax.barh(y, r.median, color=col[s], alpha=0.85, height=0.6)
        ax.errorbar(r.median, y, xerr=[[below], [above]], color="black", capsize=3, lw=1)
    ax.set_yticks(ys, rows)
    ax.set_xlabel(f"{group.unit} (median, 95 % CI)")
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
            c = compare(per[base], r)
            if c.ratio is None:
                continue
            lo, hi = c.interval or (c.ratio, c.ratio)
            said = outcome(c, r.higher_is_better)
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
            tag = SYMBOLS[said]
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
    pid = f"workload-{_slug(group.key)}"
    return Plot(pid, group.title, _svg(fig, pid))


# -- costs ------------------------------------------------------------------------------------
def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


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
                    cpu[key] = _median(vals)

            def med(vals: list[float | None]) -> float | None:
                got = [v for v in vals if v is not None]
                return _median(got) if got else None

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


def _rows_figure(n: int) -> tuple[Figure, object]:
    fig = _figure(PAGE_WIDTH_IN, 0.26 * n + 1.1)
    return fig, fig.subplots(1, 1)


@_styled
def cpu_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.cpu]
    if not rows:
        return None
    fig, ax = _rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    for key, name, colour in CPU_PARTS:
        lefts = [sum(r.cpu.get(k, 0.0) for k, _, _ in CPU_PARTS[: _part_index(key)]) for r in rows]
        widths = [r.cpu.get(key, 0.0) for r in rows]
        ax.barh(ys, widths, left=lefts, color=colour, label=name, height=0.7)
    ax.set_yticks(ys, [f"{r.label} · {r.subject}" for r in rows], fontsize=8)
    ax.set_xlabel("CPU seconds per GiB moved")
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside upper right", ncols=3)
    fig.suptitle("Where the CPU went, per GiB", x=0.01, ha="left", fontsize=10)
    return Plot(
        "cost-cpu",
        "CPU per GiB",
        _svg(fig, "cost-cpu"),
        "CPU seconds per GiB moved, stacked: the benchmark process (application: fio or "
        "fsbench's worker, user + system), the driver's daemon (FUSE, all threads) and the "
        "kernel threads: the device's own (loop, jbd2, …) and every kworker on the machine, "
        "whose names do not say which device they served. Medians over samples; for "
        "an Iozone operation, the median over its cells.",
    )


def _part_index(key: str) -> int:
    return [k for k, _, _ in CPU_PARTS].index(key)


@_styled
def ctx_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.ctx_per_gib is not None]
    # One scope per plot: the subjects' own (an older run has only the machine's).
    machine = all(r.ctx_machine for r in rows)
    rows = [r for r in rows if r.ctx_machine == machine]
    if not rows:
        return None
    col = colours(subjects)
    fig, ax = _rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    vals = [r.ctx_per_gib or 0.0 for r in rows]
    ax.barh(ys, vals, color=[col.get(r.subject, "#888") for r in rows], height=0.7)
    ax.set_yticks(ys, [f"{r.label} · {r.subject}" for r in rows], fontsize=8)
    if max(vals) > 0 and max(vals) / max(min(v for v in vals if v > 0), 1e-9) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(
        "context switches per GiB (whole machine)"
        if machine
        else "context switches per GiB (app + daemon)"
    )
    ax.grid(axis="y", visible=False)
    fig.suptitle("Context switches per GiB", x=0.01, ha="left", fontsize=10)
    return Plot(
        "cost-ctx",
        "Context switches per GiB",
        _svg(fig, "cost-ctx"),
        (
            "Context switches of the whole machine during the sample (an older run: the "
            "subject's own were not recorded), per GiB moved"
            if machine
            else "Context switches of the benchmark process and the driver's daemon (all "
            "threads) during the sample, per GiB moved"
        )
        + ": a FUSE driver pays at least two per request (seed 002).",
    )


@_styled
def amplification_plot(rows: list[CostRow], subjects: Sequence[str]) -> Plot | None:
    rows = [r for r in rows if r.read_amp is not None or r.write_amp is not None]
    if not rows:
        return None
    fig, ax = _rows_figure(len(rows))
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
    ax.set_yticks(ys, [f"{r.label} · {r.subject}" for r in rows], fontsize=8)
    ax.set_xlabel("bytes at the device per byte the workload moved")
    ax.grid(axis="y", visible=False)
    for y, r, w in zip(ys, reads, writes, strict=True):
        for dy, v in ((0.18, r), (-0.18, w)):
            if v:
                ax.text(v, y + dy, f" {v:.2f}", va="center", fontsize=6.5, color="#333")
    fig.legend(loc="outside upper right", ncols=2)
    fig.suptitle("Read and write amplification", x=0.01, ha="left", fontsize=10)
    return Plot(
        "cost-amplification",
        "Read and write amplification",
        _svg(fig, "cost-amplification"),
        "Bytes the block device read or wrote per byte the workload read or wrote: above 1 "
        "is readahead or metadata and journal traffic, near 0 a read served from a cache.",
    )


# -- placement ------------------------------------------------------------------------------------
@_styled
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
    fig = _figure(PAGE_WIDTH_IN, 0.3 * len(rows) * len(places) + 1.1)
    ax = fig.subplots(1, 1)
    h = 0.8 / len(places)
    ys = list(range(len(rows)))[::-1]
    for y, (_, per) in zip(ys, rows, strict=True):
        for i, place in enumerate(places):
            r = per.get(place)
            if r is None:
                continue
            below, above = _err(r)
            yy = y + 0.4 - h * (i + 0.5)
            ax.barh(yy, r.median, height=h * 0.9, color=shade[place], label=place)
            ax.errorbar(r.median, yy, xerr=[[below], [above]], color="black", capsize=2, lw=0.8)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    fig.legend(uniq.values(), uniq.keys(), loc="outside upper right", ncols=len(uniq))
    ax.set_yticks(ys, [f"{key} · {subject}" for key, subject in (k for k, _ in rows)], fontsize=8)
    unit = rows[0][1][next(iter(rows[0][1]))].unit
    ax.set_xlabel(f"{unit} (median, 95 % CI)")
    ax.set_xlim(left=0)
    ax.grid(axis="y", visible=False)
    fig.suptitle("Where the processes ran: CPU placement", x=0.01, ha="left", fontsize=10)
    return Plot(
        "placement",
        "CPU placement",
        _svg(fig, "placement"),
        "free: no pinning; same: the application and the driver's daemon on one CPU; split: on "
        "different CPUs. The explanation gives the ratios and whether they are significant.",
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


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


def plan(run: Run) -> Plots:
    """Every plot of the run's report, in report order."""
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
                p = ratio_heatmap(op_groups, base, other)
                if p:
                    matrix.append(p)
    per_workload: dict[str, Plot] = {}
    for g in gs:
        if not g.matrix:
            first = baseline_result(next(iter(g.cells.values()), {}).values(), subjects)
            p = workload_plot(g, subjects, first.subject if first else None)
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
    from fsbench.report.trace_plots import trace_plots  # it builds on this module

    return Plots(matrix, per_workload, costs, trace_plots(run), placement_plot(run))


def _baseline(run: Run, subjects: Sequence[str]) -> str | None:
    """The run's baseline (the matrix's ratios are relative to it): the shared rule over all
    of the run's results."""
    first = baseline_result((r for r in run.results if usable(r)), subjects)
    return first.subject if first else None


def baseline(run: Run) -> str | None:
    return _baseline(run, measured_subjects(run))


__all__ = [
    "Plot",
    "Plots",
    "baseline",
    "colours",
    "cost_rows",
    "knees",
    "plan",
]
