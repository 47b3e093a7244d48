"""Rewrite the generated part of docs/commands.md from the commands themselves (every command,
every option, its value, default and help; one example each). tests/unit/test_commands_doc.py
fails when the page differs from what this writes.

    uv run python scripts/commands_doc.py
"""

from __future__ import annotations

from pathlib import Path

from fsbench.cli.app import cli
from fsbench.cli.commands.docs import with_reference

PAGE = Path(__file__).resolve().parents[1] / "docs" / "commands.md"


def main() -> None:
    PAGE.write_text(with_reference(PAGE.read_text(), cli), encoding="utf-8")
    print(PAGE)


if __name__ == "__main__":
    main()
