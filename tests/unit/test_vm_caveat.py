"""The command a report suggests for the drivers this kernel lacks: where VMs run emulated it
carries the small-check flags docs/vm-kernels.md recommends and the caveat `doctor` prints, in
the same words in the terminal, the HTML page and markdown; with KVM, or for an older run that
did not record it, the plain command."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

from rich.console import Console

from fsbench.cli.app import _print_kernels
from fsbench.cli.commands.report import with_driver_quirks
from fsbench.records.schema import Run
from fsbench.report.exports.export import to_markdown
from fsbench.report.model.answer import missing
from fsbench.report.model.vm_notes import SMALL_FLAGS, emulation_caveat
from fsbench.report.views.sections import render, render_html

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "unit" / "fixtures" / "default_compare.json"
PLAIN = "fsbench compare ntfs3 exfat vfat --kernel debian-6.12"


def _run(virt: str | None) -> Run:
    run = with_driver_quirks(Run.model_validate_json(FIXTURE.read_text()))
    run.environment.virtualization = virt  # type: ignore[assignment]
    run.environment.why_emulated = "no /dev/kvm" if virt == "emulated" else None
    return run


def _terminal(run: Run, width: int) -> str:
    con = Console(width=width, record=True, color_system=None, file=io.StringIO())
    render(run, con)
    return con.export_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_emulated_vms_get_the_small_command_and_the_caveat_everywhere() -> None:
    run = _run("emulated")
    caveat = emulation_caveat("no /dev/kvm")
    assert missing(run).command == f"{PLAIN} {SMALL_FLAGS}"
    page = _flat(html.unescape(re.sub(r"<[^>]+>", "", render_html(run))))
    md = _flat(to_markdown(run))
    assert f"{PLAIN} {SMALL_FLAGS}" in page and caveat in page
    assert f"`{PLAIN} {SMALL_FLAGS}`" in md and caveat in md
    for width in (80, 100):
        term = _terminal(run, width)
        lines = term.splitlines()
        # The command as a shell reads it: continued with a backslash, the flags whole.
        at = next(i for i, ln in enumerate(lines) if ln.strip() == f"{PLAIN} \\")
        assert lines[at + 1].strip() == SMALL_FLAGS
        assert caveat in _flat(term)
        assert all(len(ln) <= width for ln in lines[at - 1 : at + 4])
    wide = _terminal(run, 160)
    assert any(ln.strip() == f"{PLAIN} {SMALL_FLAGS}" for ln in wide.splitlines())


def test_with_kvm_or_unrecorded_the_plain_command() -> None:
    for virt in ("kvm", None):
        run = _run(virt)
        assert missing(run).command == PLAIN
        term = _flat(_terminal(run, 100))
        assert PLAIN in term and SMALL_FLAGS not in term and "emulated" not in term
        assert SMALL_FLAGS not in to_markdown(run)


def test_doctor_says_the_same_words_and_the_doc_the_same_flags() -> None:
    con = Console(width=300, record=True, color_system=None, file=io.StringIO())
    _print_kernels(
        con, {"virtualization": "emulated", "why_emulated": "no /dev/kvm", "kernels": []}
    )
    out = con.export_text()
    assert emulation_caveat("no /dev/kvm") in out and SMALL_FLAGS in out
    doc = (ROOT / "docs" / "vm-kernels.md").read_text()
    assert SMALL_FLAGS in _flat(doc.replace("\\\n", " "))
    assert emulation_caveat("no /dev/kvm") in _flat(doc)


def test_the_page_wraps_the_command_only_between_arguments() -> None:
    # At 1280 px the command once wrapped inside "-size 64M" (code wraps anywhere).
    page = render_html(_run("emulated"))
    codes = re.findall(r'<code class="cmd">(.*?)</code>', page, re.S)
    code = next(c for c in codes if "--kernel" in c)
    args = re.findall(r"<span>([^<]*)</span>", code)
    assert " ".join(html.unescape(a) for a in args) == f"{PLAIN} {SMALL_FLAGS}"
    assert all(" " not in a for a in args)
    assert re.search(r"code\.cmd span\s*\{\s*white-space:\s*nowrap", page)
