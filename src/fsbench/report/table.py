"""The terminal table a person reads at a glance: per workload, each subject's median ± CI,
its ratio to the baseline (the first subject) with the ratio's interval, where the CPU went, and
under the table the measured reasons each subject differs from the baseline (explain.py).
"""

from __future__ import annotations

import statistics as _st
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from rich.table import Table
from rich.text import Text

from fsbench.report.answer import (
    answers,
    first_why,
    leader_text,
    missing_pieces,
    pack,
    why_lines,
)
from fsbench.report.comparison import verdict_of
from fsbench.report.explain import explain_run
from fsbench.report.latency import columns as latency_columns
from fsbench.report.latency import legend as latency_legend
from fsbench.report.naming import (
    STOP_MARKS,
    baseline_result,
    ci_text,
    placement_text,
    ranked,
    result_title,
    styled_ratio,
)
from fsbench.report.notes import counted_lines, table_notes
from fsbench.report.summary import is_matrix
from fsbench.schema import Result, Run, Schedule
from fsbench.units import fmt_value
from fsbench.units import size_text as format_size
from fsbench.verdict import family_of


def _fmt(v: float | None, digits: int = 1) -> str:
    return fmt_value(v, digits)


def ratio_text(base: Result | None, res: Result) -> Text:
    """'1.23× 1.10–1.38 ▲': the ratio to the baseline, its interval and the mark the interval
    gives (fsbench.verdict through report.naming: ▲ better, ▼ worse, ≈ within ±2 %, ? open)."""
    if not ranked(res):
        return Text("not ranked", style="red")
    if base is None or base is res or not base.samples or not res.samples:
        return Text("baseline" if base is res else "–", style="dim")
    return styled_ratio(verdict_of(base, res), res.higher_is_better)


def _cpu_text(res: Result) -> str:
    per = res.cpu.per_gib
    if not per:
        per_kop = res.cpu.per_kop_ms
        if per_kop and _per_run(res):
            # One operation is one run of the user's command: CPU seconds per run.
            return "+".join(
                f"{per_kop.get(k, 0) / 1e6:.2f}" for k in ("app", "driver", "kernel_threads")
            )
        if per_kop:
            parts = "+".join(
                f"{per_kop.get(k, 0):.1f}" for k in ("app", "driver", "kernel_threads")
            )
            return parts
        return "–"
    return "+".join(f"{per.get(k, 0):.1f}" for k in ("app", "driver", "kernel_threads"))


def _per_run(res: Result) -> bool:
    return res.params.get("engine") == "command"


_CACHE_SHORT = {
    "cold-verified": "cold ✓",
    "cold-unverified": "cold ?",
    "direct-not-honored": "direct ✗",
    "n/a": "",
}


def _note_lines(
    results: list[Result], schedule: Schedule | None, verbose: bool, width: int = 100
) -> list[Text]:
    """What notes.table_notes decides the table says: failures subject by subject, the kinds
    many subjects share as a count, each subject's own notes when verbose."""
    t = table_notes(results, schedule, detail=verbose)
    lines = [Text(f"  ✗ {s}: {why}", style="red") for s, why in t.failures]
    for line in counted_lines(t):
        # Where each subject's own words are, when it fits the line (the HTML shows them).
        hint = "" if verbose or len(line) + 15 > width else " (--verbose)"
        lines.append(Text("  " + line + hint, style="yellow"))
    for subject, notes in t.per_subject.items():
        lines.append(Text(f"  · {subject}: " + "; ".join(notes), style="dim"))
    if t.hidden:
        lines.append(Text(f"  {t.hidden} other notes: --verbose or the HTML report", style="dim"))
    return lines


