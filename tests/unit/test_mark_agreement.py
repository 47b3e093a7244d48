"""In every table, HTML page and diff, a ratio's mark agrees with the interval printed beside
it: hundreds of synthetic comparisons rendered, each printed "r lo–hi mark" read back."""

from __future__ import annotations

import html as htmllib
import re

import numpy as np
from rich.console import Console

from fsbench.records.schema import Result, Run, Subject
from fsbench.report.model.diff import diff_runs, ratio_text
from fsbench.report.views.sections import render, render_html

CELL = re.compile(r"([\d.]+)× ([\d.e-]+)–([\d.e-]+) ([▲▼≈?])")


def _expected(lo: float, hi: float, higher_is_better: bool) -> str:
    if lo > 1:
        return "▲" if higher_is_better else "▼"
    if hi < 1:
        return "▼" if higher_is_better else "▲"
    if lo >= 0.98 and hi <= 1.02:
        return "≈"
    return "?"


def _result(subject: str, workload: str, samples: np.ndarray, hib: bool) -> Result:
    xs = [float(x) for x in samples]
    return Result(
        subject=subject,
        workload=workload,
        metric="throughput" if hib else "time",
        unit="MiB/s" if hib else "s",
        higher_is_better=hib,
        samples=xs,
        median=float(np.median(xs)),
        verdict_family={"looks": 3, "comparisons": 2, "alpha": 0.05},
    )


def _runs(n: int, seed: int, mixed: bool = True) -> tuple[Run, Run]:
    """Two runs of n workloads each; in each, subject "other" against the baseline "base",
    ratios from 0.3x to 3x and within a hair of 1, spreads from 0.1 % to 30 %."""
    rng = np.random.default_rng(seed)
    a, b = [], []
    for k in range(n):
        hib = bool(k % 4) or not mixed
        ratio = float(rng.choice([np.exp(rng.normal(0, 0.6)), 1 + rng.normal(0, 0.01)]))
        cv = float(rng.choice([0.001, 0.01, 0.05, 0.3]))
        n_a, n_b = (int(x) for x in rng.integers(2, 9, size=2))
        w = f"w{k}"
        a.append(_result("base", w, 100 * np.exp(rng.normal(0, cv, n_a)), hib))
        a.append(_result("other", w, 100 * ratio * np.exp(rng.normal(0, cv, n_b)), hib))
        b.append(_result("base", w, 100 * ratio * np.exp(rng.normal(0, cv, n_b)), hib))
    subjects = [Subject(id=s, driver="fake", fs="fake", kind="fake") for s in ("base", "other")]
    mk = lambda rid, rs: Run(run_id=rid, started="t", subjects=subjects, results=rs)  # noqa: E731
    return mk("run-a", a), mk("run-b", [*b, *(r for r in a if r.subject == "other")])


def _check(texts: list[str], hib: list[bool]) -> set[str]:
    """Each printed cell read back; a bound beyond floating point prints ∞ (two samples at a
    high confidence) and such an interval contains 1 by construction."""
    assert len(texts) == len(hib)
    marks = set()
    for text, h in zip(texts, hib, strict=True):
        if "∞" in text:
            assert text.endswith("?"), text
            continue
        m = CELL.search(text)
        assert m is not None, text
        _r, lo, hi, mark = m.groups()
        assert mark == _expected(float(lo), float(hi), h), text
        marks.add(mark)
    return marks


def test_terminal_tables_marks_agree_with_their_intervals() -> None:
    run, _ = _runs(300, seed=1)
    con = Console(width=160, record=True, color_system=None)
    render(run, con)
    rows = [ln for ln in con.export_text().splitlines() if ln.startswith("│ other")]
    hib = [r.higher_is_better for r in run.results if r.subject == "other"]
    assert _check(rows, hib) == {"▲", "▼", "≈", "?"}


def test_html_marks_agree_with_their_intervals() -> None:
    run, _ = _runs(12, seed=2, mixed=False)  # all higher-is-better: the page's marks read alike
    page = htmllib.unescape(render_html(run))
    cells = re.findall(r"[\d.]+× [\d.e-]+–[\d.e∞-]+ [▲▼≈?]", page)
    # Each comparison in its workload's table at least (the summary may repeat it).
    assert len(cells) >= 12
    assert len(_check(cells, [True] * len(cells))) >= 2


def test_diff_marks_agree_with_their_intervals() -> None:
    a, b = _runs(300, seed=3)
    d = diff_runs(a, b)
    rows = [r for r in d.results if r.ratio_ci95 is not None]
    marks = _check([ratio_text(r) for r in rows], [r.higher_is_better for r in rows])
    assert marks >= {"▲", "▼", "?"}
