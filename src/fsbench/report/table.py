"""The terminal table a person reads at a glance: per workload, each subject's median ± CI,
its ratio to the baseline (the first subject) with the ratio's interval, where the CPU went, and
under the table the measured reasons each subject differs from the baseline (explain.py).
"""

from __future__ import annotations

import statistics as _st
from collections.abc import Iterable

from rich.table import Table
from rich.text import Text

from fsbench.report.answer import first_why, missing_pieces, pack, why_lines
from fsbench.report.model import Report, Row, Why
from fsbench.report.notes import TableNotes, counted_lines
from fsbench.report.style import colour
from fsbench.report.summary import is_matrix
from fsbench.schema import Run
from fsbench.verdict import family_of


def _styled(text: str, outcome: str) -> Text:
    return Text(text, style=colour(outcome))


def _note_lines(t: TableNotes, verbose: bool, width: int = 100) -> list[Text]:
    """What the model decided the table says: failures subject by subject, the kinds many
    subjects share as a count, each subject's own notes when verbose."""
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


def _why_lines(w: Why, width: int) -> list[Text]:
    out = [Text(f"  {w.subject}: {w.words}", style="dim")] if w.words else []
    if w.explanation is not None and w.explanation.factors:
        # Wrapped, never dropped: at 80 columns a first factor can be wider than a line.
        out += [Text(line) for line in why_lines(w.explanation, min(width, 100))]
    return out


def _p99(row: Row) -> Text:
    out = Text(row.p99)
    c = row.p99_comparison
    if c is not None:
        out.append(" ").append_text(_styled(c.cell(interval=False), c.outcome))
    return out


def workload_tables(report: Report, width: int = 100, verbose: bool = False) -> list[Table | Text]:
    """The model's workload tables as rich tables, each with its notes and reasons under it."""
    out: list[Table | Text] = []
    for tb in report.tables:
        title = f"{tb.title}  ({tb.described})" if tb.described else tb.title
        if not tb.higher_is_better:
            title += "  — lower is better"
        # A Text title: "[same]" in a title is the placement, not console markup.
        t = Table(title=Text(title), title_justify="left")
        t.add_column("subject", style="bold")
        t.add_column(f"{tb.unit} ±CI95", justify="right")
        t.add_column("vs " + (tb.baseline or "baseline"), justify="right")
        if tb.latency:
            t.add_column("IOPS", justify="right")
            t.add_column("p99 µs", justify="right")
        t.add_column(f"CPU {tb.cpu_unit}", justify="right")
        t.add_column("cache")
        t.add_column("n", justify="right")
        lat = 2 if tb.latency else 0
        for r in tb.rows:
            if r.status != "ok":
                t.add_row(r.subject, Text(r.status, style="red"), "", *[""] * lat, "", "", "0")
                continue
            t.add_row(
                r.subject,
                r.centre,
                _styled(r.vs, r.outcome),
                *((r.iops, _p99(r)) if tb.latency else ()),
                r.cpu,
                r.cache,
                f"{r.n}{r.stop_mark}",
            )
        out.append(t)
        if tb.latency:
            out.append(Text(f"  p99: fio's {tb.latency_words}, µs, median over the samples", "dim"))
        out += _note_lines(tb.notes_detail if verbose else tb.notes, verbose, width)
        for w in tb.whys:
            out += _why_lines(w, width)
    return out


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


def answer_lines(report: Report, width: int = 100) -> list[Text]:
    """The answer first: per workload the fastest subject, then the others best first with
    their ratio to it (the tables' ratio text and marks), wrapped between subjects only, and
    under it each subject's first-ranked reason, so the why is on the first screen too."""
    out = []
    for a in report.answers:
        if a.separated:
            head = Text.assemble((f"{a.title}: ", "bold"), (a.winner, "bold green"))
            head.append(f" {a.value}" + (" (alone)" if a.alone else ""))
            items = [Text(f"{i.subject} ").append_text(_styled(i.text, i.outcome)) for i in a.items]
        else:
            # No fastest to crown: the leaders in the verdict's words, then the others.
            head = Text.assemble((f"{a.title}: ", "bold"), ("not separated", "bold yellow"))
            head.append(" — ")
            items = [Text(f"{a.winner} {a.value}", style="yellow")] + [
                Text(f"{i.subject} {i.text}", style="yellow")
                if i.leader
                else Text(f"{i.subject} ").append_text(_styled(i.text, i.outcome))
                for i in a.items
            ]
        for i in a.unranked:
            items.append(Text(f"{i.subject} ", style="dim").append(i.text, style="red"))
        if items and a.separated:
            head.append(" › ")
        out += pack(items, width, head, indent="    ", sep=" › ")
        # Why, beside the answer: each ranked subject's first reason (the tables say more).
        for w in a.whys:
            if w.words:
                out.append(Text(f"  {w.subject}: {w.words}", style="dim"))
            elif w.explanation is not None:
                out += [Text(line) for line in first_why(w.explanation, width, answer=True)]
    if out:
        out.insert(0, Text(answer_head(report), style="dim"))
    return out


def answer_head(report: Report) -> str:
    """The answer's legend, beside it: what the ratios are to, what the marks say, and which
    subject the reasons are measured against (the tables' baseline, not the fastest)."""
    base = next((a.baseline for a in report.answers if a.baseline is not None), None)
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
