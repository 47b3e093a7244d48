"""Which notes a table shows, decided once for every renderer (terminal, HTML, markdown).

A result's flags and warnings are sentences written where they were measured (stats.py,
aggregate.py, the probes). Each gets a code here (`code_of`), from one table of kinds: the
kinds many subjects share (a wide interval, a high CV, outliers) are told once per table as a
count with one piece of advice; the probes' bookkeeping (a kernel thread or a daemon thread
that came and went) only in detail; everything else per subject in detail, and as a count
otherwise. `table_notes` applies it; the terminal asks for detail with --verbose, the HTML
page always (it has the room), so the page says what `--verbose` says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from fsbench import stats
from fsbench.schema import Result, Schedule

Level = Literal["counted", "detail", "note"]


@dataclass(frozen=True)
class Kind:
    code: str
    pattern: re.Pattern[str]  # matches the start of the sentence (or flag) it names
    level: Level = "note"
    count: str = ""  # counted kinds: the per-table line, {k} subjects of {n}
    # An older sentence's own advice, dropped: the kind's advice (advice()) replaces it, so
    # every output gives the same one (a fixed --repeat turns adaptive sampling off).
    tail: re.Pattern[str] | None = None


_RAISE = re.compile(r"; (close other programs or raise --repeat|raise --repeat.*|re-run on a.*)$")

KINDS: tuple[Kind, ...] = (
    Kind(
        "ci-wide",
        re.compile(r"confidence interval is "),
        "counted",
        "CI wider than {target} for {k} of {n} subjects",
        _RAISE,
    ),
    Kind("cv-high", re.compile(r"CV is "), "counted", "CV > 10 % for {k}", _RAISE),
    Kind("outliers", re.compile(r"\d+ outliers? among "), "counted", "outliers in {k}", _RAISE),
    Kind("one-sample", re.compile(r"only 1 sample")),
    Kind("no-samples", re.compile(r"no samples")),
    Kind("short-sample", re.compile(r"samples last only ")),
    Kind("mixed-cache", re.compile(r"mixed cache states")),
    Kind("integrity-failed", re.compile(r"integrity-failed")),
    # The /proc probes' bookkeeping: a thread that came or went during a sample.
    Kind("kthread-vanished", re.compile(r"kthread-vanished"), "detail"),
    Kind("daemon-threads", re.compile(r"daemon-threads"), "detail"),
    Kind("app-threads", re.compile(r"app-threads"), "detail"),
)
# A flag is 'kind: detail', 'kind (k/n samples): detail' or the kind alone ('emulated').
_FLAG_CODE = re.compile(r"([a-z][a-z0-9-]*)(?=:| \(|$)")


def kind_of(text: str) -> Kind | None:
    return next((k for k in KINDS if k.pattern.match(text)), None)


def code_of(text: str) -> str:
    """A note's code: its kind's, or a flag's own prefix ('placement-partial: …'), or 'note'."""
    k = kind_of(text)
    if k is not None:
        return k.code
    m = _FLAG_CODE.match(text)
    return m.group(1) if m else "note"


def sentence(text: str) -> str:
    """The note without an older run's own advice (its kind's advice is said once instead)."""
    k = kind_of(text)
    return k.tail.sub("", text) if k is not None and k.tail is not None else text


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


def _notes(res: Result) -> list[str]:
    return [*res.flags, *res.warnings]


def table_notes(results: Sequence[Result], schedule: Schedule | None, detail: bool) -> TableNotes:
    """The one decision of which notes a workload's table shows."""
    out = TableNotes()
    counts: dict[str, int] = {}
    for r in results:
        if r.status != "ok":
            out.failures.append((r.subject, f"{r.status}: {r.error}"))
            continue
        own = []
        for text in _notes(r):
            k = kind_of(text)
            level = k.level if k is not None else "note"
            if level == "counted":
                assert k is not None
                counts[k.code] = counts.get(k.code, 0) + 1
            if detail:
                own.append(sentence(text))
            elif level == "note":
                out.hidden += 1
        if own:
            out.per_subject[r.subject] = own
    n = out.n = sum(1 for r in results if r.status == "ok")
    target = f"{stats.DEFAULT_TARGET_REL_HALFWIDTH * 100:g} %"
    for k in KINDS:
        if k.code in counts:
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
