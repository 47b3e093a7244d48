"""The figure primitives every plot of a report shares: fsbench's matplotlib style, a colour per
subject, the figure drawn to inline SVG at the page's width (`Svg` carrying what it measured
when drawn, for the tests), and the axes and error bars the figures reuse."""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullLocator,
)

from fsbench.report.model import Result, centre_of
from fsbench.units import size_text

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


def styled(fn: Callable[P, R]) -> Callable[P, R]:
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
    # Inside `files()`: the figure as standalone files too ({"svg": bytes, "png": bytes}).
    files: dict[str, bytes] = {}  # noqa: RUF012 (a class default, replaced per instance)


# While set (files()), every figure drawn is also saved as a standalone SVG and a PNG.
_FILES: list[bool] = []


@contextlib.contextmanager
def files() -> Iterator[None]:
    """Figures drawn inside also carry their standalone SVG and PNG (`Svg.files`): what
    `export --figures DIR` writes, the same drawing the page inlines."""
    _FILES.append(True)
    try:
        yield
    finally:
        _FILES.pop()


@dataclass
class Plot:
    id: str
    title: str
    svg: str
    caption: str = ""


def colours(subjects: Sequence[str]) -> dict[str, str]:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(subjects)}


def to_svg(fig: Figure, plot_id: str) -> str:
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
    if _FILES:
        raw, png = io.BytesIO(), io.BytesIO()
        with matplotlib.rc_context({**_RC, "svg.hashsalt": plot_id}):
            fig.savefig(raw, format="svg", metadata={"Date": None})
            fig.savefig(png, format="png", dpi=150, metadata={"Software": None})
        out.files = {"svg": raw.getvalue(), "png": png.getvalue()}
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


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def panel_figure(ncols: int, nrows: int) -> Figure:
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


def log2_axis(ax, values: Sequence[int], axis: str = "x") -> None:
    """A log2 axis with ticks at the measured sizes, labelled 64K, 1M, 2G."""
    vals = sorted(set(values))
    if axis == "x":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(vals))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([short_size(v) for v in vals], rotation=0)
        if len(vals) == 1:
            ax.set_xlim(vals[0] / 2, vals[0] * 2)
    else:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_locator(FixedLocator(vals))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_yticklabels([short_size(v) for v in vals])


def log_rate_axis(ax) -> None:
    """A log y axis of rates ticked at 1, 2, 5 × 10^k in plain numbers (1,000 not 10³): the
    default minor ticks and their mathtext labels are most of a small panel's drawing time."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.{0 if v >= 1 else 2}f}"))


def short_size(n: int) -> str:
    return size_text(n).replace(" ", "").replace("iB", "")


def centre(res: Result) -> float | None:
    """Where a bar stands: the centre every table prints and every ratio divides (the
    geometric mean; the median for a result without one), whose interval ci95 is."""
    return centre_of(res)


def ci_err(res: Result) -> tuple[float, float]:
    """Error bar lengths below/above the centre from its 95 % CI (0 when unknown)."""
    c = centre(res)
    if res.ci95 is None or c is None:
        return 0.0, 0.0
    lo, hi = res.ci95
    return max(0.0, c - lo), max(0.0, hi - c)


def ylog_err(res: Result) -> tuple[float, float]:
    # On a log axis a CI reaching below zero (a t interval at n = 3) cannot be drawn: clip it
    # to a tenth of the centre, so the bar still says "very uncertain".
    c = centre(res)
    assert c is not None
    below, above = ci_err(res)
    return min(below, c * 0.9), above


def rows_figure(n: int) -> tuple[Figure, object]:
    fig = new_figure(PAGE_WIDTH_IN, 0.26 * n + 1.1)
    return fig, fig.subplots(1, 1)


def row_labels(ax, ys: Sequence[float], labels: Sequence[str]) -> None:
    """A bar chart's rows named on the y axis, without the horizontal grid lines between them."""
    ax.set_yticks(ys, labels, fontsize=8)
    ax.grid(axis="y", visible=False)


def headed(fig: Figure, pid: str, title: str, heading: str, caption: str = "") -> Plot:
    """The finished figure: `heading` at its top left, as every figure has it, drawn to inline
    SVG as plot `pid` under the page's `title` and `caption`."""
    fig.suptitle(heading, x=0.01, ha="left", fontsize=10)
    return Plot(pid, title, to_svg(fig, pid), caption)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
