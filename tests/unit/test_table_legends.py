"""Each table's legend states its own family: a run whose tables were decided at other
confidences (other subject counts, a p99 column beside the rate) prints, under each table in
the terminal, the page and markdown, the confidence its own intervals were decided at, never
the largest table's (report/model/ Table.family)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console

from fsbench.records.schema import Run
from fsbench.records.store import _read_results_json
from fsbench.report.exports.export import export
from fsbench.report.model import build
from fsbench.report.model.upgrade import upgrade
from fsbench.report.views.sections import render, render_html
from fsbench.stats.verdict import table_family

FIXTURES = Path(__file__).parent / "fixtures"
WIDE = "diskmark/rnd4k-q1t1-read"  # decided as a table of 3 subjects with a p99 column


def _run(tmp: Path, wide: bool = True) -> Run:
    """The stored diskmark run, one table's family widened (its verdicts decided anew)."""
    doc = json.loads((FIXTURES / "diskmark_compare.json").read_text())
    for r in doc["results"]:
        if wide and f"{r['workload']}/{r.get('variant') or ''}".rstrip("/") == WIDE:
            prior = {k: r["verdict_family"][k] for k in ("d0", "s0sq")}
            r["verdict_family"] = table_family(3, columns=2).record() | prior
    path = tmp / "run.json"
    path.write_text(json.dumps(doc))
    return upgrade(_read_results_json(path))


def _blocks(text: str, heads: list[str]) -> dict[str, str]:
    """The text from each table's heading to the next one's (the last: to the end)."""
    at = [(text.index(h), h) for h in heads]
    at.sort()
    return {h: text[i : (at[k + 1][0] if k + 1 < len(at) else len(text))] for k, (i, h) in
            enumerate(at)}  # fmt: skip


def test_each_table_carries_the_family_its_intervals_were_decided_at(tmp_path: Path) -> None:
    report = build(_run(tmp_path))
    assert report.shared_family is None
    confs = {t.title: t.family.confidence_text() for t in report.tables}
    assert confs[WIDE] == "99.17" and {c for t, c in confs.items() if t != WIDE} == {"95"}
    for t in report.tables:
        cs = [r.comparison for r in t.rows if r.comparison is not None]
        assert cs, t.title
        # The legend's confidence is the one every interval in its table was decided at.
        assert {round(c.confidence, 6) for c in cs} == {round(t.family.confidence, 6)}
        assert f"at {confs[t.title]} %" in t.legend
        assert "3 pairs" not in t.legend or t.title == WIDE


def test_every_output_states_each_tables_own_confidence_under_it(tmp_path: Path) -> None:
    run = _run(tmp_path)
    report = build(run)
    titles = [t.title for t in report.tables]
    own = {t.title: f"vs interval at {t.family.confidence_text()} %" for t in report.tables}
    con = Console(width=200, record=True, color_system=None)
    render(run, con)
    terminal = con.export_text()
    markdown = export(run, "markdown")
    page = render_html(run)
    outputs = {
        "terminal": _blocks(terminal, [f"{t}  (" for t in titles]),
        "markdown": _blocks(markdown, [f"### {t}\n" for t in titles]),
        "html": _blocks(page, [f"{t} <span" for t in titles]),
    }
    for name, blocks in outputs.items():
        for (head, block), title in zip(sorted(blocks.items()), sorted(titles), strict=True):
            found = re.findall(r"vs interval at ([\d.]+) %", block)
            # Its own confidence, once, and no other table's.
            assert found == [own[title].split()[-2]], (name, head, found)
    # The legend under all the tables names no one confidence for them all.
    assert "its interval at 95 %" not in terminal
    assert "each interval at its table's confidence" in markdown
    assert "each interval at its table&#39;s confidence" in page


def test_tables_of_one_family_share_one_legend(tmp_path: Path) -> None:
    run = _run(tmp_path, wide=False)
    report = build(run)
    assert report.shared_family is not None
    con = Console(width=200, record=True, color_system=None)
    render(run, con)
    terminal = con.export_text()
    # One legend for all: no table repeats it.
    assert "vs interval at" not in terminal and "its interval at 95 %" in terminal
    assert "vs interval at" not in export(run, "markdown")


def test_tunes_chart_states_the_confidence_of_each_interval_it_draws() -> None:
    """A confirmed change's bar is its confirmation's interval, at the confirmation's family:
    the axis names that confidence beside the selection's, not "95 %" nor the selection's
    alone."""
    from fsbench.records.tunerecord import TuneChange, TuneConfirmation, TuneRecord
    from fsbench.report.views.tune import gain_plot

    sel, confirm = 1 - 0.05 / 8, 1 - 0.05 / 2  # 99.375 and 97.5 %
    kw: dict = {"subject": "s:x", "untuned": "s", "workload": "w", "outcome": "better"}
    alone = TuneChange(name="a", gain=2.0, interval=[1.5, 2.6], cell="2.0× ▲", confidence=sel,
                       **kw)  # fmt: skip
    again = TuneConfirmation(gain=1.8, interval=[1.2, 2.7], cell="1.8× ▲", confidence=confirm,
                             outcome="better")  # fmt: skip
    confirmed = TuneChange(name="b", gain=3.0, interval=[2.0, 4.0], cell="3.0× ▲",
                           confidence=sel, confirmation=again, **kw)  # fmt: skip
    t = TuneRecord(subject="s", against="r", changes=[alone, confirmed], confidence=sel)
    plot = gain_plot(t)
    assert plot is not None
    axis = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", plot.svg))
    assert "each interval at its family's confidence, 97.5 %, 99.38 %" in axis
    assert "95 % interval" not in axis
    # Only the selection drawn: its confidence alone.
    t.changes = [alone]
    plot = gain_plot(t)
    assert plot is not None and "confidence, 99.38 %)" in re.sub(r"<[^>]+>", "", plot.svg)
