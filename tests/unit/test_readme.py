"""The README is a quick start: at most 120 lines, its two commands exactly as CI and users run
them, and a link to every page under docs/ (where the rest lives)."""

from __future__ import annotations

import re
from pathlib import Path

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
