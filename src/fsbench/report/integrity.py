"""Integrity and semantics, as every renderer shows them: integrity failures first (with the
checker's own words), then a compact line per checked subject, and the semantics table in
doctor style (feature × subject, ✓ ✗ ? or the limit). Reads finished `Run` records only."""

from __future__ import annotations

import shlex
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from fsbench.report.answer import pack
from fsbench.schema import FEATURES, Feature, Integrity, Run, Subject


def failed_subjects(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.integrity is not None and s.integrity.status == "failed"]


def checked_subjects(run: Run) -> list[Subject]:
    """Subjects whose volume was mounted and then checked: a subject that never mounted still
    gets its image checked (the checker finds the fresh image clean), but nothing of it was
    used, so no summary may vouch for it."""
    measured = {r.subject for r in run.results if r.samples}
    return [
        s
        for s in run.subjects
        if s.integrity is not None
        and s.integrity.status != "not-checked"
        and (s.id in measured or s.integrity.digest_files > 0 or s.integrity.status == "failed")
    ]


def failure_lines(run: Run) -> list[str]:
    """One line per damaged subject, for the very top of every report."""
    out = []
    measured = {r.subject for r in run.results if r.samples}
    for s in failed_subjects(run):
        assert s.integrity is not None
        # A volume that never mounted was damaged before any workload: none of its own.
        why = (
            "its speed figures are shown but not ranked"
            if s.id in measured or s.integrity.digest_files
            else "it never mounted: no workload wrote to it"
        )
        out.append(f"{s.id}: integrity: failed — {'; '.join(s.integrity.problems[:3])} ({why})")
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


def integrity_lines(run: Run, verbose: bool = True) -> list[Text]:
    """For the terminal: failures first and loud, then one dim line per other subject; when not
    verbose and every other subject is ok, one line for them all."""
    out = [Text("✗ " + line, style="bold red") for line in failure_lines(run)]
    rest = [s for s in checked_subjects(run) if s.integrity.status != "failed"]  # type: ignore[union-attr]
    if not verbose and rest and all(s.integrity.status == "ok" for s in rest):  # type: ignore[union-attr]
        ids = ", ".join(s.id for s in rest)
        out.append(
            Text(
                f"integrity: ok — {ids} (checker clean, digests match, kernel log quiet; "
                "--verbose for each)",
                style="green",
            )
        )
        return out
    for s in rest:
        i = s.integrity
        assert i is not None
        style = "green" if i.status == "ok" else "yellow"
        out.append(Text(f"integrity: {i.status} {s.id} — {checked_text(i)}", style=style))
    return out


def _with_semantics(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.semantics]


# Column heads of the compact semantics table (at most 6 characters, so that all 12 features
# fit 80 columns), said in full on the legend line under it.
SHORT: dict[str, str] = {
    "o_direct": "dio",
    "fallocate": "alloc",
    "fiemap": "fiemap",
    "seek_hole": "holes",
    "sparse_files": "sparse",
    "reflink": "clone",
    "copy_file_range": "cfr",
    "xattr_user": "xattr",
    "posix_permissions": "chmod",
    "case_sensitive": "case",
    "name_max": "name",
    "max_file_size": "size",
}
_UNITS = ((2**60, "E"), (2**50, "P"), (2**40, "T"), (2**30, "G"), (2**20, "M"))


def short_mark(f: Feature | None) -> str:
    """mark() in at most 4 characters: a file-size limit as '16T', '8E'."""
    if f is None:
        return ""
    if isinstance(f.value, int) and f.value > 4096:
        for unit, suffix in _UNITS:
            if f.value >= unit:
                return f"{f.value / unit:.2g}{suffix}".replace("e+0", "e")
    return mark(f)


def semantics_line(run: Run) -> Text | None:
    """The semantics in one line for the first screen: per subject the features another subject
    has and it lacks ('ntfs-3g lacks O_DIRECT honoured, fallocate, …'); the table is behind
    --verbose and on the page."""
    subjects = _with_semantics(run)
    if not subjects:
        return None
    marks = {s.id: {k: short_mark((s.semantics or {}).get(k)) for k in FEATURES} for s in subjects}
    lacks = []
    for s in subjects:
        gone = [
            FEATURES[k]
            for k in FEATURES
            if marks[s.id][k] == "✗" and any(marks[o.id][k] == "✓" for o in subjects)
        ]
        if gone:
            lacks.append(f"{s.id} lacks {', '.join(gone)}")
    said = "; ".join(lacks) if lacks else "every subject supports the same features"
    return Text(f"semantics: {said} (--verbose: the table)", style="dim")


def semantics_table(run: Run, width: int = 80) -> Group | None:
    """Subjects as rows, the features they differ in as columns (short heads, a legend line);
    the features every subject shares are one line. Readable at 80 columns."""
    subjects = _with_semantics(run)
    if not subjects:
        return None
    marks = {s.id: {k: short_mark((s.semantics or {}).get(k)) for k in FEATURES} for s in subjects}
    differ = [k for k in FEATURES if len({marks[s.id][k] for s in subjects}) > 1]
    same = [k for k in FEATURES if k not in differ and marks[subjects[0].id][k]]
    parts: list[Table | Text] = []
    if differ and len(subjects) > 1:
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
        for k in differ:
            t.add_column(SHORT[k], justify="center", no_wrap=True)
        for s in subjects:
            cells = []
            for k in differ:
                text = marks[s.id][k]
                cells.append(Text(text, style={"✓": "green", "✗": "red", "?": "dim"}.get(text, "")))
            t.add_row(s.id, *cells)
        parts.append(t)
        legend = [Text(f"{SHORT[k]} {FEATURES[k]}") for k in differ]
        legend.append(Text("✓ yes ✗ no ? unknown"))
        parts += pack(legend, width, "  ", indent="  ")
        if same:
            shared = [Text(f"{FEATURES[k]} {marks[subjects[0].id][k]}") for k in same]
            parts += pack(shared, width, "  every subject: ", indent="    ", sep=", ")
        for p in parts[1:]:
            p.stylize("dim")  # type: ignore[union-attr]
    else:
        head = subjects[0].id if len(subjects) == 1 else "every subject"
        shared = [Text(f"{FEATURES[k]} {marks[subjects[0].id][k]}") for k in FEATURES]
        parts += pack(shared, width, f"semantics (probed on each mount) — {head}: ", sep=", ")
    return Group(*parts)


def integrity_rows(run: Run) -> list[dict[str, Any]]:
    out = []
    checked = {s.id for s in checked_subjects(run)}
    for s in run.subjects:
        i = s.integrity
        if i is None:
            continue
        out.append(
            {
                "id": s.id,
                # Its image was checked, but it never mounted: nothing of it was vouched for.
                "status": i.status if s.id in checked or i.status != "ok" else "not mounted",
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


def mark(f: Feature) -> str:
    """✓ yes, ✗ no, ? unknown; limits show their value."""
    if f.value is not None:
        return _size(f.value) if isinstance(f.value, int) and f.value > 4096 else str(f.value)
    return {True: "✓", False: "✗", None: "?"}[f.supported]


def _size(n: int) -> str:
    for unit, suffix in ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB")):
        if n >= unit:
            return f"{n / unit:.4g} {suffix}"
    return f"{n} B"
