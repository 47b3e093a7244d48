"""The HTML report in a real headless Chromium (Debian's `chromium`): the page renders (a
screenshot that is not blank), has its plots (SVG elements in the rendered DOM), fetches nothing
(the page's own resource timing lists no request) and logs no script errors.

No root needed; skipped with the reason when no Chromium is installed (CI installs it).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fsbench.report.model import build
from fsbench.report.plots.rates import plan
from fsbench.report.views.sections import write_report

UNIT = Path(__file__).resolve().parents[1] / "unit"
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "chrome")
# The flags of a browser that talks to nobody: no sync, updates or field trials.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
# Appended to a copy of the page (never to the report itself): after load, write the URLs the
# page fetched (images, styles, fonts, scripts) into the DOM for --dump-dom to show.
PROBE = (
    "<script>addEventListener('load', () => { document.body.dataset.fetched = "
    "JSON.stringify(performance.getEntriesByType('resource').map(e => e.name)); });</script>"
)


def _chromium() -> str:
    for name in CHROMIUMS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium here: apt-get install -y chromium (scripts/setup.sh does)")


def _synthetic() -> ModuleType:
    # The synthetic run with known numbers lives with the unit tests of the report; load it
    # from there rather than keep a second copy.
    spec = importlib.util.spec_from_file_location("fsbench_report_unit", UNIT / "test_report.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _script_errors(log: str) -> list[str]:
    return [
        ln
        for ln in log.splitlines()
        if "Uncaught" in ln or ("CONSOLE" in ln and ("rror" in ln or "ERROR" in ln))
    ]


@pytest.fixture(scope="session")  # once, however xdist orders the tests
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    run = _synthetic().synthetic_run()
    out = tmp_path_factory.mktemp("report")
    return write_report(run, out), len(plan(build(run)).all())


@pytest.mark.slow
def test_console_errors_are_seen(tmp_path: Path) -> None:
    """The control: a page with a script error is caught, or the check below proves nothing."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>no_such_function();</script>")
    res = _browse(bad, tmp_path / "profile", "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    assert _script_errors(res.stderr), res.stderr[-2000:]


@pytest.mark.slow
def test_report_has_its_plots_fetches_nothing_and_logs_no_errors(
    report: tuple[Path, int], tmp_path: Path
) -> None:
    path, n_plots = report
    probed = tmp_path / "probed.html"
    probed.write_text(path.read_text().replace("</body>", PROBE + "</body>"))
    res = _browse(probed, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert "<svg" in dom, dom[:500]
    assert dom.count("<svg") == n_plots
    assert 'data-fetched="[]"' in dom, dom[dom.find("data-fetched") :][:300]
    assert '<strong class="winner">ext4</strong> is fastest' in dom
    assert not _script_errors(res.stderr), _script_errors(res.stderr)


@pytest.mark.slow
def test_report_renders_to_a_screenshot_that_is_not_blank(
    report: tuple[Path, int], tmp_path: Path
) -> None:
    from PIL import Image  # matplotlib depends on Pillow

    path, _ = report
    shot = tmp_path / "shot.png"
    res = _browse(path, tmp_path / "profile", "--window-size=1280,3000", f"--screenshot={shot}")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    assert not _script_errors(res.stderr), _script_errors(res.stderr)
    with Image.open(shot) as im:
        rgb = im.convert("RGB")
        assert rgb.size == (1280, 3000)
        colours = rgb.getcolors(maxcolors=1 << 20) or []
    white = sum(n for n, c in colours if c == (255, 255, 255))
    total = 1280 * 3000
    # Text, plot lines and the coloured subject swatches: far from a blank page.
    assert len(colours) > 50, len(colours)
    assert white < 0.97 * total, white / total
    assert any(n > 100 and c[0] > 150 and c[1] < 100 and c[2] < 100 for n, c in colours)  # red


# After load, what a reader of a 1280 × 800 window sees: each workload's answer and every
# subject's first reason (their text and whether they lie within the first screen), the page's
# own width, and any element that sticks out past the window outside a box that scrolls.
LAYOUT = """<script>addEventListener('load', () => {
  const W = innerWidth, H = 800;  // the first screen of a 1280 × 800 window
  const seen = el => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.top >= 0 && r.bottom <= H && r.left >= 0 && r.right <= W; };
  // The fastest (.winner), or where none is crowned, the leader's place (the first .rank).
  const lead = el => el.querySelector('.winner') || el.querySelector('.rank');
  const answers = [...document.querySelectorAll('.answer')].map(el => ({
    workload: el.dataset.workload, winner: lead(el).textContent,
    crowned: !!el.querySelector('.winner'), visible: seen(lead(el)),
    whys: [...(el.nextElementSibling?.matches('ul.why') ? el.nextElementSibling.children : [])]
      .map(li => ({subject: li.dataset.subject, text: li.textContent, visible: seen(li)}))}));
  const wide = [...document.querySelectorAll('body *')].filter(el => {
    const r = el.getBoundingClientRect();
    // An SVG's inner groups keep their clipped extent: the <svg> box is what is drawn.
    return (r.right > W + 1 || r.width > W) && !el.closest('.scroll')
      && !(el.closest('svg') && el.tagName !== 'svg');
  }).map(el => el.tagName + (el.id ? '#' + el.id : '') + ' '
            + Math.round(el.getBoundingClientRect().width));
  document.body.dataset.layout = JSON.stringify({W, H, answers, wide,
    scrollWidth: document.documentElement.scrollWidth});
});</script>"""


@pytest.mark.slow
def test_default_comparison_answers_on_the_first_screen_and_nothing_is_wider(
    tmp_path: Path,
) -> None:
    """The stored default comparison (8 drivers, a real run) at 1280 × 800: every workload's
    fastest subject and ntfs-3g's first reason lie within the first screen; no element is wider
    than the window (tables scroll inside their own box), as the browser laid them out."""
    import html
    import json
    import re

    from fsbench.records.schema import Run
    from fsbench.report.model import build
    from fsbench.report.model.answer import answer_factor, answer_text, answers

    run = Run.model_validate_json((UNIT / "fixtures" / "default_compare.json").read_text())
    page = write_report(run, tmp_path / "out")
    probed = tmp_path / "layout.html"
    probed.write_text(page.read_text().replace("</body>", LAYOUT + "</body>"))
    res = _browse(
        probed,
        tmp_path / "profile",
        "--window-size=1280,800",
        "--virtual-time-budget=5000",
        "--dump-dom",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'data-layout="([^"]*)"', res.stdout)
    assert m, res.stdout[:500]
    got = json.loads(html.unescape(m.group(1)))
    assert got["W"] == 1280 and got["H"] == 800
    assert got["scrollWidth"] <= 1280 and got["wide"] == [], got["wide"][:10]
    shown = {a["workload"]: a for a in got["answers"]}
    for a in answers(run):
        assert a.winner is not None
        on_page = shown[a.title]
        # Crowned only where the verdicts separate the fastest; the leader shown either way.
        assert on_page["crowned"] == a.separated, on_page
        assert on_page["winner"].split()[0] == a.winner.subject and on_page["visible"], on_page
    write = next(
        w.explanation
        for a in build(run).answers
        if a.title.startswith("seq-write")
        for w in a.whys
        if w.subject == "ntfs-3g" and w.explanation is not None
    )
    first = answer_factor(write)
    assert first is not None
    li = next(w for w in shown[write.title]["whys"] if w["subject"] == "ntfs-3g")
    assert answer_text(write, first) in li["text"] and li["visible"], li
