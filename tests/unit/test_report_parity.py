"""Every output formats the same decided cells (report/model.py): one stored default run and
one stored diskmark run rendered as terminal, HTML, markdown, CSV and JSON carry the same
ratio, interval, mark, CPU, n and notes; the markdown carries IOPS/p99 and the diskmark grid;
CSV has a row per result and, in its long format, a row per sample; what an output cannot show
is named in it."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.report.diskmark import grid_view
from fsbench.report.export import export
from fsbench.report.model import Report, Table, build
from fsbench.report.notes import counted_lines
from fsbench.report.sections import render, render_html
from fsbench.report.style import glyph
from fsbench.schema import Run

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = ("default_compare.json", "diskmark_compare.json")


class Outputs:
    def __init__(self, name: str) -> None:
        self.run = Run.model_validate_json((FIXTURES / name).read_text()).with_centres()
        self.model: Report = build(self.run)
        con = Console(width=200, record=True, color_system=None)
        render(self.run, con)
        self.terminal = con.export_text()
        self.page = html.unescape(render_html(self.run))
        self.markdown = export(self.run, "markdown")
        self.csv = list(csv.DictReader(io.StringIO(export(self.run, "csv"))))
        self.samples = list(csv.DictReader(io.StringIO(export(self.run, "csv-samples"))))
        self.json = json.loads(export(self.run, "json"))


@pytest.fixture(scope="module", params=RUNS)
def out(request: pytest.FixtureRequest) -> Outputs:
    return Outputs(request.param)


def _terminal_rows(text: str, t: Table) -> dict[str, str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"{t.title}  ("))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    rows = {}
    for ln in lines[start:end]:
        m = re.match(r"│ (\S+) +│", ln)
        if m:
            rows[m.group(1)] = ln
    return rows


def _page_rows(page: str, t: Table) -> dict[str, str]:
    head = page.index(f'{t.title} <span class="dim">')
    body = page[head : page.index("</table>", head)]
    rows = {}
    for m in re.finditer(
        r"<tr><td><span class=\"swatch\"[^>]*></span>([^<]+)</td>(.*?)</tr>", body, re.S
    ):
        rows[m.group(1)] = m.group(2)
    return rows


def _markdown_rows(md: str, t: Table) -> dict[str, list[str]]:
    part = md[md.index(f"### {t.title}\n") :]
    rows = {}
    for ln in part.split("\n### ", 1)[0].splitlines():
        if ln.startswith("| ") and not ln.startswith("| subject"):
            cells = [c.strip() for c in ln.strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


def test_every_output_carries_the_same_cells(out: Outputs) -> None:
    csv_by = {(r["subject"], r["workload"], r["variant"]): r for r in out.csv}
    verdicts = {v["index"]: v for v in out.json["verdicts"]}
    index = {id(r): i for i, r in enumerate(out.run.results)}
    checked = 0
    for t in out.model.tables:
        term, page, md = (
            _terminal_rows(out.terminal, t),
            _page_rows(out.page, t),
            _markdown_rows(out.markdown, t),
        )
        for res, row in zip(t.results, t.rows, strict=True):
            if row.status != "ok":
                continue
            n = f"{row.n}{row.stop_mark}"
            # Terminal and page: the ratio cell (ratio, interval, mark), CPU, n.
            for text in (term[row.subject], page[row.subject]):
                assert row.vs in text and row.cpu in text and n in text, (t.title, text)
            # Markdown: the same cells, column by column.
            cells = md[row.subject]
            c = row.comparison
            assert cells[3] == (c.ratio_text if c else row.vs)
            assert cells[4] == (c.interval_text if c else "") and cells[5] == glyph(row.outcome)
            assert row.cpu in cells and n == cells[-1]
            if t.latency:
                assert row.iops in cells and row.p99 in cells
            # CSV and JSON: the numbers the cells print.
            r = csv_by[(res.subject, res.workload, str(res.params.get("variant") or ""))]
            v = verdicts[index[id(res)]]
            assert int(r["n"]) == row.n
            if c is not None:
                assert float(r["ratio"]) == pytest.approx(c.ratio)
                assert r["verdict"] == v["verdict"] == c.outcome
                assert v["ratio"] == pytest.approx(c.ratio) and v["cell"] == row.vs
            else:
                assert r["verdict"] == v["verdict"] == row.outcome == "baseline"
            if res.cpu.per_gib:
                assert f"{float(r['cpu_app_per_gib_s']):.1f}" == row.cpu.split("+")[0]
            checked += 1
        # Notes: the counted kinds under every table, in the same words.
        for line in counted_lines(t.notes):
            assert line in out.terminal
            assert line in out.markdown
        for line in counted_lines(t.notes_detail):
            assert line in out.page
    assert checked >= 2 * len(out.model.tables)


def test_the_answer_is_the_same_everywhere(out: Outputs) -> None:
    for a in out.model.answers:
        for i in a.items:
            assert f"{i.subject} {i.text}" in out.markdown
            assert i.text in out.page
        for w in a.whys:
            if w.words:
                assert f"{w.subject}: {w.words}" in out.terminal
                assert w.words in out.markdown and w.words in out.page


def test_markdown_has_the_diskmark_grid_and_names_what_it_cannot_show(out: Outputs) -> None:
    g = grid_view(out.model.diskmark)
    if g is not None:
        assert "### diskmark (KDiskMark's tests)" in out.markdown
        for row in g["rows"]:
            line = next(
                ln for ln in out.markdown.splitlines() if ln.startswith(f"| {row['test']} |")
            )
            for c in row["cells"]:
                assert c["iops"] in line and c["p99"] in line and c["mb"] in line
    assert "Not in this export: " in out.markdown and "see report.html" in out.markdown


def test_csv_rows_per_result_and_per_sample(out: Outputs) -> None:
    assert len(out.csv) == len(out.run.results)
    assert len(out.samples) == sum(len(r.samples) for r in out.run.results)
    first = out.run.results[0]
    mine = [s for s in out.samples if s["subject"] == first.subject and s["title"]]
    values = [float(s["value"]) for s in mine if s["workload"] == first.workload][
        : len(first.samples)
    ]
    assert values == pytest.approx(first.samples)
    lat = [r for r in out.csv if r["iops"]]
    if any(r.workload == "diskmark" for r in out.run.results):
        assert lat and all(r["p99_us"] for r in lat)
