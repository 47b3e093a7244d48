"""The terminal output of stored runs, byte for byte (plain text at 100 columns, and with
--verbose): what `fsbench show` prints must not change when the report's code is reorganised.
A deliberate change of what the terminal says rewrites the snapshots:

    FSBENCH_SNAPSHOT=write uv run pytest tests/unit/test_report_snapshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.report.sections import render
from fsbench.report.upgrade import with_centres

FIXTURES = Path(__file__).parent / "fixtures"
CASES = {
    # README command 1: the default compare; and the README's example run.
    "default_compare": ("default_compare.json", "/tmp/answer-default"),
    "compare_ext4_ntfs3g": ("compare_ext4_ntfs3g.json", "/tmp/rep-run2"),
    # A diskmark run (IOPS, p99 and the grid): its snapshot taken after the report model.
    "diskmark_compare": ("diskmark_compare.json", "/tmp/report-dm/out"),
}


def _terminal(fixture: str, out_dir: str, verbose: bool) -> str:
    run = with_centres(Run.model_validate_json((FIXTURES / fixture).read_text()))  # as read
    con = Console(width=100, record=True, color_system=None)
    render(run, con, out_dir=out_dir, verbose=verbose)
    return "\n".join(ln.rstrip() for ln in con.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_stored_run_prints_as_its_snapshot(name: str, verbose: bool) -> None:
    fixture, out_dir = CASES[name]
    got = _terminal(fixture, out_dir, verbose)
    snap = FIXTURES / "snapshots" / f"{name}{'-verbose' if verbose else ''}.txt"
    if os.environ.get("FSBENCH_SNAPSHOT") == "write":
        snap.write_text(got, encoding="utf-8")
    assert got == snap.read_text(encoding="utf-8")
    # The snapshot is the whole output: the answer, a table, the legend.
    assert "ratios to the fastest" in got and "±CI95" in got
