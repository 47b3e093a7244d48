"""Integrity and semantics in the terminal: the model's records (report/model/facts.py, via
report/model/) formatted. Failures lead the output, loud; then a compact line per checked
subject (one line for all when every one is ok and not --verbose); the semantics in a line,
or with --verbose as a table in doctor style (subject × feature, ✓ ✗ ? or the limit)."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from fsbench.report.model import IntegrityView, SemanticsView
from fsbench.report.style import colour
from fsbench.report.views.table import pack


def failure_banners(view: IntegrityView | None) -> list[Text]:
    """One loud line per damaged subject, for the very top of the output."""
    return [Text("✗ " + line, style="bold red") for line in (view.failures if view else [])]


def integrity_lines(view: IntegrityView | None, verbose: bool) -> list[Text]:
    """The checked subjects that are not damaged: one dim line each, or one line for them
    all when every one is ok and not verbose."""
    if view is None:
        return []
    if not verbose and view.brief:
        return [Text(view.brief, style="green")]
    out = []
    for r in view.rows:
        if r.checked and r.status != "failed":
            style = "green" if r.status == "ok" else "yellow"
            out.append(Text(f"integrity: {r.status} {r.subject} — {r.summary}", style=style))
    return out


def semantics_line(view: SemanticsView | None) -> Text | None:
    """The semantics in one line for the first screen: per subject the features another has
    and it lacks; the table is behind --verbose and on the page."""
    if view is None:
        return None
    said = "; ".join(view.lacks) or "every subject supports the same features"
    return Text(f"semantics: {said} (--verbose: the table)", style="dim")


def semantics_table(view: SemanticsView | None, width: int = 80) -> Group | None:
    """Subjects as rows, the features they differ in as columns (short heads, a legend line);
    the features every subject shares are one line. Readable at 80 columns."""
    if view is None:
        return None
    parts: list[Table | Text] = []
    if view.features and len(view.rows) > 1:
        t = Table(
            title="semantics (probed on each mount)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            padding=(0, 1),
            collapse_padding=True,
            pad_edge=False,
        )
        t.add_column("subject", no_wrap=True)
        for h in view.short_heads:
            t.add_column(h, justify="center", no_wrap=True)
        for subject, cells in view.rows:
            marks = [Text(c.text, style=colour(c.outcome)) for c in cells]
            t.add_row(subject, *marks)
        parts.append(t)
        legend = [Text(f"{s} {h}") for s, h in zip(view.short_heads, view.heads, strict=True)]
        legend.append(Text("✓ yes ✗ no ? unknown"))
        parts += pack(legend, width, "  ", indent="  ")
        if view.same:
            shared = [Text(f"{words} {mark}") for words, mark in view.same]
            parts += pack(shared, width, "  every subject: ", indent="    ", sep=", ")
        for p in parts[1:]:
            p.stylize("dim")  # type: ignore[union-attr]
    else:
        head = view.rows[0][0] if len(view.rows) == 1 else "every subject"
        shared = [Text(f"{words} {mark}") for words, mark in view.everything]
        parts += pack(shared, width, f"semantics (probed on each mount) — {head}: ", sep=", ")
    return Group(*parts)
