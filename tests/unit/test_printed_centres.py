"""The centre printed is the centre divided: in every output of a stored default run, a diskmark
run and a diff of two runs, each printed ratio equals the ratio of the two printed centres
within the rounding of the three figures — the rate, the p99 (a ratio of geometric means of
the per-sample p99, never printed beside the median p99) and diff's A and B (never the
medians beside a ratio of geometric means: ntfs-3g `141 │ 173 │ 1.18×`, issue 54)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.records.store import _read_results_json
from fsbench.report.exports.export import export
from fsbench.report.model import build
from fsbench.report.model.diff import diff_runs
from fsbench.report.model.upgrade import upgrade
from fsbench.report.views.html import comparisons
from fsbench.report.views.sections import render
from fsbench.units import fmt_ratio, fmt_value

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str, tmp: Path, scale: dict[str, float] | None = None) -> Run:
    doc = json.loads((FIXTURES / name).read_text())
    for r in doc["results"]:
        k = (scale or {}).get(r["subject"])
        if k:  # run B: this subject's samples moved, its centre made again from them
            r["samples"] = [x * k for x in r["samples"]]
            r["median"] *= k
            r["center"] = None
    path = tmp / f"{name}.{len(scale or {})}.json"
    path.write_text(json.dumps(doc))
    return upgrade(_read_results_json(path))


def _num(text: str) -> tuple[float, float]:
    """A printed figure and half its last digit."""
    t = text.strip().rstrip("×").replace(",", "")
    dec = len(t.split(".", 1)[1]) if "." in t else 0
    return float(t), 0.5 * 10.0**-dec


def agrees(ratio: str, a: str, b: str) -> bool:
    """The printed ratio b / a, within the rounding of all three printed figures."""
    (r, hr), (x, hx), (y, hy) = _num(ratio), _num(a), _num(b)
    lo, hi = (y - hy) / (x + hx), (y + hy) / (x - hx)
    return r - hr <= hi * (1 + 1e-12) and r + hr >= lo * (1 - 1e-12)


def test_agrees_catches_a_median_beside_a_ratio_of_geometric_means() -> None:
    assert agrees("1.23×", "141", "173") and not agrees("1.18×", "141", "173")


@pytest.mark.parametrize("name", ["default_compare.json", "diskmark_compare.json"])
def test_every_output_prints_the_centres_its_ratios_divide(tmp_path: Path, name: str) -> None:
    run = _load(name, tmp_path)
    report = build(run)
    con = Console(width=200, record=True, color_system=None)
    render(run, con)
    terminal = con.export_text()
    markdown = export(run, "markdown")
    checked = {"rate": 0, "p99": 0}
    for t in report.tables:
        rows = {r.subject: r for r in t.rows if r.status == "ok"}
        base = rows.get(t.baseline or "")
        if base is None:
            continue
        for row in rows.values():
            c, p = row.comparison, row.p99_comparison
            if c is not None and c.ratio is not None:
                assert agrees(c.ratio_text, base.median, row.median), (t.title, row.subject)
                line = next(ln for ln in terminal.splitlines() if f"│ {row.subject} " in ln
                            and c.ratio_text in ln)  # fmt: skip
                assert row.median in line
                assert f"| {row.subject} | {row.median} |" in markdown
                checked["rate"] += 1
            if p is not None and p.ratio is not None:
                assert agrees(p.ratio_text, base.p99, row.p99), (t.title, row.subject)
                checked["p99"] += 1
    assert checked["rate"] >= 8
    assert checked["p99"] >= (4 if name.startswith("diskmark") else 0)
    # CSV and JSON: the numbers themselves, unrounded.
    rows = list(csv.DictReader(io.StringIO(export(run, "csv"))))
    by = {(r["workload"], r["params"], r["subject"]): r for r in rows}
    for r in rows:
        if not r["ratio"] or r["verdict"] == "baseline":
            continue
        b = by[(r["workload"], r["params"], r["baseline"])]
        assert float(r["ratio"]) == pytest.approx(float(r["center"]) / float(b["center"]))
        if r["p99_ratio"]:
            want = float(r["p99_us"]) / float(b["p99_us"])
            assert float(r["p99_ratio"]) == pytest.approx(want, rel=1e-4)
    doc = json.loads(export(run, "json"))
    for v in doc["verdicts"]:
        if "ratio" in v:
            res = doc["results"][v["index"]]
            key = (v["baseline"], res["workload"], res["params"])
            base_res = next(
                x for x in doc["results"] if (x["subject"], x["workload"], x["params"]) == key
            )
            assert v["ratio"] == pytest.approx(res["center"] / base_res["center"])


def test_a_diff_prints_the_geometric_means_it_divides(tmp_path: Path) -> None:
    """Two runs, B's ntfs-3g and exfat-fuse moved: terminal, page and JSON print A's and B's
    geometric means, and B / A is their ratio; the legend is the diff's own family's."""
    from fsbench.cli.commands.report import _print_diff

    a = _load("default_compare.json", tmp_path)
    b = _load("default_compare.json", tmp_path, {"ntfs-3g": 1.23, "exfat-fuse": 1.05})
    d = diff_runs(a, b)
    con = Console(width=120, record=True, color_system=None)
    _print_diff(d, con)
    terminal = con.export_text()
    (page,) = comparisons([d])
    page_rows = {(r["subject"], r["title"]): r for r in page["rows"]}
    moved = 0
    for r in d.results:
        if r.ratio is None:
            continue
        ratio, ca, cb = fmt_ratio(r.ratio), fmt_value(r.centre_a), fmt_value(r.centre_b)
        assert agrees(ratio, ca, cb), (r.subject, r.title, ca, cb, ratio)
        assert r.ratio == pytest.approx((r.centre_b or 0) / (r.centre_a or 1))
        assert re.search(rf"│ {re.escape(r.subject)} +│ +{re.escape(ca)} │ +{re.escape(cb)} │ "
                         rf"+{re.escape(ratio)}", terminal), (r.subject, terminal)  # fmt: skip
        p = page_rows[(r.subject, r.title)]
        assert (p["a"], p["b"]) == (ca, cb) and p["ratio"].startswith(ratio)
        moved += r.subject in ("ntfs-3g", "exfat-fuse")
    assert moved == 4
    js = d.to_dict()
    assert all(x["ratio"] == pytest.approx(x["centre_b"] / x["centre_a"]) for x in js["results"])
    # The legend states this diff's family (16 comparisons at one look), not a fixed "5 %".
    assert d.family.comparisons == len(d.results) == 16
    assert d.family.confidence_text() in js["legend"] and "16 comparisons" in js["legend"]
    assert js["legend"] in " ".join(terminal.split()) or d.family.confidence_text() in terminal
