"""The report as section records (report/views/sections.py): one order drives the terminal and the
page, every page section has its template, and a new view is one record that shows in both.
Also the answer's reasons: time first, shares of the gap bounded, against the named subject."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
from rich.console import Console
from rich.text import Text

from fsbench.cli.commands.report import with_driver_quirks
from fsbench.records.schema import Run
from fsbench.report.model.answer import gap_share
from fsbench.report.views import html as page
from fsbench.report.views import sections
from fsbench.report.views.sections import SECTIONS, Section, render, render_html

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"
TEMPLATES = Path(sections.__file__).parent.parent / "templates"


def _run() -> Run:
    return with_driver_quirks(Run.model_validate_json(FIXTURE.read_text()))


def _terminal(run: Run, width: int = 100) -> str:
    con = Console(width=width, record=True, color_system=None)
    render(run, con)
    return con.export_text()


def test_every_page_section_has_its_template_and_a_unique_id() -> None:
    ids = [s.id for s in SECTIONS]
    assert len(ids) == len(set(ids))
    for s in SECTIONS:
        if s.html is not None:
            assert (TEMPLATES / s.template).is_file(), s.template
    assert SECTIONS[0].id == "banners"  # the page's header closes after it


def test_the_page_follows_the_one_order() -> None:
    html = render_html(_run())
    found = [m.group(1) for m in re.finditer(r'<section id="([\w-]+)"', html)]
    order = [s.id for s in SECTIONS]
    assert found == sorted(found, key=order.index)
    assert {"answer", "summary", "workloads", "integrity", "environment"} <= set(found)
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S)
    assert nav is not None
    assert re.findall(r'href="#([\w-]+)"', nav.group(1)) == [s for s in found if s != "aging"]


def test_a_new_view_is_one_record(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = Section(
        "demo",
        "Demo",
        terminal=lambda v: [Text(f"demo view of {v.run.run_id}")],
        html=lambda v: {"demo_text": f"demo view of {v.run.run_id}"},
    )
    at = [s.id for s in SECTIONS].index("workloads")
    monkeypatch.setattr(sections, "SECTIONS", (*SECTIONS[:at], demo, *SECTIONS[at:]))
    made = page.jinja()

    def jinja() -> jinja2.Environment:
        # The record's template, as a file under templates/sections/ would give it.
        made.loader = jinja2.ChoiceLoader(
            [
                jinja2.DictLoader(
                    {"sections/demo.html": '<section id="demo">{{ demo_text }}</section>'}
                ),
                made.loader,  # type: ignore[list-item]
            ]
        )
        return made

    monkeypatch.setattr(page, "jinja", jinja)
    run = _run()
    out = _terminal(run)
    assert out.index("demo view of") < out.index("seq-write/fsync  (")  # before the tables
    html = render_html(run)
    assert '<a href="#demo">Demo</a>' in html
    assert html.index('<section id="demo">') < html.index('<section id="workloads">')


def test_the_answers_reasons_lead_with_a_time_and_bound_their_shares() -> None:
    out = _terminal(_run())
    head = next(ln for ln in out.splitlines() if ln.startswith("ratios to the fastest"))
    assert head.endswith("reasons vs ext4:")  # the ratios are to the fastest, xfs
    answer = out[: out.index("seq-write/fsync  (")]
    reasons = [ln for ln in answer.splitlines() if re.match(r"  [\w-]+: ", ln)]
    assert reasons
    for ln in reasons:
        first = ln.split(": ", 1)[1]
        if first.startswith("not separated"):  # no reason for a difference not decided
            continue
        assert re.match(r"(CPU )?[\d.,]+ (µs|ms|s)/GiB", first), ln
    assert "13 s/GiB (60 % of the gap): 262,144 FUSE WRITE/GiB × 4 KiB" in answer
    assert gap_share(2.06) == "more than the gap: factors overlap"
    assert gap_share(-0.2) == "against the gap" and gap_share(0.6) == "60 % of the gap"


def test_the_legend_sits_beside_the_answer_and_under_the_tables() -> None:
    out = _terminal(_run()).splitlines()
    head = next(i for i, ln in enumerate(out) if ln.startswith("ratios to the fastest"))
    assert "▲▼ decided, ≈ same, ? not separated" in out[head]
    legend = next(i for i, ln in enumerate(out) if ln.startswith("vs: ratio"))
    semantics = next(i for i, ln in enumerate(out) if ln.startswith("semantics"))
    assert legend < semantics  # the tables' legend comes with the tables


def test_every_section_the_terminal_cannot_show_is_named_there() -> None:
    """A section with a page part and no terminal part is something of the run the terminal
    names instead ("only in report.html: …", report/model/facts.py PAGE_ONLY), never
    drops in silence; 'comparison' (other runs, `report --with`) is not the run's."""
    from fsbench.report.model.facts import PAGE_ONLY

    page_only = {s.id for s in SECTIONS if s.terminal is None and s.html is not None}
    named = {sid for _, p in PAGE_ONLY for sid in p.sections}
    assert page_only - {"comparison"} <= named, page_only - named
    assert named <= {s.id for s in SECTIONS}, named
