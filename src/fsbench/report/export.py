"""A stored run to share: JSON (the results.json document), CSV (one row per result, with its
verdict against the table's baseline and every sample's value) or markdown (the answer, a table
per workload, the environment in one line), rows in the report's order."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from fsbench.errors import UsageError
from fsbench.notecodes import words
from fsbench.report.answer import answers, leader_text
from fsbench.report.comparison import verdict_of
from fsbench.report.html_views import missing_view
from fsbench.report.naming import (
    SYMBOLS,
    baseline_result,
    centre_of,
    ci_text,
    interval_text,
    outcome,
    ranked,
    result_title,
)
from fsbench.report.notes import counted_lines, table_notes
from fsbench.report.summary import groups, measured_subjects, report_order, usable
from fsbench.report.tune import markdown as tune_markdown
from fsbench.schema import Result, Run
from fsbench.units import fmt_ratio, fmt_value, size_text
from fsbench.verdict import family_of

FORMATS = ("json", "csv", "markdown")

# The CSV's columns, in order: identity, the number and its interval, what it cost, its state.
CSV_COLUMNS: tuple[str, ...] = (
    "run_id",
    "schema_version",  # results.json's (docs/results.schema.json): what the columns come from
    "subject",
    "workload",
    "variant",
    "op",
    "file_size",
    "record_size",
    "block_size",
    "numjobs",
    "clients",
    "params",
    "metric",
    "unit",
    "higher_is_better",
    "median",
    "center",
    "ci_low",
    "ci_high",
    "n",
    "cv",
    "cpu_per_gib_s",
    "cpu_app_per_gib_s",
    "cpu_driver_per_gib_s",
    "cpu_kernel_threads_per_gib_s",
    "subject_ctx_switches_per_gib",
    "machine_ctx_switches_per_gib",
    "device_read_bytes",
    "device_write_bytes",
    "read_amplification",
    "write_amplification",
    "cache",
    "status",
    "error",
    "flags",
    "note_codes",  # fsbench.notecodes' code of each note (ci-wide, cv-high, outliers, ...)
    # The verdict against the table's baseline (fsbench.verdict), as every renderer marks it.
    "baseline",
    "ratio",
    "ratio_low",
    "ratio_high",
    "verdict",
    "confidence",
    "samples",  # every sample's value, ';'-separated, in the order they were taken
)


def _cell(v: Any) -> Any:
    # Empty for missing values (not "None"), so spreadsheets see an empty cell.
    return "" if v is None else v


def baselines(run: Run) -> dict[int, Result | None]:
    """Each result's baseline: the first subject that finished in its table (id(result) ->
    baseline; the matrix: per cell)."""
    order = measured_subjects(run)
    out: dict[int, Result | None] = {}
    for g in groups(run):
        for per in g.cells.values():
            base = baseline_result(list(per.values()), order)
            out.update({id(r): base for r in per.values()})
    return out


def _verdict_cells(res: Result, base: Result | None) -> dict[str, Any]:
    if base is None or not usable(res) or not usable(base):
        return {}
    if base is res:
        return {"baseline": base.subject, "verdict": "baseline"}
    if not ranked(res):
        return {"baseline": base.subject, "verdict": "not ranked"}
    v = verdict_of(base, res)
    said = outcome(v, res.higher_is_better)
    return {
        "baseline": base.subject,
        "ratio": v.ratio,
        "ratio_low": v.interval[0] if v.interval else None,
        "ratio_high": v.interval[1] if v.interval else None,
        "verdict": said,
        "confidence": round(v.confidence, 6),
    }


def csv_row(run_id: str, res: Result, base: Result | None = None) -> dict[str, Any]:
    p = res.params
    per = res.cpu.per_gib or {}
    row = {
        "run_id": run_id,
        "subject": res.subject,
        "workload": res.workload,
        "variant": p.get("variant"),
        "op": p.get("op"),
        "file_size": p.get("file_size"),
        "record_size": p.get("record_size"),
        "block_size": p.get("block_size"),
        "numjobs": p.get("numjobs"),
        "clients": p.get("clients"),
        "params": json.dumps(p, sort_keys=True, separators=(",", ":")),
        "metric": res.metric,
        "unit": res.unit,
        "higher_is_better": res.higher_is_better,
        "median": res.median,
        "center": centre_of(res),
        "ci_low": res.ci95[0] if res.ci95 else None,
        "ci_high": res.ci95[1] if res.ci95 else None,
        "n": len(res.samples),
        "cv": res.cv,
        "cpu_per_gib_s": res.cpu.per_gib_s,
        "cpu_app_per_gib_s": per.get("app"),
        "cpu_driver_per_gib_s": per.get("driver"),
        "cpu_kernel_threads_per_gib_s": per.get("kernel_threads"),
        "subject_ctx_switches_per_gib": res.subject_ctx_switches_per_gib,
        "machine_ctx_switches_per_gib": res.ctx_switches_per_gib,
        "device_read_bytes": res.device.read_bytes,
        "device_write_bytes": res.device.write_bytes,
        "read_amplification": res.read_amplification,
        "write_amplification": res.write_amplification,
        "cache": res.cache,
        "status": res.status,
        "error": res.error,
        # Each note as every output words it (fsbench.notecodes), and its code.
        "flags": "; ".join(words(n) for n in res.notes),
        "note_codes": ";".join(dict.fromkeys(n.code for n in res.notes)),
        "samples": ";".join(f"{x:.6g}" for x in res.samples),
        **_verdict_cells(res, base),
    }
    return {k: _cell(row.get(k)) for k in CSV_COLUMNS}


def to_csv(run: Run) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    base = baselines(run)
    for res in report_order(run):
        row = csv_row(run.run_id, res, base.get(id(res)))
        w.writerow({**row, "schema_version": run.schema_version})
    return buf.getvalue()


def to_json(run: Run) -> str:
    """The run exactly as results.json holds it."""
    return run.to_json() + "\n"


# -- markdown: what a forum post or an issue needs ---------------------------------------------
def environment_line(run: Run) -> str:
    """The run's environment in one line: kernel, CPU, memory, backing, image, tools."""
    e = run.environment
    bits = [
        f"Linux {e.kernel}" if e.kernel else "",
        f"{e.cpu_model} × {e.cpus}" if e.cpus else e.cpu_model,
        f"{size_text(e.memory_bytes)} RAM" if e.memory_bytes else "",
        f"backing {e.backing}" if e.backing else "",
        f"image {size_text(e.image_size)}" if e.image_size else "",
        e.fio_version or "",
        f"fsbench {e.fsbench_version}" if e.fsbench_version else "",
    ]
    return " · ".join(b for b in bits if b)


