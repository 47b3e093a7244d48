"""The README is a quick start: at most 120 lines, its two commands exactly as CI and users run
them, and a link to every page under docs/ (where the rest lives)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
RUN = "bash scripts/setup.sh && uv run fsbench compare"
TEST = (
    "bash scripts/setup.sh --test && uv run ruff check && uv run ruff format --check "
    "&& uv run pytest"
)


def test_readme_is_a_quick_start_of_at_most_120_lines() -> None:
    assert len(README.splitlines()) <= 120


def test_the_two_commands_are_there_and_ci_runs_the_test_command_verbatim() -> None:
    lines = README.splitlines()
    assert RUN in lines and TEST in lines
    assert TEST in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_docs_page_is_linked_and_every_link_exists() -> None:
    links = set(re.findall(r"\]\((docs/[^)#]+)\)", README))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages and pages <= links, sorted(pages - links)
    assert all((ROOT / link).is_file() for link in links), sorted(links)
    # The docs' own links between pages point at pages that exist.
    for page in (ROOT / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([\w.-]+\.md)\)", page.read_text()):
            assert (ROOT / "docs" / link).is_file(), (page.name, link)


def test_the_example_is_rendered_from_the_stored_run() -> None:
    """README's example output is what scripts/readme_example.py renders from the stored real
    run (tests/unit/fixtures/compare_ext4_ntfs3g.json): run the script when this fails."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_example", ROOT / "scripts" / "readme_example.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.with_example(README) == README, "run `uv run python scripts/readme_example.py`"
    made = mod.blocks()
    assert made["answer"].startswith("ratios to the fastest") and "ntfs-3g" in made["answer"]
    # The prose quotes the example's figures.
    for figure in (
        "−72 +259%",
        "2.3+4.0+0.1",
        "262,144 FUSE WRITE/GiB",
        "33 µs",
        "59 % of the gap",
    ):
        assert figure in made["answer"] + made["table"], figure
    for quoted in ("−72 +259 %", "4.0 s/GiB in its daemon", "at 33 µs each: 8.5 s per GiB"):
        assert quoted in README, quoted


def test_a_two_driver_comparison_fits_one_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compare ext4 ntfs-3g --size 512M` as it printed (the stored run, with its results path
    and its report, in the test's own directory): at most 45 lines at 100 columns, none
    wider."""
    from rich.console import Console

    from fsbench.records.schema import Run
    from fsbench.report.views.sections import render

    run = Run.model_validate_json(
        (ROOT / "tests/unit/fixtures/compare_ext4_ntfs3g.json").read_text()
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run2").mkdir()
    (tmp_path / "run2" / "report.html").write_text("<html></html>", encoding="utf-8")
    con = Console(width=100, record=True, color_system=None)
    render(run, con, out_dir="run2")
    lines = con.export_text().splitlines()
    assert len(lines) <= 45, len(lines)
    assert all(len(ln.rstrip()) <= 100 for ln in lines)
    assert lines[-1] == "results: run2/results.json · report: run2/report.html"
