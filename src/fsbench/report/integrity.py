"""Integrity and semantics, as every renderer shows them: integrity failures first (with the
checker's own words), then a compact line per checked subject, and the semantics table in
doctor style (feature × subject, ✓ ✗ ? or the limit). Reads finished `Run` records only."""

from __future__ import annotations

import shlex
from typing import Any

from rich.table import Table
from rich.text import Text

from fsbench.probes.semantics import FEATURES, mark
from fsbench.schema import Integrity, Run, Subject


def failed_subjects(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.integrity is not None and s.integrity.status == "failed"]


def failure_lines(run: Run) -> list[str]:
    """One line per damaged subject, for the very top of every report."""
    out = []
    for s in failed_subjects(run):
        assert s.integrity is not None
        out.append(
            f"{s.id}: integrity: failed — {'; '.join(s.integrity.problems[:3])} "
            "(its speed figures are shown but not ranked)"
        )
    return out


def checked_text(i: Integrity) -> str:
    """'e2fsck -fn (e2fsck 1.47.0 (5-Feb-2023)) clean; 8 files re-read, digests match; 1.2 s'."""
    if i.status == "not-checked" and i.checker is None and not i.digest_files:
        return "; ".join(i.not_checked) or "nothing checked"
    bits = []
    c = i.checker
    if c is not None:
        verdict = "clean" if c.exit_code == 0 else (c.says or f"exit {c.exit_code}")
        bits.append(f"{shlex.join(c.command[:-1])} ({c.version or 'version unknown'}): {verdict}")
    if i.digest_files or i.digest_failures:
        bad = len(i.digest_failures)
        bits.append(
            f"{i.digest_files} files ({i.digest_bytes // 1024} KiB) re-read, "
            + (f"{bad} digest(s) differ" if bad else "digests match")
        )
    bits.append(f"kernel log: {len(i.kernel_log)} line(s)" if i.kernel_log else "kernel log quiet")
    bits += [f"not checked: {n}" for n in i.not_checked]
    bits.append(f"{i.seconds:.1f} s")
    return "; ".join(bits)


def integrity_lines(run: Run) -> list[Text]:
    """For the terminal: failures first and loud, then one dim line per other subject."""
    out = [Text("✗ " + line, style="bold red") for line in failure_lines(run)]
    for s in run.subjects:
        i = s.integrity
        if i is None or i.status == "failed":
            continue
        style = "green" if i.status == "ok" else "yellow"
        out.append(Text(f"integrity: {i.status} {s.id} — {checked_text(i)}", style=style))
    return out


def _with_semantics(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.semantics]


def semantics_table(run: Run) -> Table | None:
    subjects = _with_semantics(run)
    if not subjects:
        return None
    t = Table(title="semantics (probed on each mount)", title_justify="left")
    t.add_column("feature")
    for s in subjects:
        t.add_column(s.id, justify="center")
    for key, label in FEATURES.items():
        row = []
        for s in subjects:
            f = (s.semantics or {}).get(key)
            text = mark(f) if f is not None else ""
            style = {"✓": "green", "✗": "red", "?": "dim"}.get(text, "")
            row.append(Text(text, style=style))
        t.add_row(label, *row)
    return t


def semantics_rows(run: Run) -> dict[str, Any]:
    """For the HTML: subjects, and per feature the mark and the probe's words per subject."""
    subjects = _with_semantics(run)
    rows = []
    for key, label in FEATURES.items():
        cells = []
        for s in subjects:
            f = (s.semantics or {}).get(key)
            text = mark(f) if f is not None else ""
            cls = {"✓": "better", "✗": "worse", "?": "dim"}.get(text, "")
            cells.append({"text": text, "cls": cls, "title": f.detail if f else ""})
        rows.append({"label": label, "cells": cells})
    return {"subjects": [s.id for s in subjects], "rows": rows}


def integrity_rows(run: Run) -> list[dict[str, Any]]:
    out = []
    for s in run.subjects:
        i = s.integrity
        if i is None:
            continue
        out.append(
            {
                "id": s.id,
                "status": i.status,
                "problems": i.problems,
                "command": shlex.join(i.checker.command) if i.checker else "",
                "version": (i.checker.version or "") if i.checker else "",
                "covers": i.checker.covers if i.checker else "",
                "summary": checked_text(i),
                "kernel_log": i.kernel_log,
            }
        )
    return out


def changes(a: Run, b: Run) -> list[str]:
    """What `diff` says about a subject in both runs whose integrity or semantics changed (a
    driver patch that breaks fallocate): 'ntfs-3g: fallocate ✓ → ✗ (fallocate(1 MiB): ...)'."""
    out = []
    sb = {s.id: s for s in b.subjects}
    for x in a.subjects:
        y = sb.get(x.id)
        if y is None:
            continue
        ia, ib = x.integrity, y.integrity
        if ia is not None and ib is not None and ia.status != ib.status:
            why = f" ({'; '.join(ib.problems[:2])})" if ib.problems else ""
            out.append(f"{x.id}: integrity {ia.status} → {ib.status}{why}")
        if x.semantics and y.semantics:
            for key, label in FEATURES.items():
                fa, fb = x.semantics.get(key), y.semantics.get(key)
                if fa is None or fb is None or mark(fa) == mark(fb):
                    continue
                out.append(f"{x.id}: {label} {mark(fa)} → {mark(fb)} ({fb.detail})")
    return out