def _md(text: object) -> str:
    return str(text).replace("|", "\\|")


def _answer_lines(run: Run) -> list[str]:
    out = []
    for a in answers(run):
        if a.winner is None:
            continue
        if a.separated:
            items = [f"**{a.winner.subject}** {fmt_value(centre_of(a.winner))} {a.unit}"]
        else:  # no fastest to crown: the leaders in the verdict's words
            top = fmt_value(centre_of(a.winner))
            items = [f"not separated — {a.winner.subject} {top} {a.unit}"]
        for r in a.others:
            if not a.separated and r in a.leaders:
                items.append(f"{r.subject} {leader_text(a.winner, r)}")
                continue
            v = verdict_of(a.winner, r)
            mark = SYMBOLS[outcome(v, r.higher_is_better)]
            span = f" {interval_text(v)}" if v.interval else ""
            items.append(f"{r.subject} {fmt_ratio(v.ratio or 0)}{span} {mark}")
        items += [f"{r.subject} not ranked" for r in a.unranked]
        out.append(f"- **{a.title}**: " + " › ".join(items))
    return out


def _workload_table(run: Run, results: list[Result]) -> list[str]:
    order = measured_subjects(run)
    base = baseline_result(results, order)
    unit = results[0].unit
    against = base.subject if base is not None else "baseline"
    out = [
        f"| subject | {unit} (geometric mean) | 95 % CI | vs {against} | interval | mark | n |",
        "|---|---:|---:|---:|---|:-:|---:|",
    ]
    for r in results:
        if not usable(r):
            out.append(f"| {_md(r.subject)} | {r.status} |  |  |  |  | {len(r.samples)} |")
            continue
        ratio = interval = mark = ""
        if base is r:
            ratio = "baseline"
        elif base is not None and usable(base) and ranked(r):
            v = verdict_of(base, r)
            ratio = fmt_ratio(v.ratio) if v.ratio is not None else "–"
            interval = interval_text(v)
            mark = SYMBOLS[outcome(v, r.higher_is_better)]
        elif not ranked(r):
            ratio = "not ranked"
        centre = fmt_value(centre_of(r))
        cells = [_md(r.subject), centre, ci_text(r, "range"), ratio, interval, mark]
        out.append("| " + " | ".join(cells) + f" | {len(r.samples)} |")
    return out


