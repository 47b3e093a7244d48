"""The terminal table a person reads at a glance: per workload, each subject's median ± CI,
its ratio to the baseline (the first subject) with the ratio's interval, where the CPU went, and
under the table the measured reasons each subject differs from the baseline (explain.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from fsbench import stats
from fsbench.lab.backing import format_size
from fsbench.report.explain import brief_lines, explain_run
from fsbench.report.matrix_table import has_matrix, matrix_tables
from fsbench.report.naming import baseline_result, result_title, styled_ratio
from fsbench.report.summary import is_matrix
from fsbench.schema import Result, Run


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def _ci_text(res: Result) -> str:
    if res.median is None:
        return "–"
    if res.ci95 is None or not res.median:
        return f"{_fmt(res.median)}"
    half = max(res.median - res.ci95[0], res.ci95[1] - res.median) / res.median * 100
    return f"{_fmt(res.median)} ±{half:.0f}%"


def ratio_text(base: Result | None, res: Result) -> Text:
    if base is None or base is res or not base.samples or not res.samples:
        return Text("baseline" if base is res else "–", style="dim")
    c = stats.compare(base.samples, res.samples)
    if c.ratio is None:
        return Text("–")
    txt = f"{c.ratio:.2f}×"
    if c.ratio_ci95:
        txt += f" [{c.ratio_ci95[0]:.2f}–{c.ratio_ci95[1]:.2f}]"
    return styled_ratio(c, txt, res.higher_is_better, ns=" ≈ n.s.")


def _cpu_text(res: Result) -> str:
    per = res.cpu.per_gib
    if not per:
        per_kop = getattr(res.cpu, "per_kop_ms", None)
        if per_kop:
            parts = "+".join(
                f"{per_kop.get(k, 0):.1f}" for k in ("app", "driver", "kernel_threads")
            )
            return f"{parts} ms/kop"
        return "–"
    return "+".join(f"{per.get(k, 0):.1f}" for k in ("app", "driver", "kernel_threads"))


_CACHE_SHORT = {
    "cold-verified": "cold ✓",
    "cold-unverified": "cold ?",
    "direct-not-honored": "direct ✗",
    "n/a": "",
}


def _notes(res: Result) -> list[str]:
    if res.status != "ok":
        return [f"{res.status}: {res.error}"]
    return [
        *(f for f in res.flags if not f.startswith(("kthread-vanished", "daemon-threads"))),
        *res.warnings,
    ]


def workload_tables(run: Run, width: int = 100) -> list[Table | Text]:
    subjects = [s.id for s in run.subjects if s.status != "unavailable"]
    by_workload: dict[str, list[Result]] = {}
    for res in run.results:
        if is_matrix(res):
            continue  # the matrix has tables of its own (matrix_table.py)
        by_workload.setdefault(result_title(res), []).append(res)
    # Why each subject differs from the baseline: a line or two under the table.
    explained = {id(run.results[e.index]): e for e in explain_run(run)}
    out: list[Table | Text] = []
    for workload, results in by_workload.items():
        results.sort(key=lambda r: subjects.index(r.subject) if r.subject in subjects else 99)
        base = baseline_result(results, subjects)
        unit = results[0].unit
        described = _describe(results[0])
        title = f"{workload}  ({described})" if described else workload
        if not results[0].higher_is_better:
            title += "  — lower is better"
        t = Table(title=title, title_justify="left")
        t.add_column("subject", style="bold")
        t.add_column(f"{unit} ±CI95", justify="right")
        t.add_column("vs " + (base.subject if base else "baseline"), justify="right")
        t.add_column("CPU s/GiB app+drv+kthr", justify="right")
        t.add_column("cache")
        t.add_column("n", justify="right")
        notes: list[Text] = []
        for r in results:
            mark = ""
            if _notes(r):
                mark = f" [{len(notes) + 1}]"
                style = "red" if r.status != "ok" else "dim"
                notes.append(
                    Text(f"  [{len(notes) + 1}] {r.subject}: " + "; ".join(_notes(r)), style=style)
                )
            if r.status != "ok" or not r.samples:
                t.add_row(r.subject + mark, Text(r.status, style="red"), "", "", "", "0")
                continue
            t.add_row(
                r.subject + mark,
                _ci_text(r),
                ratio_text(base, r),
                _cpu_text(r),
                _CACHE_SHORT.get(r.cache, r.cache),
                str(len(r.samples)),
            )
        out.append(t)
        out += notes
        for r in results:
            e = explained.get(id(r))
            if e is not None and not e.is_baseline:
                out += [Text(line) for line in brief_lines(e, min(width, 100))]
    return out


def _describe(res: Result) -> str:
    p = res.params
    bits = []
    if "block_size" in p:
        bits.append(f"bs={p['block_size']}")
    if isinstance(p.get("file_size"), int) and p["file_size"]:
        bits.append(f"file={format_size(p['file_size'])}")
    if p.get("numjobs", 1) not in (1, None):
        bits.append(f"{p['numjobs']} jobs")
    if p.get("clients") is not None:
        bits.append(f"{p['clients']} clients")
    if p.get("fsync") == "end":
        bits.append("final fsync")
    if p.get("direct"):
        bits.append("O_DIRECT")
    return ", ".join(bits)


def subject_lines(run: Run) -> Iterable[Text]:
    for s in run.subjects:
        if s.status == "failed":
            yield Text(f"✗ {s.id}: {s.error}", style="red")
        elif s.status == "unavailable":
            yield Text(f"· {s.id} not measured: {s.error}", style="dim")


def render(run: Run, console: Console | None = None, out_dir: str | None = None) -> None:
    console = console or Console()
    env = run.environment
    head = Text.assemble(
        ("fsbench ", "bold"),
        (run.run_id, "cyan"),
        f"  {env.kernel} · {env.cpus} CPUs · {env.backing}",
        ("  (incomplete)" if run.status == "incomplete" else "", "yellow"),
    )
    parts: list = [head]
    if env.backing_note:
        parts.append(Text(env.backing_note, style="dim"))
    for note in getattr(env, "notes", None) or []:
        parts.append(Text(f"note: {note}", style="yellow"))
    parts += workload_tables(run, console.width)
    if has_matrix(run):
        parts += matrix_tables(run)
    parts += list(subject_lines(run))
    parts.append(
        Text(
            "vs: ratio of medians to the baseline [95 % interval], ≈ n.s. = not significant · "
            "cold ✓: the device really was read",
            style="dim",
        )
    )
    if out_dir:
        report = Path(out_dir) / "report.html"
        also = f" · report: {report}" if report.exists() else ""
        parts.append(Text(f"results: {out_dir}/results.json{also}", style="dim"))
    report_error = getattr(run.environment, "report_error", None)
    if report_error:
        parts.append(Text(report_error, style="bold red"))
    console.print(Group(*parts))
