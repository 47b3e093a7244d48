"""The terminal table at a glance: eight subjects fit 100 columns, shared warnings are one line
with a count, and each subject's own notes appear with --verbose."""

from __future__ import annotations

from explain_fixtures import result, run
from rich.console import Console

from fsbench.records.notecodes import Note
from fsbench.report.views.sections import render

SUBJECTS = ("ext4", "xfs", "ntfs-3g", "lowntfs-3g", "fuse2fs", "exfat-fuse", "btrfs", "ext2")


def _eight() -> object:
    results = []
    for i, sid in enumerate(SUBJECTS):
        # Six subjects with a wide interval (±20 %), two tight ones.
        spread = 0.2 if 1 < i < 8 else 0.001
        base = 1000.0 / (i + 1)
        r = result(sid, [base * (1 - spread), base, base * (1 + spread)], None)
        r.notes = _ci_note(spread)
        results.append(r)
    return run(results, subjects=SUBJECTS)


def _ci_note(spread: float) -> list[Note]:
    if spread < 0.05:
        return []
    return [Note(code="ci-wide", params={"halfwidth_rel": spread, "target_rel": 0.05})]


def _text(verbose: bool) -> str:
    con = Console(width=100, record=True, color_system=None)
    render(_eight(), con, verbose=verbose)  # type: ignore[arg-type]
    return con.export_text()


def test_eight_subjects_fit_100_columns_with_one_warning_line() -> None:
    out = _text(verbose=False)
    assert all(len(line) <= 100 for line in out.splitlines()), out
    rows = {ln.strip("│ ").split()[0]: ln for ln in out.splitlines() if ln.startswith("│")}
    assert set(rows) == set(SUBJECTS)
    # A fixed --repeat turned adaptive sampling off: the advice is to turn it back on.
    advice = "--repeat auto with a longer --time-budget narrows it"
    assert f"CI wider than 5 % for 6 of 8 subjects — {advice}" in out
    assert "raise --repeat" not in out
    assert "confidence interval is" not in out  # the per-subject text stays behind --verbose
    # The ratio cell: the ratio, its interval and the mark that interval gives, on one line.
    assert "0.50× 0.49–0.51 ▼" in rows["xfs"] and "baseline" in rows["ext4"]


def test_verbose_lists_each_subjects_notes() -> None:
    out = _text(verbose=True)
    assert all(len(line) <= 100 for line in out.splitlines())
    detail = [ln for ln in out.splitlines() if "confidence interval is" in ln]
    assert len(detail) == 6
    # The count and its advice stay; the sentences lose their own (older) advice.
    assert "CI wider than 5 % for 6 of 8 subjects" in out and "raise --repeat" not in out


def test_adaptive_run_shows_why_sampling_stopped_in_100_columns() -> None:
    from fsbench.records.schema import Schedule

    r = _eight()
    for i, res in enumerate(r.results):  # type: ignore[attr-defined]
        res.stopped = "budget" if 1 < i < 8 else "settled"
    r.schedule = Schedule(adaptive=True, repeat=3, max_repeat=10, time_budget_s=150, spent_s=148)  # type: ignore[attr-defined]
    con = Console(width=100, record=True, color_system=None)
    render(r, con)  # type: ignore[arg-type]
    out = con.export_text()
    assert all(len(line) <= 100 for line in out.splitlines()), out
    assert "samples: auto, 3–10 per result, budget 150 s, 148 s measuring" in out
    assert "2 settled ✓ · 6 open at the budget …" in out
    rows = {ln.strip("│ ").split()[0]: ln for ln in out.splitlines() if ln.startswith("│")}
    assert rows["ext4"].rstrip("│ ").endswith("3✓") and rows["btrfs"].rstrip("│ ").endswith("3…")
    # More rounds were already tried where they could help: only more time narrows the rest.
    assert "CI wider than 5 % for 6 of 8 subjects — a longer --time-budget narrows it" in out
