"""Rewrite docs/results.schema.json, the JSON Schema of results.json, from the pydantic records
that write it (fsbench.records.schema). tests/unit/test_results_schema.py fails when the file
differs from what this writes.

    uv run python scripts/results_schema.py
"""

from __future__ import annotations

from pathlib import Path

from fsbench.cli.commands.docs import results_schema_text

PATH = Path(__file__).resolve().parents[1] / "docs" / "results.schema.json"


def main() -> None:
    PATH.write_text(results_schema_text(), encoding="utf-8")
    print(PATH)


if __name__ == "__main__":
    main()
