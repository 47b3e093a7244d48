"""Rewrite README's example output from a stored real run kept as a test fixture
(tests/unit/fixtures/compare_ext4_ntfs3g.json: `fsbench compare ext4 ntfs-3g --size 512M`),
rendered exactly as `fsbench show` prints it at 100 columns: the answer, then the first
workload's table with its notes and reasons. tests/unit/test_readme.py fails when the README
differs from what this writes.

    uv run python scripts/readme_example.py
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from fsbench.records.schema import Run
from fsbench.report.model.upgrade import with_centres
from fsbench.report.views.sections import render

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIXTURE = ROOT / "tests" / "unit" / "fixtures" / "compare_ext4_ntfs3g.json"
BLOCK = re.compile(r"(<!-- example: (\w+) -->\n```\n)(.*?)(```)", re.S)


def blocks() -> dict[str, str]:
    """'answer' and 'table': the lines of each, as the terminal shows them at 100 columns."""
    con = Console(width=100, record=True, color_system=None)
    render(with_centres(Run.model_validate_json(FIXTURE.read_text())), con)
    lines = [ln.rstrip() for ln in con.export_text().splitlines()]
    answer_end = next(i for i, ln in enumerate(lines) if ln.startswith("images are files"))
    tables = [i for i, ln in enumerate(lines) if re.match(r"[\w/-]+  \(", ln)]
    return {
        "answer": "\n".join(lines[1:answer_end]) + "\n",
        "table": "\n".join(lines[tables[0] : tables[1]]) + "\n",
    }


def with_example(text: str) -> str:
    made = blocks()
    return BLOCK.sub(lambda m: m.group(1) + made[m.group(2)] + m.group(4), text)


def main() -> None:
    README.write_text(with_example(README.read_text()), encoding="utf-8")
    print(README)


if __name__ == "__main__":
    main()
