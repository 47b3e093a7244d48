"""One decision of which notes a table shows (report/notes.py), read from a stored real run: the
terminal and the HTML page say the same counted lines with the same advice, the page shows
what `--verbose` shows, no output repeats a stored sentence's "raise --repeat", no interval is
called 100 %, and the integrity summary names only subjects that were mounted."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from rich.console import Console

from fsbench.commands.report import with_driver_quirks
from fsbench.report.integrity import checked_subjects
from fsbench.report.naming import confidence_text
from fsbench.report.notes import code_of, counted_lines, sentence, table_notes
from fsbench.report.sections import render, render_html
from fsbench.report.summary import groups
from fsbench.schema import Integrity, Run, Schedule

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"


def _run() -> Run:
    return with_driver_quirks(Run.model_validate_json(FIXTURE.read_text()))


def _terminal(run: Run, verbose: bool = False) -> str:
    con = Console(width=100, record=True, color_system=None)
    render(run, con, verbose=verbose)
    return con.export_text()


def _page(run: Run) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", render_html(run)))


def test_codes_of_stored_sentences_and_flags() -> None:
    run = _run()
    codes = {code_of(t) for r in run.results for t in [*r.flags, *r.warnings]}
    assert {"ci-wide", "cv-high", "outliers", "kthread-vanished", "daemon-threads"} <= codes
    assert code_of("placement-partial: only one CPU allowed") == "placement-partial"
    assert code_of("something a person wrote") == "note"
    # An older sentence's own advice is dropped; the kind's advice is said once instead.
    old = (
        "CV is 26.8 % of the mean: the machine may be busy; close other programs or raise --repeat"
    )
    assert sentence(old) == "CV is 26.8 % of the mean: the machine may be busy"


def test_terminal_and_page_say_the_same_counted_lines() -> None:
    run = _run()
    term, page = _terminal(run), _page(run)
    told = 0
    for g in groups(run):
        if g.matrix:
            continue
        lines = counted_lines(table_notes(g.results(), run.schedule, detail=True))
        for line in lines:
            assert line in page, line
            assert line in " ".join(term.split()), line  # the terminal may wrap it
            told += 1
    assert told >= 2  # both workloads of the default run have a wide interval
    assert "a longer --time-budget narrows it" in " ".join(term.split())  # adaptive: time helps
    for out in (term, page, _terminal(run, verbose=True)):
        assert "raise --repeat" not in out


def test_the_page_shows_what_verbose_shows() -> None:
    run = _run()
    quiet, verbose, page = _terminal(run), _terminal(run, verbose=True), _page(run)
    # The probes' bookkeeping is detail: behind --verbose, and on the page.
    assert "kthread-vanished" not in quiet
    assert "kthread-vanished" in verbose and "kthread-vanished" in page
    assert "daemon-threads-exited" in verbose and "daemon-threads-exited" in page


def test_fixed_repeat_advice_turns_adaptive_sampling_back_on() -> None:
    run = _run()
    run.schedule = Schedule(adaptive=False, repeat=3)
    t = table_notes(run.results[:8], run.schedule, detail=False)
    line = counted_lines(t)[0]
    assert line.endswith("— --repeat auto with a longer --time-budget narrows it"), line


def test_no_interval_is_called_100_percent() -> None:
    assert confidence_text(1 - 0.05 / (56 * 8)) == "99.989"
    assert confidence_text(0.95) == "95"
    page = _page(_run())
    assert "100 % interval" not in page
    assert re.search(r"\(9\d(\.\d+)? % interval\)", page)


def test_integrity_summary_names_only_mounted_subjects() -> None:
    run = _run()
    gone = run.subjects[4]  # ext4: as if its mount had failed
    assert gone.id == "ext4"
    gone.status, gone.error = "failed", "mount failed: wrong fs type"
    run.results = [r for r in run.results if r.subject != gone.id]
    # The image is still checked after the run (clean: nothing was written to it).
    gone.integrity = Integrity(
        status="ok", not_checked=["digests: none (the subject never mounted: nothing was written)"]
    )
    assert gone not in checked_subjects(run)
    term, page = _terminal(run), _page(run)
    summary = next(ln for ln in term.splitlines() if ln.startswith("integrity: ok"))
    assert "ext2" in summary and "ext4" not in summary
    line = next(ln for ln in page.splitlines() if "Integrity: ok" in ln)
    assert "ext2" in line and "ext4" not in line


def test_fixture_is_a_real_run() -> None:
    doc = json.loads(FIXTURE.read_text())
    assert doc["environment"]["kernel"] and len(doc["results"]) == 16
