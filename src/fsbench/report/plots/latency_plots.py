"""A latency CDF per random fio workload: for each subject, fio's percentile list
(1 ... 99.99 %) of each pass, the median over the passes at each point, on a log latency axis;
the p99's verdict against the baseline in the legend. The latency is fio's total, submit to
completion (a run stored before it: completion only, clat; the axis says which)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from fsbench.report.model import (
    Result,
    baseline_result,
    is_matrix,
    latency,
    measured_subjects,
    result_title,
    usable,
)
from fsbench.report.plots.figure import (
    PAGE_WIDTH_IN,
    Plot,
    colours,
    headed,
    new_figure,
    slug,
    styled,
)
from fsbench.report.style import glyph
from fsbench.units import fmt_ratio

if TYPE_CHECKING:
    from fsbench.report.model import Report


def cdf_points(res: Result) -> list[tuple[float, float]]:
    """(latency µs, percentile) of the result: each point the geometric mean over its samples
    (the centre the table's p99 prints and its ratio divides)."""
    per = [s.extra.get("lat_pct_us") for s in res.sample_details]
    per = [p for p in per if isinstance(p, dict) and p]
    if not per:
        return []
    keys = sorted({k for p in per for k in p}, key=float)
    out = []
    for k in keys:
        vals = [float(p[k]) for p in per if k in p]
        if len(vals) == len(per):
            # The geometric mean over the samples, as the table's p99 (its centre) is.
            mid = statistics.geometric_mean(vals) if min(vals) > 0 else statistics.median(vals)
            out.append((mid, float(k)))
    return out


def _random(res: Result) -> bool:
    return str(res.params.get("rw", "")).startswith("rand") and not is_matrix(res)


@styled
def latency_plots(report: Report) -> list[Plot]:
    """One CDF plot per random fio workload whose samples carry fio's percentiles."""
    run = report.run
    subjects = measured_subjects(run)
    col = colours(subjects)
    by_title: dict[str, list[Result]] = {}
    for r in run.results:
        if _random(r) and usable(r) and cdf_points(r):
            by_title.setdefault(result_title(r), []).append(r)
    plots = []
    for title, results in by_title.items():
        base = baseline_result(results, subjects)
        fig = new_figure(PAGE_WIDTH_IN, 3.2)
        ax = fig.subplots(1, 1)
        for r in results:
            pts = cdf_points(r)
            v = report.p99_of(r)  # the table's p99 comparison
            said = ""
            if v is not None and v.ratio is not None:
                said = f" — p99 {fmt_ratio(v.ratio)} {glyph(v.outcome)}"
            if r.cache == "direct-not-honored":
                said += " (buffered: O_DIRECT not honoured)"  # its fast reads are cache hits
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker=".",
                color=col.get(r.subject, "#444"),
                label=f"{r.subject}{said}",
            )
        ax.set_xscale("log")
        said_lat = latency.words(results)
        ax.set_xlabel(f"{said_lat} (µs, log)")
        ax.set_ylabel("percentile")
        ax.set_ylim(0, 100)
        ax.axhline(99, ls=":", color="#7f7f7f", lw=0.8)
        fig.legend(loc="outside right upper")
        depth = results[0].params.get("iodepth", 1)
        engine = results[0].params.get("ioengine", "psync")
        plots.append(
            headed(
                fig,
                "latency-cdf-" + slug(title),
                f"{title}: {said_lat}",
                f"{title}: {said_lat}",
                f"fio's percentiles of its {said_lat}, at queue depth {depth} ({engine}), "
                "the median of each point over the passes; further right is slower. The p99 "
                f"ratio to {base.subject if base else 'the baseline'} and its mark (▼ longer) "
                "are the verdict's, made as for throughput; the dotted line is p99.",
            )
        )
    return plots