def write_figures(run: Run, out_dir: Path) -> list[tuple[str, Path]]:
    """The report's plots, in its order, as standalone PNG and SVG files in out_dir
    ('01-seq-write-fsync.png', ...): the same drawings the page inlines. Returns (title, PNG
    path) per plot."""
    # Imported here: matplotlib only when figures are asked for.
    from fsbench.report.figure import files
    from fsbench.report.plots import plan
    from fsbench.report.scaling import scaling_plots

    with files():
        plots = [*plan(run).all(), *scaling_plots(run)]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, p in enumerate(plots, 1):
        made = getattr(p.svg, "files", {})
        stem = f"{i:02d}-{p.id}"
        for ext, data in made.items():
            (out_dir / f"{stem}.{ext}").write_bytes(data)
        if "png" in made:
            written.append((p.title, out_dir / f"{stem}.png"))
    return written


def to_markdown(run: Run, figures: list[tuple[str, Path]] | None = None) -> str:
    """The answer lines, then a table per workload (median, its interval, the ratio to the
    table's baseline with its interval and mark, samples), the marks' legend and the
    environment in one line: rows in the report's order."""
    lines = [f"## fsbench {run.run_id}", ""]
    answer = _answer_lines(run)
    if answer:
        lines += ["Fastest first, each ratio to the fastest:", "", *answer, ""]
    lines += tune_markdown(run)
    # Not measured here, in the page's words (with the VM command and its caveat).
    for m in missing_view(run):
        how = f"; {m['how']} `{m['command']}`" if m["command"] else ""
        caveat = f" ({m['caveat']})" if m["caveat"] else ""
        lines += [f"Not measured here: {_md(m['ids'])} — {_md(m['why'])}{how}{caveat}", ""]
    for g in groups(run):
        if g.matrix:
            continue  # the Iozone matrix is a grid of its own: CSV or the HTML report
        results = [r for r in report_order(run) if result_title(r) == g.key]
        if not results:
            continue
        lines += [f"### {g.title}", "", *_workload_table(run, results), ""]
        # Under it, what the terminal says under its table (notes.table_notes: one decision).
        told = table_notes(results, run.schedule, detail=False)
        said = [*counted_lines(told), *(f"{sid}: {why}" for sid, why in told.failures)]
        lines += [*(f"{_md(x)}  " for x in said), ""] if said else []
    lines += [
        # The terminal's legend, word for word.
        f"vs: ratio to the baseline with its interval · {family_of(run).legend()} · "
        "CI: the geometric mean's 95 % interval (log scale).",
        "",
        f"Environment: {environment_line(run)} · results.json schema {run.schema_version}",
    ]
    if run.command:
        lines += ["", f"Command: `{' '.join(['fsbench', *run.command[1:]])}`"]
    for title, path in figures or []:
        lines += ["", f"![{title}]({path})"]
    return "\n".join(lines) + "\n"


def export(run: Run, fmt: str, figures: list[tuple[str, Path]] | None = None) -> str:
    f = fmt.strip().lower()
    if f == "csv":
        return to_csv(run)
    if f == "json":
        return to_json(run)
    if f in ("markdown", "md"):
        return to_markdown(run, figures)
    raise UsageError(f"--format {fmt!r}: give json, csv or markdown")
