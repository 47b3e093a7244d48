"""A stored run to share, each format a formatter of the report model (report/model/) listed
in EXPORTERS: JSON (the results.json document with the verdicts the report shows), CSV (one row
per result with its verdict against the table's baseline, IOPS and p99), CSV of the samples
(one row per sample, long format), markdown (the answer, a table per workload with the
terminal's cells, the diskmark grid, the environment in one line; what it cannot show is named
with where it is). Rows in the report's order."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsbench.errors import UsageError
from fsbench.report.model import (
    Matrix,
    Report,
    ResultFacts,
    Run,
    Table,
    build,
    ranked,
    result_facts,
    verdicts,
)
from fsbench.report.style import glyph
from fsbench.report.views.diskmark import grid_view
from fsbench.report.views.html_views import missing_view
from fsbench.report.views.tune import markdown as tune_markdown

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
    # Latency-bound results (random, records <= 8 KiB): IOPS, the p99 (fio's total latency,
    # µs, the geometric mean over the samples: the centre its ratio divides) and its verdict
    # against the baseline's (lower better).
    "iops",
    "p99_us",
    "p99_ratio",
    "p99_verdict",
    "cpu_app_per_kop_ms",
    "cpu_driver_per_kop_ms",
    "cpu_kernel_threads_per_kop_ms",
    "samples",  # every sample's value, ';'-separated (one row each: --format csv-samples)
)

# --format csv-samples: one row per sample (long format), beside --format csv's row per result.
SAMPLE_COLUMNS: tuple[str, ...] = (
    "run_id",
    "subject",
    "workload",
    "variant",
    "workload_id",  # its table (seq-read/cold): what `fsbench judge` groups the samples by
    "title",
    "params",
    "metric",
    "unit",
    "sample",  # its position, in the order the samples were taken
    "value",
    "seconds",
    "bytes",
    "ops",
    "iops",
    "p99_us",
    "cache",
    # What judges the samples as the run judged them (`fsbench judge` reads it): the
    # direction and the verdict family the result recorded (JSON: its table's tails and looks,
    # band, resolution, variance prior; {} for a run stored before families).
    "higher_is_better",
    "family",
    # The subject's volume after the workloads (ok, failed, not-checked): a failed one's figures
    # are shown, never ranked (stats.baseline.ranked), and judge keeps it so.
    "integrity",
)


def _cell(v: Any) -> Any:
    # Empty for missing values (not "None"), so spreadsheets see an empty cell.
    return "" if v is None else v


def _verdict_cells(rec: dict[str, Any]) -> dict[str, Any]:
    """A result's verdict record (decided.ResultFacts.verdict) as CSV cells."""
    if not rec:
        return {}
    said = rec["verdict"]
    out = {
        "baseline": rec["baseline"],
        "verdict": {"unranked": "not ranked", "empty": ""}.get(said, said),
        **{k: rec.get(k) for k in ("ratio", "ratio_low", "ratio_high", "confidence")},
    }
    if "p99" in rec:
        out["p99_ratio"] = rec["p99"]["ratio"]
        out["p99_verdict"] = rec["p99"]["verdict"]
    return out


def csv_row(run_id: str, f: ResultFacts) -> dict[str, Any]:
    res = f.result
    p = res.params
    per = res.cpu.per_gib or {}
    kop = res.cpu.per_kop_ms or {}
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
        "center": f.centre,
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
        "flags": "; ".join(f.notes),
        "note_codes": ";".join(f.codes),
        "iops": f.latency.get("iops"),
        "p99_us": f.latency.get("p99_us"),
        "cpu_app_per_kop_ms": kop.get("app"),
        "cpu_driver_per_kop_ms": kop.get("driver"),
        "cpu_kernel_threads_per_kop_ms": kop.get("kernel_threads"),
        "samples": ";".join(f"{x:.6g}" for x in res.samples),
        **_verdict_cells(f.verdict),
    }
    return {k: _cell(row.get(k)) for k in CSV_COLUMNS}


def to_csv(run: Run) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    for f in result_facts(run):
        w.writerow({**csv_row(run.run_id, f), "schema_version": run.schema_version})
    return buf.getvalue()


