"""One decision of which notes a table shows (report/model/notes.py), read from a stored real
run: the terminal and the HTML page say the same counted lines with the same advice, the page shows
what `--verbose` shows, no output repeats a stored sentence's "raise --repeat", no interval is
called 100 %, and the integrity summary names only subjects that were mounted."""

from __future__ import annotations

import html
import json
import re
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.cli.commands.report import with_driver_quirks
from fsbench.records.notecodes import Note, legacy, words
from fsbench.records.schema import SCHEMA_VERSION, Integrity, Result, Run, Sample, Schedule
from fsbench.report.model.facts import checked_subjects
from fsbench.report.model.grouping import groups
from fsbench.report.model.naming import confidence_text
from fsbench.report.model.notes import counted_lines, table_notes
from fsbench.report.views.sections import render, render_html
from fsbench.stats.aggregate import aggregate
from fsbench.stats.baseline import ranked

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"


def _run() -> Run:
    return with_driver_quirks(Run.model_validate_json(FIXTURE.read_text()))


def _terminal(run: Run, verbose: bool = False) -> str:
    con = Console(width=100, record=True, color_system=None)
    render(run, con, verbose=verbose)
    return con.export_text()


def _page(run: Run) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", render_html(run)))


def test_a_schema_3_run_loads_with_its_sentences_as_notes() -> None:
    run = _run()
    assert json.loads(FIXTURE.read_text())["schema_version"] == 3
    codes = {n.code for r in run.results for n in r.notes}
    assert {"ci-wide", "cv-high", "kthread-vanished", "daemon-threads-exited"} <= codes
    assert all(len(r.notes) == len(r.flags) + len(r.warnings) for r in run.results)
    flag = legacy("daemon-threads-exited (2/3 samples): 2")
    assert flag == Note(code="daemon-threads-exited", params={"detail": "2"}, samples=(2, 3))
    assert words(flag) == "daemon-threads-exited (2/3 samples): 2"
    assert legacy("placement-partial: only one CPU allowed").code == "placement-partial"
    assert legacy("emulated") == Note(code="emulated")
    assert legacy("Something a person wrote").code == "note"
    # An older sentence's own advice is dropped; the kind's advice is said once instead.
    old = legacy(
        "CV is 26.8 % of the mean: the machine may be busy; close other programs or raise --repeat"
    )
    assert (
        old.code == "cv-high" and words(old) == "CV is 26.8 % of the mean: the machine may be busy"
    )


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


def test_a_damaged_image_that_never_mounted_is_no_ones_ok_and_said_so() -> None:
    run = _run()
    gone = run.subjects[6]  # xfs: its mount failed on an image the checker finds damaged
    assert gone.id == "xfs"
    gone.status, gone.error = "failed", "mount failed: bad superblock"
    run.results = [r for r in run.results if r.subject != gone.id]
    gone.integrity = Integrity(status="failed", problems=["xfs_repair: bad magic number"])
    term = _terminal(run)
    assert "xfs: integrity: failed — xfs_repair: bad magic number (it never mounted" in term
    assert not any("xfs" in ln for ln in term.splitlines() if "integrity: ok" in ln)
    assert not any("xfs" in ln for ln in _page(run).splitlines() if "Integrity: ok" in ln)


def test_fixture_is_a_real_run() -> None:
    doc = json.loads(FIXTURE.read_text())
    assert doc["environment"]["kernel"] and len(doc["results"]) == 16


def test_a_new_result_stores_its_notes_as_codes_and_parameters() -> None:
    details = [
        Sample(value=v, seconds=2.0, bytes=2**30, cache=c, flags=f)
        for v, c, f in (
            (100.0, "cold-verified", []),
            (140.0, "cold-verified", ["daemon-threads-exited:2"]),
            (80.0, "warm", ["daemon-threads-exited:1"]),
        )
    ]
    res = Result(subject="ntfs-3g", workload="seq-read", metric="throughput", unit="MiB/s")
    res.samples, res.sample_details = [d.value for d in details], details
    aggregate(res)
    by_code = {n.code: n for n in res.notes}
    assert set(by_code) == {"ci-wide", "cv-high", "mixed-cache", "daemon-threads-exited"}
    cv = statistics.stdev(res.samples) / statistics.mean(res.samples)
    assert by_code["cv-high"].params["cv"] == pytest.approx(cv)
    assert by_code["ci-wide"].params["target_rel"] == 0.05
    assert by_code["mixed-cache"].params == {"states": ["cold-verified", "warm"]}
    assert by_code["daemon-threads-exited"].samples == (2, 3)
    # The words kept in the JSON are the notes' own, and a reload reads the notes, not them.
    assert set(res.flags) | set(res.warnings) == {words(n) for n in res.notes}
    doc = Run(run_id="r", started="t", results=[res]).model_dump(mode="json")
    assert doc["schema_version"] == SCHEMA_VERSION == 5
    doc["results"][0]["warnings"] = ["words a renderer must not read"]
    back = Run.model_validate(doc).results[0]
    assert back.notes == res.notes
    assert "raise --repeat" not in " ".join(words(n) for n in back.notes)


def test_a_note_added_after_aggregation_is_data_and_words() -> None:
    res = Result(subject="xfs", workload="seq-read", metric="throughput", unit="MiB/s")
    note = Note(code="integrity-failed", params={"problem": "xfs_repair: bad magic"})
    res.add_note(note)
    res.add_note(note)
    assert res.notes == [note]
    assert res.flags == ["integrity-failed: xfs_repair: bad magic (not ranked)"]
    assert not ranked(res)  # baseline.py reads the code