def workload_tables(
    run: Run, width: int = 100, verbose: bool = False, explained: dict[int, Any] | None = None
) -> list[Table | Text]:
    subjects = [s.id for s in run.subjects if s.status != "unavailable"]
    by_workload: dict[str, list[Result]] = {}
    for res in run.results:
        if is_matrix(res):
            continue  # the matrix has tables of its own (matrix_table.py)
        by_workload.setdefault(result_title(res), []).append(res)
    # Why each subject differs from the baseline: a line or two under the table.
    if explained is None:
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
        # A Text title: "[same]" in a title is the placement, not console markup.
        t = Table(title=Text(title), title_justify="left")
        t.add_column("subject", style="bold")
        t.add_column(f"{unit} ±CI95", justify="right")
        t.add_column("vs " + (base.subject if base else "baseline"), justify="right")
        lat_cols = latency_columns(results, base)  # IOPS and p99 where latency-bound
        for head, _ in lat_cols:
            t.add_column(head, justify="right")
        # Workloads that move no bytes report CPU per 1000 operations: the header says which.
        per_kop = not any(r.cpu.per_gib for r in results) and any(r.cpu.per_kop_ms for r in results)
        cpu_unit = "s/run" if all(_per_run(r) for r in results) else "ms/kop"
        t.add_column(f"CPU {cpu_unit if per_kop else 's/GiB'}", justify="right")
        t.add_column("cache")
        t.add_column("n", justify="right")
        for r in results:
            if r.status != "ok" or not r.samples:
                t.add_row(
                    r.subject, Text(r.status, style="red"), "", *[""] * len(lat_cols), "", "", "0"
                )
                continue
            t.add_row(
                r.subject,
                ci_text(r),
                ratio_text(base, r),
                *(cell(r) for _, cell in lat_cols),
                _cpu_text(r),
                _CACHE_SHORT.get(r.cache, r.cache),
                f"{len(r.samples)}{STOP_MARKS.get(r.stopped or '', '')}",
            )
        out.append(t)
        out += latency_legend(results)
        out += _note_lines(results, run.schedule, verbose, width)
        for r in results:
            e = explained.get(id(r))
            if e is not None and e.is_baseline:
                # The baseline differs from nothing in its table, but from its own other
                # placements it may: say so when the verdict is ▲ or ▼.
                moved = [
                    f
                    for f in e.factors
                    if f.name.startswith("placement") and f.outcome in ("better", "worse")
                ]
                e = replace(e, factors=moved)
            if e is not None and e.factors:
                # Wrapped, never dropped: at 80 columns a first factor can be wider than a line.
                out += [Text(line) for line in why_lines(e, min(width, 100))]
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
    if p.get("placement"):
        bits.append(placement_text(p["placement"]))
    return ", ".join(bits)


def subject_lines(run: Run, width: int = 100) -> Iterable[Text]:
    """Failed subjects one by one; those not measured in as few lines as their reasons allow,
    with the command that measures them in a VM where a known kernel has them."""
    for s in run.subjects:
        if s.status == "failed":
            yield Text(f"✗ {s.id}: {s.error}", style="red")
    for pieces in missing_pieces(run, width):
        for line in pack([Text(p) for p in pieces], width, "· ", indent="  ", sep=" "):
            line.stylize("dim")
            yield line


