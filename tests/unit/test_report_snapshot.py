"""The terminal output of stored runs, byte for byte (plain text at 100 columns, and with
--verbose): what `fsbench show` prints must not change when the report's code is reorganised.
A deliberate change of what the terminal says rewrites the snapshots:

    FSBENCH_SNAPSHOT=write uv run pytest tests/unit/test_report_snapshot.py

Each run is rendered into an out directory of the test's own (`out`, relative to its
tmp_path, so the snapshot names no machine's path): once with `report.html` in it — the last
line names the report — and once without, when the line names only results.json.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.report.model.upgrade import with_centres
from fsbench.report.views.sections import REPORT_NAME, render

FIXTURES = Path(__file__).parent / "fixtures"
CASES = {
    # README command 1: the default compare; and the README's example run.
    "default_compare": "default_compare.json",
    "compare_ext4_ntfs3g": "compare_ext4_ntfs3g.json",
    # A diskmark run (IOPS, p99 and the grid): its snapshot taken after the report model.
    "diskmark_compare": "diskmark_compare.json",
}
OUT = "out"  # the run's --out, relative to the test's working directory (its tmp_path)
REPORT_LINE = f" · report: {OUT}/{REPORT_NAME}"


def _terminal(fixture: str, verbose: bool) -> str:
    run = with_centres(Run.model_validate_json((FIXTURES / fixture).read_text()))  # as read
    con = Console(width=100, record=True, color_system=None)
    render(run, con, out_dir=OUT, verbose=verbose)
    return "\n".join(ln.rstrip() for ln in con.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_stored_run_prints_as_its_snapshot(
    name: str, verbose: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # No report written (a run whose page failed, or a results.json alone): no report named.
    without = _terminal(CASES[name], verbose)
    (tmp_path / OUT).mkdir()
    (tmp_path / OUT / REPORT_NAME).write_text("<html></html>", encoding="utf-8")
    got = _terminal(CASES[name], verbose)
    snap = FIXTURES / "snapshots" / f"{name}{'-verbose' if verbose else ''}.txt"
    if os.environ.get("FSBENCH_SNAPSHOT") == "write":
        snap.write_text(got, encoding="utf-8")
    assert got == snap.read_text(encoding="utf-8")
    # The snapshot is the whole output: the answer, a table, the legend.
    assert "ratios to the fastest" in got and "±CI95" in got
    # The page, when it is there, is named on the results line, and only then.
    last = f"results: {OUT}/results.json"
    assert got.endswith(f"{last}{REPORT_LINE}\n"), got[-200:]
    assert without == got.replace(REPORT_LINE, ""), without[-200:]
    assert without.endswith(f"{last}\n")
