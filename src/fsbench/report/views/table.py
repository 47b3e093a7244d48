"""The terminal table a person reads at a glance: per workload, each subject's centre ± CI,
its ratio to the baseline (the first subject) with the ratio's interval, where the CPU went, and
under the table the measured reasons each subject differs from the baseline (explain.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text

from fsbench.report.model import Report, Row, Why
from fsbench.report.model import Table as Workload
from fsbench.report.style import colour


def _styled(text: str, outcome: str) -> Text:
    return Text(text, style=colour(outcome))


def pack(
    items: list[Text], width: int, head: Text | str = "", indent: str = "  ", sep: str = " · "
) -> list[Text]:
    """Items joined by `sep` into lines of at most `width` columns, breaking only between
    items (a ratio is never split from its subject); an item wider than a line gets its own."""
    lines: list[Text] = []
    line = Text(head) if isinstance(head, str) else head.copy()
    fresh = True  # nothing but the head or the indent on this line yet
    for item in items:
        glue = "" if fresh else sep
        if not fresh and line.cell_len + len(glue) + item.cell_len > width:
            lines.append(line)
            line, glue = Text(indent), ""
        line.append(glue)
        line.append_text(item)
        fresh = False
    lines.append(line)
    return lines


def _note_lines(tb: Workload, verbose: bool, width: int = 100) -> list[Text]:
    """What the model decided the table says: failures subject by subject, the kinds many
    subjects share as a count, each subject's own notes when verbose."""
    t = tb.notes_detail if verbose else tb.notes
    lines = [Text(f"  ✗ {s}: {why}", style="red") for s, why in t.failures]
    for line in tb.note_lines(verbose):
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
    # Wrapped, never dropped: at 80 columns a first factor can be wider than a line.
    return out + [Text(line) for line in w.lines(width)]


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
            said = f"  p99: fio's {tb.latency_words}, µs, geometric mean over the samples"
            out.append(Text(said, "dim"))
        if report.shared_family is None:  # tables of other sizes: each states its own
            out.append(Text(f"  {tb.legend}", "dim"))
        out += _note_lines(tb, verbose, width)
        for w in tb.whys:
            out += _why_lines(w, width)
    return out


def subject_lines(report: Report, width: int = 100) -> Iterable[Text]:
    """Failed subjects one by one; those not measured in as few lines as their reasons allow,
    with the command that measures them in a VM where a known kernel has them."""
    for s in report.run.subjects:
        if s.status == "failed":
            yield Text(f"✗ {s.id}: {s.error}", style="red")
    for pieces in report.missing_lines(width):
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
            else:
                out += [Text(line) for line in w.answer_lines(width)]
    if out:
        out.insert(0, Text(answer_head(report), style="dim"))
    return out


def answer_head(report: Report) -> str:
    """The answer's legend, beside it: what the ratios are to, what the marks say, and which
    subject the reasons are measured against (the tables' baseline, not the fastest)."""
    base = next((a.baseline for a in report.answers if a.baseline is not None), None)
    against = f"; reasons vs {base}" if base else ""
    return f"ratios to the fastest: ▲▼ decided, ≈ same, ? not separated{against}:"


def legend(report: Report) -> str:
    """What the tables' columns mean, one line under them (the marks are explained beside the
    answer): the interval's confidence and the error rate it holds (fsbench.verdict), the
    tables' shared family's, else each table's under it (Table.legend)."""
    fam = report.shared_family
    if fam is None:
        vs = (
            "its interval at the confidence under each table (any false ▲/▼ in a table ≤ "
            f"{report.family.alpha * 100:.0f} %)"
        )
    else:
        scope = "a table" if fam.tails else "the run"
        vs = (
            f"its interval at {fam.confidence_text()} % (any false ▲/▼ in {scope} ≤ "
            f"{fam.alpha * 100:.0f} %)"
        )
    return f"vs: ratio to the baseline, {vs} · CPU s/GiB app+driver+kthreads · cold ✓ device read"