def answer_lines(run: Run, explained: dict[int, Any] | None = None, width: int = 100) -> list[Text]:
    """The answer first: per workload the fastest subject, then the others best first with
    their ratio to it (the tables' ratio text and marks), wrapped between subjects only, and
    under it each subject's first-ranked reason, so the why is on the first screen too."""
    out = []
    for a in answers(run, explained):
        if a.winner is None:
            continue
        if a.separated:
            head = Text.assemble((f"{a.title}: ", "bold"), (a.winner.subject, "bold green"))
            head.append(
                f" {fmt_value(a.winner.median)} {a.unit}"
                + ("" if a.others or a.unranked else " (alone)")
            )
            items = [Text(f"{r.subject} ").append_text(ratio_text(a.winner, r)) for r in a.others]
        else:
            # No fastest to crown: the leaders in the verdict's words, then the others.
            head = Text.assemble((f"{a.title}: ", "bold"), ("not separated", "bold yellow"))
            head.append(" — ")
            top = Text(f"{a.winner.subject} {fmt_value(a.winner.median)} {a.unit}", style="yellow")
            items = [top] + [
                Text(f"{r.subject} {leader_text(a.winner, r)}", style="yellow")
                if r in a.leaders
                else Text(f"{r.subject} ").append_text(ratio_text(a.winner, r))
                for r in a.others
            ]
        for r in a.unranked:
            why = "not ranked" if r.status == "ok" else r.status
            items.append(Text(f"{r.subject} ", style="dim").append(why, style="red"))
        if items and a.separated:
            head.append(" › ")
        out += pack(items, width, head, indent="    ", sep=" › ")
        # Why, beside the answer: each ranked subject's first reason (the tables say more).
        out += [Text(line) for e in a.whys for line in first_why(e, width, answer=True)]
    if out:
        out.insert(0, Text(answer_head(run), style="dim"))
    return out


def answer_head(run: Run) -> str:
    """The answer's legend, beside it: what the ratios are to, what the marks say, and which
    subject the reasons are measured against (the tables' baseline, not the fastest)."""
    base = next((a.baseline.subject for a in answers(run) if a.baseline is not None), None)
    against = f"; reasons vs {base}" if base else ""
    return f"ratios to the fastest: ▲▼ decided, ≈ same, ? not separated{against}:"


def schedule_line(run: Run) -> str:
    """How many samples were taken and why they stopped, in one line."""
    sc = run.schedule
    assert sc is not None
    spent = f", {sc.spent_s:.0f} s measuring" if sc.spent_s is not None else ""
    if not sc.adaptive:
        return f"samples: {sc.repeat} per result (--repeat {sc.repeat}){spent}"
    budget = f", budget {sc.time_budget_s:g} s" if sc.time_budget_s is not None else ""
    why: dict[str, int] = {}
    for r in run.results:
        if r.stopped and not is_matrix(r):
            why[r.stopped] = why.get(r.stopped, 0) + 1
    told = {"settled": "settled ✓", "budget": "open at the budget …"}
    told["max-repeat"] = f"open at --max-repeat {sc.max_repeat} …"
    told["planned"] = "open at their planned precision …"
    counts = " · ".join(f"{n} {told[k]}" for k, n in why.items())
    return f"samples: auto, {sc.repeat}–{sc.max_repeat} per result{budget}{spent}" + (
        f" · {counts}" if counts else ""
    )


def noise_line(floor: dict | None) -> str | None:
    """The machine's noise floor at the start of the run and, re-measured, at its end (a move
    beyond their intervals is also one of the run's notes: env.remeasure_noise_floor)."""
    if not floor or floor.get("cv") is None or not floor.get("mib_s"):
        return None
    text = (
        f"CV {floor['cv'] * 100:.1f} % over {floor['runs']} identical raw fio runs at the "
        f"start ({_st.median(floor['mib_s']):,.0f} MiB/s)"
    )
    if floor.get("cv_end") is not None and floor.get("mib_s_end"):
        text += (
            f", {floor['cv_end'] * 100:.1f} % at the end "
            f"({_st.median(floor['mib_s_end']):,.0f} MiB/s)"
        )
    elif floor.get("end_not_measured"):
        text += f", not measured again at the end ({floor['end_not_measured']})"
    return text + ": a spread no subject can beat here"


def legend(run: Run) -> str:
    """What the tables' columns mean, one line under them (the marks are explained beside the
    answer): the interval's confidence and the error rate it holds (fsbench.verdict)."""
    fam = family_of(run)
    scope = "a table" if getattr(fam, "tails", 0) else "the run"
    return (
        f"vs: ratio to the baseline, its interval at {fam.confidence_text()} % (any false ▲/▼ "
        f"in {scope} ≤ {fam.alpha * 100:.0f} %) · CPU s/GiB app+driver+kthreads · "
        "cold ✓ device read"
    )
