"""Every output formats the same decided cells (report/model/): stored runs (a default run,
a diskmark run, an Iozone matrix run, a run with a damaged volume), loaded as `show` loads them
and rendered as terminal, HTML, markdown, CSV and JSON, carry the same ratio, interval, mark,
CPU, n and notes; the same matrix cells and ratios, diskmark grid, integrity and semantics
lines; CSV has a row per result and, in its long format, a row per sample; what an output
cannot show is named in it. Every printed ratio is that of the printed centres: in the
workload tables, a diff's and a tune's."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path
from unittest.mock import patch

import pytest
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.records.store import _read_results_json
from fsbench.report.exports.export import export
from fsbench.report.model import Report, Table, build
from fsbench.report.model.notes import counted_lines
from fsbench.report.model.upgrade import upgrade
from fsbench.report.plots.rates import Plots
from fsbench.report.style import glyph
from fsbench.report.views.diskmark import grid_view
from fsbench.report.views.sections import View, render, render_html
from fsbench.units import size_text

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = ("default_compare.json", "diskmark_compare.json", "matrix", "damaged")


def _stored(name: str, tmp: Path) -> Run:
    """The run as `show` loads a results.json: a fixture; the Iozone matrix run of
    test_report.py; a tune's last run, its record on it (test_tune.py's fake pipeline); the
    default run with ntfs-3g's volume found damaged."""
    if name == "matrix":
        from test_report import synthetic_run

        text = synthetic_run().to_json()
    elif name == "tune":
        from test_tune import tuner

        with pytest.MonkeyPatch.context() as mp:
            # fuse2fs: its last run (the confirmation) sets four subjects side by side, the
            # winners together among them.
            go = tuner(tmp, mp)
            run, _, _ = go(subject="fuse2fs", workloads="seq-write/fsync,seq-read/cold")
        text = run.to_json()
    elif name == "damaged":
        doc = json.loads((FIXTURES / "default_compare.json").read_text())
        s = next(s for s in doc["subjects"] if s["id"] == "ntfs-3g")
        s["integrity"].update(status="failed", problems=["$MFT and $MFTMirr differ"])
        text = json.dumps(doc)
    else:
        text = (FIXTURES / name).read_text()
    path = tmp / f"{name}.json"
    path.write_text(text)
    return upgrade(_read_results_json(path))


class Outputs:
    def __init__(self, name: str, run: Run) -> None:
        self.name, self.run = name, run
        self.model: Report = build(self.run)
        con = Console(width=200, record=True, color_system=None)
        render(self.run, con)
        self.terminal = con.export_text()
        # The cells, not the figures (the plotters' own tests draw those): a page without
        # plots renders in a fraction of the time.
        nothing = property(lambda v: [])
        with (
            patch.object(View, "plots", property(lambda v: Plots([], {}, []))),
            patch.object(View, "scaling", nothing),
            patch.object(View, "latency_plots", nothing),
            patch("fsbench.report.views.tune.gain_plot", lambda t: None),
        ):
            self.page = html.unescape(render_html(self.run))
        self.markdown = export(self.run, "markdown")
        self.csv = list(csv.DictReader(io.StringIO(export(self.run, "csv"))))
        self.samples = list(csv.DictReader(io.StringIO(export(self.run, "csv-samples"))))
        self.json = json.loads(export(self.run, "json"))


