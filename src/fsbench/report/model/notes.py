"""Which notes a table shows, decided once for every renderer (terminal, HTML, markdown).

A result's notes are data (`Result.notes`: a code and its parameters, fsbench.notecodes), worded
by `notecodes.words` the same in every output. Their kinds decide where each shows: the kinds
many subjects share (a wide interval, a high CV, outliers) are told once per table as a count
with one piece of advice; the probes' bookkeeping (a kernel thread or a daemon thread that
came and went) only in detail; everything else per subject in detail, and as a count
otherwise. `table_notes` applies it; the terminal asks for detail with --verbose, the HTML
page always (it has the room), so the page says what `--verbose` says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fsbench.records.notecodes import KINDS, level, words
from fsbench.records.schema import Result, Schedule
from fsbench.stats.describe import DEFAULT_TARGET_REL_HALFWIDTH


def advice(schedule: Schedule | None) -> str:
    """What narrows a wide interval: an adaptive run already sampled on where it could, so only
    more time helps; a fixed --repeat turned adaptive sampling off."""
    if schedule is not None and schedule.adaptive:
        return "a longer --time-budget narrows it"
    return "--repeat auto with a longer --time-budget narrows it"


@dataclass
class TableNotes:
    """What a table says under it: failures always, the counted kinds once each, and per
    subject its own notes (detail only); `hidden` counts the notes left to detail."""

    failures: list[tuple[str, str]] = field(default_factory=list)
    counted: list[str] = field(default_factory=list)  # the first carries the advice
    per_subject: dict[str, list[str]] = field(default_factory=dict)
    hidden: int = 0
    n: int = 0  # subjects that finished
    advice: str = ""  # what narrows a wide interval, when one is


def table_notes(results: Sequence[Result], schedule: Schedule | None, detail: bool) -> TableNotes:
    """The one decision of which notes a workload's table shows."""
    out = TableNotes()
    counts: dict[str, int] = {}
    for r in results:
        if r.status != "ok":
            out.failures.append((r.subject, f"{r.status}: {r.error}"))
            continue
        own = []
        for note in r.notes:
            lv = level(note)
            if lv == "counted":
                counts[note.code] = counts.get(note.code, 0) + 1
            if detail or lv == "shown":
                own.append(words(note))
            elif lv == "note":
                out.hidden += 1
        if own:
            out.per_subject[r.subject] = own
    n = out.n = sum(1 for r in results if r.status == "ok")
    target = f"{DEFAULT_TARGET_REL_HALFWIDTH * 100:g} %"
    for k in KINDS:
        if k.count and k.code in counts:
            out.counted.append(k.count.format(k=counts[k.code], n=n, target=target))
    out.advice = advice(schedule) if "ci-wide" in counts else ""
    return out


def counted_lines(t: TableNotes, hint: str = "") -> list[str]:
    """The counted kinds in one line, with the advice when an interval is wide: 'CI wider than
    5 % for 2 of 2 subjects, CV > 10 % for 2 — a longer --time-budget narrows it'; `hint` says
    where the per-subject notes are ('(--verbose)')."""
    if not t.counted:
        return []
    line = ", ".join(t.counted)
    if not t.counted[0].startswith("CI wider"):
        line += f" of {t.n} subjects"
    if t.advice:
        line += f" — {t.advice}"
    return [line + (f" {hint}" if hint else "")]
