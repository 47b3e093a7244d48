"""The Iozone matrix's figures: rate against file size per record size with the sizes where
caching ends (`knees`), the strided reads, and the ratio heatmap of one subject to the
baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from fsbench.report.model import Environment, Group, Result, usable
from fsbench.report.plots.figure import (
    PAGE_WIDTH_IN,
    Plot,
    centre,
    colours,
    headed,
    log2_axis,
    log_rate_axis,
    new_figure,
    panel_figure,
    short_size,
    slug,
    styled,
    ylog_err,
)
from fsbench.report.style import glyph
from fsbench.units import fmt_ratio, size_text

if TYPE_CHECKING:
    from fsbench.report.model import Report


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
def _rate_panels(
    results: list[Result],
    subjects: Sequence[str],
    unit: str,
    across: tuple[str, str],
    along: tuple[str, str],
    marker: str,
    marks: Sequence[tuple[int, str]] = (),
) -> tuple[Figure, set[str]]:
    """Rate against one size parameter, a panel per value of the other, a line per subject
    (log scales, CI bars): `across` is (the panel's parameter, its title's noun), `along`
    (the x axis' parameter, its label). Returns the figure and the cache marks it shows."""
    panels = sorted({int(r.params[across[0]]) for r in results})
    xs = sorted({int(r.params[along[0]]) for r in results})
    col = colours(subjects)
    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    fig = panel_figure(ncols, nrows)
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    shown: set[str] = set()
    for i, value in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        for s in subjects:
            pts = sorted(
                (int(r.params[along[0]]), r)
                for r in results
                if r.subject == s and int(r.params[across[0]]) == value
            )
            if not pts:
                continue
            errs = list(zip(*[ylog_err(r) for _, r in pts], strict=True))
            ax.errorbar(
                [x for x, _ in pts],
                [centre(r) for _, r in pts],
                yerr=errs,
                marker=marker,
                ms=3.5,
                lw=1.4,
                capsize=2,
                color=col[s],
                label=s,
            )
        log_rate_axis(ax)
        log2_axis(ax, xs)
        ax.set_xlim(xs[0] / 1.5, xs[-1] * 1.5)  # the same sizes line up in every panel
        ax.set_title(f"{size_text(value)} {across[1]}")
        if i % ncols == 0:
            ax.set_ylabel(unit)
        if i // ncols == nrows - 1:
            ax.set_xlabel(along[1])
        shown |= set(_mark_knees(ax, marks, xs[0], xs[-1]))
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncols=min(len(labels), 4), borderaxespad=0.2)
    return fig, shown


@styled
def matrix_op_plot(group: Group, subjects: Sequence[str], env: Environment) -> Plot | None:
    """Rate vs file size, one line per subject, one panel per record size (seed 003 figures)."""
    op = group.label
    results = [r for r in group.results() if usable(r)]
    if not results:
        return None
    files = sorted({int(r.params["file_size"]) for r in results})
    marks = knees(env, group.op)
    fig, shown = _rate_panels(
        results,
        subjects,
        group.unit,
        ("record_size", "records"),
        ("file_size", "file size"),
        "o",
        marks,
    )
    caption = (
        f"{group.unit} (geometric mean, 95 % CI) per file size; one panel per record size, one "
        "line per subject; log scales."
    )
    if shown:
        caption += " Dashed: " + ", ".join(sorted(shown)) + "."
    elif marks:
        caption += (
            f" No cache limit falls within {size_text(files[0])}–{size_text(files[-1])}: "
            f"every file fits in the page cache ({marks[0][1]})."
        )
    return headed(fig, f"matrix-{op}", f"Iozone {op}", f"Iozone {op}: rate vs file size", caption)


@styled
def stride_plot(group: Group, subjects: Sequence[str]) -> Plot | None:
    """Strided read vs record size, one panel per file size, one line per subject."""
    results = [r for r in group.results() if usable(r)]
    if not results:
        return None
    fig, _ = _rate_panels(
        results, subjects, group.unit, ("file_size", "files"), ("record_size", "record size"), "s"
    )
    jobs = group.label.removeprefix("stride-read")  # "" or "-j4"
    return headed(
        fig,
        f"matrix-stride-records{jobs}",
        f"Strided read{jobs} vs record size",
        f"Iozone strided read{jobs}: rate vs record size",
        "Cold strided reads (records 0, 8, 16, … then 1, 9, …) per record size; one panel per "
        "file size. Readahead helps large records and wastes work on small ones.",
    )


@styled
def ratio_heatmap(op_groups: list[Group], base: str, other: str, report: Report) -> Plot | None:
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
    fig = new_figure(max(PAGE_WIDTH_IN, 2.5 * ncols + 0.9), 2.4 * nrows + 0.4)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    norm = TwoSlopeNorm(vmin=-4, vcenter=0, vmax=4)
    image = None
    for i, (g, cells) in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        files = sorted({c[0] for c in cells})  # type: ignore[index]
        records = sorted({c[1] for c in cells})  # type: ignore[index]
        grid = [[math.nan] * len(records) for _ in files]
        for (fs, rs), (b, o) in cells.items():  # type: ignore[misc]
            cmp_ = report.comparison_of(b, o)  # the matrix table's own
            if cmp_ is None or cmp_.ratio is None or cmp_.ratio <= 0:
                continue
            r, c = files.index(fs), records.index(rs)
            grid[r][c] = math.log2(cmp_.ratio)
            # The cell's mark from the one verdict procedure: ▲/▼ decided, ≈ within ±2 %, ? open.
            said = cmp_.outcome
            label = fmt_ratio(cmp_.ratio).rstrip("×") + ("" if cmp_.decided else glyph(said))
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
        ax.set_xticks(range(len(records)), [short_size(x) for x in records], rotation=45)
        ax.set_yticks(range(len(files)), [short_size(x) for x in files])
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
    return headed(
        fig,
        f"matrix-ratio-{slug(other)}",
        f"{other} / {base} over the matrix",
        f"{other} vs {base}, per cell (ratio of geometric means)",
        f"Each cell: the geometric mean rate of {other} divided by {base}'s. Green: {other} "
        "faster; red: slower; a cell without ≈ or ? is decided (its interval excludes 1: ▲/▼ "
        "in the tables), ≈ is within the run's equivalence band (±2 % unless --equivalence), "
        "? is open (not separated).",
    )