@pytest.fixture(scope="module", params=RUNS)
def out(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    return Outputs(request.param, _stored(request.param, tmp_path_factory.mktemp("runs")))


def _params(p: dict) -> str:
    return json.dumps(p, sort_keys=True, separators=(",", ":"))


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
    csv_by = {(r["subject"], r["workload"], r["params"]): r for r in out.csv}
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
            r = csv_by[(res.subject, res.workload, _params(res.params))]
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
    assert checked >= 2 * len(out.model.tables) - 1


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


def test_matrix_cells_are_the_same_everywhere(out: Outputs) -> None:
    """Each Iozone row: the same figures (★ the same best) and the same ratio with its mark
    in the terminal, the page and the markdown; CSV and JSON carry the ratio and outcome."""
    m = out.model.matrix
    if m is None:
        assert "iozone" not in out.markdown
        return
    assert m.tables and m.skipped
    decided = {}
    for t in m.tables:
        term = out.terminal[out.terminal.index(f"iozone {t.op}  (") :]
        md = out.markdown[out.markdown.index(f"### iozone {t.op} (") :]
        page = out.page[out.page.index(f"<h3>{t.op}</h3>") :]
        for row in t.rows:
            figures = [f"{c.text} {glyph(c.outcome)}".strip() for c in row.cells]
            ratios = [r.comparison.cell(interval=False) if r.comparison else r.text
                      for r in row.ratios]  # fmt: skip
            line = r"\s+".join(re.escape(x) for x in [row.record, *figures, *ratios])
            assert re.search(line, term.split("\n\n\n", 1)[0]), (t.op, line)
            cells = " | ".join([row.file, row.record, *figures, *ratios])
            assert f"| {cells} |" in md, (t.op, cells)
            page_row = "".join(f">{c.text}</td>" for c in row.cells)
            assert page_row in re.sub(r"<td[^>]*", "", page), (t.op, page_row)
            for r in row.ratios:
                assert f">{r.text}<" in page
            for s, r in zip(t.subjects[1:], row.ratios, strict=True):
                if r.comparison is not None:
                    decided[(t.op, row.file, row.record, s)] = r.comparison
    assert decided
    verdicts = {v["index"]: v for v in out.json["verdicts"]}
    for i, res in enumerate(out.run.results):
        p = res.params
        c = decided.get(
            (p.get("op"), size_text(p.get("file_size", 0)), size_text(p.get("record_size", 0)),
             res.subject)
        )  # fmt: skip
        if res.workload != "iozone" or c is None:
            continue
        row = next(r for r in out.csv if r["params"] == _params(p) and r["subject"] == res.subject)
        assert row["verdict"] == verdicts[i]["verdict"] == c.outcome
        assert float(row["ratio"]) == pytest.approx(c.ratio) == verdicts[i]["ratio"]


def test_the_diskmark_grid_is_the_same_everywhere(out: Outputs) -> None:
    g = out.model.diskmark
    if g is None:
        return
    view = grid_view(g)
    assert view is not None
    for (test, cells), row in zip(g.rows, view["rows"], strict=True):
        term = next(ln for ln in out.terminal.splitlines() if ln.startswith(f"│ {test} "))
        page = out.page[out.page.index(f"<td>{test}</td>") :].split("</tr>", 1)[0]
        for s, v in zip(g.subjects, row["cells"], strict=True):
            c = cells[s]
            shown = f"{c.mb} {glyph(c.outcome)}".strip()
            assert shown in term and c.iops in term and c.p99 in term, (test, s)
            assert c.mb in page and c.iops in page and c.p99 in page, (test, s)
            assert v["mark"] == glyph(c.outcome) and (not v["mark"] or v["mark"] in page)


def test_integrity_and_semantics_are_the_same_everywhere(out: Outputs) -> None:
    """Damaged volumes lead every output with the same words; when all is well, the same
    line; what each subject lacks in the same words."""
    i, sem = out.model.integrity, out.model.semantics
    if i is None:
        return
    top = out.terminal.split("\n")[: 3 + len(i.failures)]
    for line in i.failures:
        assert f"✗ {line}" in top
        assert f"integrity: failed</strong> {line}" in out.page
        assert f"**integrity: failed** {line}" in out.markdown
    assert bool(i.failures) == (out.name == "damaged")
    if i.all_ok:
        assert i.brief in out.terminal and i.all_ok in out.page and i.all_ok in out.markdown
    else:
        assert "Integrity: ok" not in out.page and "Integrity: ok" not in out.markdown
    if sem is not None:
        flat = " ".join(out.terminal.split())  # the line wraps at the console's width
        for said in sem.lacks:
            assert said in flat and said in out.markdown
        for head in sem.heads:
            assert f"<th>{head}</th>" in out.page


def test_what_an_output_cannot_show_is_named(out: Outputs) -> None:
    """The markdown and the terminal name everything of the run only the page shows (the
    terminal leaves out what it shows with --verbose, and says so there); nothing is dropped
    silently."""
    named = out.markdown.split("Not in this export: ", 1)[1].split(": see report.html", 1)[0]
    assert named == ", ".join(p.words for p in out.model.page_only)
    flat = " ".join(out.terminal.split())
    said = flat.split("only in report.html: ", 1)[1].split(" results: ", 1)[0].strip()
    assert said == out.model.not_shown(verbose_shows=True)
    for p in out.model.page_only:
        assert (p.words in said) != p.verbose, p
        if p.verbose:  # shown with --verbose, and the line that leaves it out says so
            assert "--verbose" in flat
    assert "the environment tables" in said
    if out.model.matrix is not None:
        assert "the Iozone matrix's plots" in named
    if out.run.model_extra.get("migrated_from"):
        old = out.run.model_extra["migrated_from"]
        assert f"results.json schema {out.run.schema_version} (migrated from {old})" in out.markdown


def _number(text: str) -> float:
    """A printed figure ('2,203', '0.29×', '1.2k') as a float."""
    t = text.strip().rstrip("×").replace(",", "")
    scale = {"k": 1e3, "M": 1e6}.get(t[-1:], 1.0)
    return float(t[:-1] if scale != 1.0 else t) * scale


def _close(printed_ratio: str, a: float, b: float) -> bool:
    """The printed ratio within its own rounding (half its last digit) and the centres'
    (3 significant digits at least, fmt_value: 0.5 % each) of a / b."""
    digits = len(printed_ratio.rstrip("×").split(".")[1]) if "." in printed_ratio else 0
    return abs(_number(printed_ratio) - a / b) <= 0.5 * 10**-digits + 1e-2 * (a / b)


def test_every_printed_ratio_divides_the_printed_centres(out: Outputs) -> None:
    """One centre everywhere (issue 54): each output prints the geometric mean (centre_of) and
    each ratio is that of the printed centres, the p99 column's included; the CSV's `center`
    and the figures' bars stand at the same value. A format that printed the median, or a
    ratio of medians, fails here (the samples' median and geometric mean differ in every
    fixture table)."""
    from fsbench.report.model.naming import centre_of
    from fsbench.report.plots.figure import centre as bar_at
    from fsbench.stats import latency

    csv_by = {(r["subject"], r["workload"], r["params"]): r for r in out.csv}
    checked = differs = 0
    for t in out.model.tables:
        term, page, md = (
            _terminal_rows(out.terminal, t),
            _page_rows(out.page, t),
            _markdown_rows(out.markdown, t),
        )
        pairs = list(zip(t.results, t.rows, strict=True))
        base = next(((res, row) for res, row in pairs if row.vs == "baseline"), None)
        for res, row in pairs:
            if row.status != "ok":
                continue
            c = centre_of(res)
            assert c is not None and row.median and _number(row.median) == pytest.approx(c, 5e-3)
            assert row.median in term[row.subject] and row.median in page[row.subject]
            assert md[row.subject][1] == row.median
            assert float(csv_by[(res.subject, res.workload, _params(res.params))]["center"]) == (
                pytest.approx(c)
            )
            assert bar_at(res) == c
            differs += res.median is not None and abs(res.median - c) > 1e-9 * c
            if base is None or row.comparison is None:
                continue
            b_res, b_row = base
            cb = centre_of(b_res)
            assert cb and row.comparison.ratio == pytest.approx(c / cb, rel=1e-9), row.subject
            assert _close(row.comparison.ratio_text, _number(row.median), _number(b_row.median))
            checked += 1
            p = row.p99_comparison
            if t.latency and p is not None and p.ratio is not None:
                pa, pb = latency.centre(res), latency.centre(b_res)
                assert pa and pb and p.ratio == pytest.approx(pa / pb, rel=1e-9)
                assert _close(p.ratio_text, _number(row.p99), _number(b_row.p99)), row.p99
    assert checked >= len(out.model.tables) - 1
    assert differs > 0  # the fixtures tell a median from the centre


def test_a_diff_prints_the_centres_it_divides(tmp_path: Path) -> None:
    """`fsbench diff A B`: each row's A and B are the geometric means its ratio divides, in the
    terminal and on the page (a diff printed medians beside a ratio of geometric means:
    ntfs-3g `141 │ 173 │ 1.18×`, where 173 / 141 = 1.23)."""
    from fsbench.cli.commands.report import _print_diff
    from fsbench.report.model import diff_runs
    from fsbench.report.model.naming import centre_of, result_title

    a = _stored("default_compare.json", tmp_path)
    doc = json.loads((FIXTURES / "default_compare.json").read_text())
    for i, r in enumerate(doc["results"]):  # B: every sample 5-20 % slower or faster
        r["samples"] = [x * (0.8 + 0.1 * (i % 4)) for x in r["samples"]]
    (tmp_path / "b.json").write_text(json.dumps(doc))
    b = upgrade(_read_results_json(tmp_path / "b.json"))
    d = diff_runs(a, b)
    rows = [r for r in d.results if r.ratio is not None]
    assert len(rows) >= 10
    for r in rows:
        assert r.centre_a and r.centre_b
        assert r.ratio == pytest.approx(r.centre_b / r.centre_a, rel=1e-9)
    ra = {(r.subject, result_title(r)): r for r in a.results}
    assert sum((r.subject, r.title) in ra for r in rows) >= 10
    for r in rows:
        if (r.subject, r.title) in ra:
            assert r.centre_a == pytest.approx(centre_of(ra[(r.subject, r.title)]))
    # The terminal: each row's two centres as printed, and B / A their ratio within rounding.
    con = Console(width=200, record=True, color_system=None)
    _print_diff(d, con)
    text = con.export_text()
    seen = 0
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")]  # '', subject, A, B, B / A, verdict
        if len(cells) >= 5 and "×" in cells[4] and cells[2][:1].isdigit():
            a_, b_ = _number(cells[2]), _number(cells[3])
            assert _close(cells[4].split()[0], b_, a_), line
            seen += 1
    assert seen >= 10, text


def test_a_tune_prints_the_centres_it_divides(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A tune run in every output: `fsbench tune`'s screen, the report's terminal and page, the
    markdown and the JSON. Each gap prints the subject's and the reference's centres beside
    its ratio (and how many times slower), each change the untuned and the changed centres
    beside the ratio printed (its confirmation's where it was confirmed): every printed ratio
    is that of the printed centres, the JSON's of its centres; the gain chart's bars stand at
    the gains printed, and the CSV's centres are those the confirmed changes divide."""
    from fsbench.records.tunerecord import tune_of
    from fsbench.report.model import shown
    from fsbench.report.views.tune import terminal as tune_terminal
    from fsbench.units import fmt_ratio, fmt_value

    out = Outputs("tune", _stored("tune", tmp_path_factory.mktemp("tune")))
    t = tune_of(out.run)
    assert t is not None and len(t.gaps) == 2 and t.changes
    con = Console(width=200, record=True, color_system=None)
    for part in tune_terminal(out.run):
        con.print(part)
    texts = {"screen": con.export_text(), "terminal": out.terminal, "page": out.page,
             "markdown": out.markdown}  # fmt: skip
    flat = {k: " ".join(v.split()) for k, v in texts.items()}  # lines wrap at the width
    rec = out.json["tune"]
    for g, said in zip(t.gaps, rec["gaps"], strict=True):
        a, b = fmt_value(g.subject_center), fmt_value(g.reference_center)
        line = f"{g.workload}: {t.subject} {a} {g.unit} against {g.reference} {b}: {g.cell}"
        for k, text in flat.items():
            assert line in text, (k, line)
        assert _close(g.cell.split()[0], _number(a), _number(b)), line
        assert g.slower and g.slower > 1 and g.higher_is_better  # a gap, on rates
        slower = fmt_ratio(g.slower)
        assert f"{g.cell} ({slower} slower)" in flat["screen"]
        assert _close(slower, _number(b), _number(a))
        assert said["cell"] == g.cell
        assert said["subject_center"] == g.subject_center
        assert said["reference_center"] == g.reference_center
    rows = [*t.changes, *t.combination]
    for c, said in zip(rows, [*rec["changes"], *rec["combination"]], strict=True):
        x, j = shown(c), said["confirmation"] or said
        assert x.center and x.untuned_center and x.ratio
        a, b = fmt_value(x.untuned_center), fmt_value(x.center)
        centres = f"{a} → {b} {c.unit}"
        assert _close(x.cell.split()[0], _number(b), _number(a)), (c.name, centres, x.cell)
        assert x.ratio == pytest.approx(x.center / x.untuned_center, rel=1e-9)
        assert j["cell"] == x.cell
        assert j["ratio"] == pytest.approx(j["center"] / j["untuned_center"], rel=1e-9)
        for k in ("screen", "terminal"):  # the two cells side by side in the table
            found = re.search(rf"{re.escape(centres)}[\s│]+{re.escape(x.cell)}", texts[k])
            assert found, (k, c.name)
        assert re.search(rf"<td>{re.escape(centres)}</td><td[^>]*>{re.escape(x.cell)}<", out.page)
        assert f"| {centres} | {x.cell} |" in out.markdown
    assert t.combination and any(c.confirmation for c in rows)  # the winners together, confirmed
    # The figure: a bar per change at the speed-up its cell prints (rates: the ratio itself).
    from fsbench.report.views.tune import gain_plot

    drawn: list[float] = []
    with patch("matplotlib.axes.Axes.barh", lambda ax, y, w, **k: drawn.append(w)):
        assert gain_plot(t) is not None
    gains = [shown(c).gain for c in rows if shown(c).gain is not None]
    assert drawn == gains and len(drawn) == len(rows)
    for c in rows:
        assert fmt_ratio(shown(c).gain) == shown(c).cell.split()[0], c.name
    # The CSV: the run is the tune's last (the confirmation), and its results' centres are the
    # ones the confirmed changes divide.
    confirmed = [c for c in rows if c.confirmation is not None]
    assert confirmed
    for c in confirmed:
        x = shown(c)
        wl = c.workload.split("/")[0]
        for subject, centre in ((c.subject, x.center), (c.untuned, x.untuned_center)):
            rows_of = [r for r in out.csv if r["subject"] == subject and r["workload"] == wl]
            got = [float(r["center"]) for r in rows_of]
            assert min(abs(v / centre - 1) for v in got) < 1e-9, (c.name, centre, got)