def to_samples_csv(run: Run) -> str:
    """One row per sample (long format): what a spreadsheet or a plotting tool reads."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(SAMPLE_COLUMNS), lineterminator="\n")
    w.writeheader()
    integrity = {s.id: s.integrity.status for s in run.subjects if s.integrity is not None}
    for f in result_facts(run):
        res = f.result
        details = res.sample_details or []
        damaged = not ranked(res)  # the run's own word on it, whatever its subject records
        for i, value in enumerate(res.samples):
            d = details[i] if i < len(details) else None
            lat = (d.extra.get("lat_us") or {}) if d is not None else {}
            row = {
                "run_id": run.run_id,
                "subject": res.subject,
                "workload": res.workload,
                "variant": res.params.get("variant"),
                "workload_id": res.workload_id or res.workload,
                "title": f.title,
                "params": json.dumps(res.params, sort_keys=True, separators=(",", ":")),
                "metric": res.metric,
                "unit": res.unit,
                "sample": i,
                "value": value,
                "seconds": d.seconds if d is not None else None,
                "bytes": d.bytes if d is not None else None,
                "ops": d.ops if d is not None else None,
                "iops": d.extra.get("iops") if d is not None else None,
                "p99_us": lat.get("p99"),
                "cache": d.cache if d is not None else res.cache,
                "higher_is_better": res.higher_is_better,
                "family": json.dumps(res.verdict_family or {}, sort_keys=True),
                "integrity": "failed" if damaged else integrity.get(res.subject),
            }
            w.writerow({k: _cell(row.get(k)) for k in SAMPLE_COLUMNS})
    return buf.getvalue()


def to_json(run: Run) -> str:
    """The run as results.json holds it, with the verdicts the report shows (`verdicts`: per
    result its baseline, ratio, interval, outcome and words; old readers ignore the key)."""
    if not run.verdicts:  # a run made in memory (read runs have them: report/model/upgrade.py)
        run = run.model_copy(update={"verdicts": verdicts(run)})
    return run.to_json() + "\n"


def _schema(run: Run) -> str:
    """The schema the export's figures are in; a run stored in an older one, migrated when
    it was read (report/model/upgrade.py), says so: 'schema 5 (migrated from 4)'."""
    old = (run.model_extra or {}).get("migrated_from")
    return f"{run.schema_version}" + (f" (migrated from {old})" if old else "")


# -- markdown: what a forum post or an issue needs ---------------------------------------------
def _md(text: object) -> str:
    return str(text).replace("|", "\\|")


def _answer_lines(report: Report) -> list[str]:
    out = []
    for a in report.answers:
        if a.separated:
            items = [f"**{a.winner}** {a.value}"]
        else:  # no fastest to crown: the leaders in the verdict's words
            items = [f"not separated — {a.winner} {a.value}"]
        items += [f"{i.subject} {i.text}" for i in a.items]
        items += [f"{i.subject} {i.text}" for i in a.unranked]
        out.append(f"- **{_md(a.title)}**: " + _md(" › ".join(items)))
        for w in a.whys:
            # The terminal's and the page's reason: the first that stands for time, time first.
            if w.answer_reason:
                out.append(f"  - {_md(w.subject)}: {_md(w.answer_reason)}")
    return out


def _workload_table(t: Table) -> list[str]:
    """The terminal's table: the same cells (the centre ± interval, the ratio with its interval
    and mark, IOPS and p99 where latency-bound, CPU, cache, n with why sampling stopped)."""
    lat = ["IOPS", "p99 µs", "p99 vs"] if t.latency else []
    heads = [
        "subject", f"{t.unit} (geometric mean)", "95 % CI", f"vs {t.baseline or 'baseline'}",
        "interval", "mark", *lat, f"CPU {t.cpu_unit}", "cache", "n",
    ]  # fmt: skip
    align = [
        "---",
        "---:",
        "---:",
        "---:",
        "---",
        ":-:",
        *["---:"] * len(lat),
        "---:",
        "---",
        "---:",
    ]
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join(align) + "|"]
    for r in t.rows:
        if r.status != "ok":
            cells = [r.subject, r.status, *[""] * (len(heads) - 3), "0"]
        else:
            c = r.comparison
            ratio = c.ratio_text if c is not None else r.vs
            mark = glyph(r.outcome)
            p99 = r.p99_comparison
            lat_cells = [r.iops, r.p99, p99.cell(interval=False) if p99 else ""] if lat else []
            cells = [
                r.subject, r.median, r.interval, ratio, c.interval_text if c else "", mark,
                *lat_cells, r.cpu, r.cache, f"{r.n}{r.stop_mark}",
            ]  # fmt: skip
        out.append("| " + " | ".join(_md(x) for x in cells) + " |")
    return out


def _notes(t: Table) -> list[str]:
    """Under the table what the terminal says under it (the model's one decision)."""
    said = [*t.note_lines(), *(f"{sid}: {why}" for sid, why in t.notes.failures)]
    said += [f"{w.subject}: {w.brief}" for w in t.whys if w.brief]
    return [f"{_md(x)}  " for x in said]


def _diskmark_lines(report: Report) -> list[str]:
    """The diskmark grid as the terminal and the page show it: per test and subject MB/s with
    its mark, IOPS and p99."""
    g = grid_view(report.diskmark)
    if g is None:
        return []
    subjects = g["subjects"]
    heads = ["test"] + [f"{s} {h}" for s in subjects for h in ("MB/s", "IOPS", "p99 µs")]
    out = [
        "### diskmark (KDiskMark's tests): mean of the passes",
        "",
        "| " + " | ".join(_md(h) for h in heads) + " |",
        "|---|" + "---:|" * (len(heads) - 1),
    ]
    for row in g["rows"]:
        cells = [row["test"]]
        for c in row["cells"]:
            cells += [f"{c['mb']} {c['mark']}".strip(), c["iops"], c["p99"]]
        out.append("| " + " | ".join(_md(x) for x in cells) + " |")
    out += ["", f"p99: fio's {g['latency']}, µs, the geometric mean over the passes", ""]
    return out


def _matrix_lines(m: Matrix | None) -> list[str]:
    """The Iozone matrix's numbers as the terminal shows them: per operation a row per file
    and record size, each subject's figure (★ the best of the row) and its ratio to the
    first subject with the verdict's mark."""
    if m is None:
        return []
    out = []
    for t in m.tables:
        heads = ["file", "record", *t.subjects, *(f"{s}/{t.baseline}" for s in t.subjects[1:])]
        out += [f"### iozone {_md(t.op)} ({t.unit}, geometric mean; ★ best per row)", ""]
        out += ["| " + " | ".join(_md(h) for h in heads) + " |", "|" + "---:|" * len(heads)]
        for row in t.rows:
            cells = [row.file, row.record]
            cells += [f"{c.text} {glyph(c.outcome)}".strip() for c in row.cells]
            cells += [r.comparison.cell(interval=False) if r.comparison else r.text
                      for r in row.ratios]  # fmt: skip
            out.append("| " + " | ".join(_md(x) for x in cells) + " |")
        out.append("")
    out += [f"Not run: {line}.  " for line in m.skipped]
    return out + ([""] if m.skipped else [])


def _facts_lines(report: Report) -> list[str]:
    """Integrity failures first, as every output leads with them."""
    i = report.integrity
    out = [f"**integrity: failed** {_md(line)}  " for line in (i.failures if i else [])]
    return out + [f"**note:** {_md(n)}  " for n in report.vm_notes]


def _checks_lines(report: Report) -> list[str]:
    """Integrity when all is well, and what each subject lacks, in a line each."""
    i, s = report.integrity, report.semantics
    out = [_md(i.all_ok or i.brief) + "  "] if i is not None and (i.all_ok or i.brief) else []
    if s is not None:
        said = "; ".join(s.lacks) or "every subject supports the same features"
        out.append(f"Semantics: {_md(said)}.  ")
    return out + ([""] if out else [])


def write_figures(run: Run, out_dir: Path) -> list[tuple[str, Path]]:
    """The report's plots, in its order, as standalone PNG and SVG files in out_dir
    ('01-seq-write-fsync.png', ...): the same drawings the page inlines. Returns (title, PNG
    path) per plot."""
    # Imported here: matplotlib only when figures are asked for.
    from fsbench.report.plots.figure import files
    from fsbench.report.plots.rates import plan
    from fsbench.report.plots.scaling import scaling_plots

    with files():
        plots = [*plan(build(run)).all(), *scaling_plots(run)]
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
    """The answer lines with their reasons, then a table per workload with the terminal's
    cells and notes, the diskmark grid, the marks' legend, the environment in one line; the
    sections only the page can show are named, with where they are."""
    report = build(run)
    lines = [f"## fsbench {run.run_id}", ""]
    banners = _facts_lines(report)
    lines += [*banners, ""] if banners else []
    answer = _answer_lines(report)
    if answer:
        lines += ["Fastest first, each ratio to the fastest (reasons against the baseline):", ""]
        lines += [*answer, ""]
    lines += tune_markdown(run)
    aging = [f"{_md(x)}  " for x in report.aging_effects + report.aging_notes]
    lines += [*aging, ""] if aging else []
    # Not measured here, in the page's words (with the VM command and its caveat).
    for m in missing_view(report):
        how = f"; {m['how']} `{m['command']}`" if m["command"] else ""
        caveat = f" ({m['caveat']})" if m["caveat"] else ""
        lines += [f"Not measured here: {_md(m['ids'])} — {_md(m['why'])}{how}{caveat}", ""]
    for t in report.tables:
        lines += [f"### {_md(t.title)}", ""]
        lines += [f"*{_md(t.described)}*", ""] if t.described else []
        lines += [*_workload_table(t), ""]
        if t.latency:
            lines += [f"p99: fio's {t.latency_words}, µs, geometric mean over the samples  "]
        own = report.shared_family is None  # tables of other sizes: each states its own
        lines += [f"{_md(t.legend)}  "] if own else []
        notes = _notes(t)
        lines += [*notes, ""] if notes else ([""] if t.latency or own else [])
    lines += _matrix_lines(report.matrix)
    lines += _diskmark_lines(report)
    lines += _checks_lines(report)
    lines += [
        # The terminal's legend, word for word.
        f"vs: ratio to the baseline with its interval · {report.verdict_legend} · "
        "CI: the geometric mean's 95 % interval (log scale) · CPU app+driver+kthreads.",
        "",
    ]
    if report.page_only:
        lines += [f"Not in this export: {report.not_shown()}: see report.html.", ""]
    env = report.environment
    assert env is not None
    for said in (env.backing_note, env.noise and f"machine noise floor: {env.noise}",
                 env.schedule, *(f"note: {n}" for n in env.notes)):  # fmt: skip
        lines += [f"{_md(said)}  "] if said else []
    lines.append(f"Environment: {env.line} · results.json schema {_schema(run)}")
    if run.command:
        lines += ["", f"Command: `{' '.join(['fsbench', *run.command[1:]])}`"]
    for title, path in figures or []:
        lines += ["", f"![{title}]({path})"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Exporter:
    """One export format: what formats the run, and what it is (the command's help)."""

    write: Callable[[Run, list[tuple[str, Path]] | None], str]
    what: str


# The export formats, one record each: adding one is adding a formatter and a line here.
EXPORTERS: dict[str, Exporter] = {
    "json": Exporter(lambda r, _: to_json(r), "results.json with the report's verdicts"),
    "csv": Exporter(lambda r, _: to_csv(r), "a row per result with its verdict, IOPS, p99"),
    "csv-samples": Exporter(lambda r, _: to_samples_csv(r), "a row per sample (long format)"),
    "markdown": Exporter(to_markdown, "the answer, the tables, the diskmark grid"),
}
ALIASES = {"md": "markdown"}
FORMATS = tuple(EXPORTERS)


def export(run: Run, fmt: str, figures: list[tuple[str, Path]] | None = None) -> str:
    f = fmt.strip().lower()
    f = ALIASES.get(f, f)
    if f not in EXPORTERS:
        raise UsageError(f"--format {fmt!r}: give {', '.join(FORMATS)}")
    return EXPORTERS[f].write(run, figures)
