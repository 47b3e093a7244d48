"""A report that cannot be rendered is recorded with the run and said on the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsbench import pipeline
from fsbench.lab.backing import parse_backing
from fsbench.workloads.fake import FakeWorkload


def test_report_failure_is_in_results_json_and_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsbench.report.html as html

    def broken(_run, _out):  # type: ignore[no-untyped-def]
        raise RuntimeError("template exploded")

    monkeypatch.setattr(html, "write_report", broken)
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "out"
    plan = pipeline.Plan(
        subjects=None,
        explicit=False,
        workloads=[FakeWorkload()],
        repeat=1,
        backing=parse_backing(f"dir:{target}"),
        size=64 * 1024 * 1024,
        out_dir=out,
        db=tmp_path / "db.sqlite",
        command=["fsbench", "run"],
        target_dir=target,
        warmup=0,
    )
    run, _code = pipeline.execute(plan)
    doc = json.loads((out / "results.json").read_text())
    assert doc["environment"]["report_error"] == "report.html not written: template exploded"
    assert not (out / "report.html").exists()

    from rich.console import Console

    from fsbench.report.table import render

    console = Console(record=True, width=100)
    render(run, console, out_dir=str(out))
    assert "report.html not written: template exploded" in console.export_text()
