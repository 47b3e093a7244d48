"""Two subjects the run does not separate (ext4 against ext4:relatime, samples within each
other's noise): no output crowns a fastest, and each says "not separated" in fsbench.stats.verdict's
words; a third, clearly slower, is still ranked below them with its mark."""

from __future__ import annotations

import html as htmllib
import re

from explain_fixtures import fuse_trace, kernel_trace, result, run
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.report.exports.export import to_markdown
from fsbench.report.model.answer import answers
from fsbench.report.views.sections import render, render_html


def _tie(third: bool = False) -> Run:
    rs = [
        result("ext4", [1000.0, 1100.0, 930.0, 1040.0], kernel_trace()),
        result("ext4:relatime", [1020.0, 960.0, 1080.0, 990.0], kernel_trace()),
    ]
    subjects: tuple[str, ...] = ("ext4", "ext4:relatime")
    if third:
        rs.append(result("ntfs-3g", [100.0, 101.0, 99.0, 100.5], fuse_trace()))
        subjects += ("ntfs-3g",)
    return run(rs, subjects=subjects)


def _terminal(r: Run) -> str:
    con = Console(width=100, record=True, color_system=None)
    render(r, con)
    return con.export_text()


def _page(r: Run) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", render_html(r)))


def test_the_answer_names_no_fastest_and_says_not_separated() -> None:
    r = _tie()
    (a,) = answers(r)
    assert not a.separated and [x.subject for x in a.leaders] == [
        a.winner.subject,
        a.others[0].subject,
    ]  # type: ignore[union-attr]
    term = _terminal(r)
    start = term.index("seq-write/fsync: ")
    answer = term[start : term.index("\nseq-write/fsync  (")]
    assert answer.startswith("seq-write/fsync: not separated — ")
    assert re.search(r"\(not separated: within ×[\d.]+–[\d.]+\)", answer), answer
    page = _page(r)
    assert "is fastest" not in page and "not separated —" in page
    assert re.search(r"not separated: within ×[\d.]+–[\d.]+", page)
    assert 'class="best"' not in render_html(r)  # no ★ in the tables or the summary
    md = to_markdown(r)
    assert "not separated — " in md and "**ext4" not in md


def test_a_clear_loser_is_still_ranked_below_the_leaders() -> None:
    r = _tie(third=True)
    (a,) = answers(r)
    assert not a.separated and len(a.leaders) == 2
    term = _terminal(r)
    answer = term[term.index("seq-write/fsync: ") : term.index("\nseq-write/fsync  (")]
    assert "not separated" in answer and re.search(r"ntfs-3g 0\.\d+×", answer)
    ntfs = next(ln for ln in answer.splitlines() if re.search(r"ntfs-3g 0\.\d+×", ln))
    assert ntfs.rstrip().endswith("▼")


def test_a_separated_answer_still_crowns_the_fastest() -> None:
    r = run(
        [
            result("ext4", [1000.0, 1010.0, 990.0, 1005.0], kernel_trace()),
            result("ntfs-3g", [100.0, 101.0, 99.0, 100.5], fuse_trace()),
        ]
    )
    (a,) = answers(r)
    assert a.separated
    line = next(ln for ln in _terminal(r).splitlines() if ln.startswith("seq-write/fsync: "))
    assert line.startswith("seq-write/fsync: ext4 ")
    assert "ext4 is fastest" in " ".join(_page(r).split())
