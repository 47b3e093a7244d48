"""docs/results.schema.json: the published JSON Schema of results.json is what the pydantic
records generate (scripts/results_schema.py), every stored run and a fresh one validate against
it, it refuses a document that is not a run, and the CSV and markdown exports name the schema
version their rows come from."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fsbench.cli.commands.docs import results_schema_text
from fsbench.records.schema import SCHEMA_VERSION, Run
from fsbench.report.exports.export import export

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "results.schema.json"
# Every stored run: a results.json-shaped fixture has a run_id at its top.
FIXTURES = sorted(
    p for p in (Path(__file__).parent / "fixtures").glob("*.json")
    if '"run_id"' in p.read_text()[:2000]
)  # fmt: skip


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # the file is itself a valid JSON Schema
    return cls(schema)


def test_the_published_schema_is_what_the_records_generate() -> None:
    assert SCHEMA.read_text() == results_schema_text(), (
        "docs/results.schema.json differs from fsbench.records.schema: run "
        "`uv run python scripts/results_schema.py`"
    )
    assert json.loads(SCHEMA.read_text())["x-fsbench-schema-version"] == SCHEMA_VERSION


def test_every_stored_run_validates() -> None:
    assert len(FIXTURES) >= 2
    v = _validator()
    for path in FIXTURES:
        errors = [e.message for e in v.iter_errors(json.loads(path.read_text()))]
        assert not errors, (path.name, errors[:3])


def test_a_fresh_run_validates(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.mkdir()
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "FSBENCH_FAKE_VALUES": f"{target}=100,101,99"}  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-m", "fsbench", "run", "--target", str(target), "--workloads", "fake",
         "--repeat", "3", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["results"][0]["samples"]
    errors = [e.message for e in _validator().iter_errors(doc)]
    assert not errors, errors[:3]


@pytest.mark.parametrize(
    ("path", "value"),
    [(("results", 0, "samples"), "fast"), (("subjects", 0, "status"), "fine"), (("run_id",), 7)],
)
def test_a_document_that_is_not_a_run_is_refused(path: tuple, value: object) -> None:
    doc = copy.deepcopy(json.loads(FIXTURES[0].read_text()))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert list(_validator().iter_errors(doc))


def test_csv_and_markdown_carry_the_schema_version() -> None:
    for path in FIXTURES:
        run = Run.model_validate_json(path.read_text())
        rows = list(csv.DictReader(io.StringIO(export(run, "csv"))))
        assert rows and {r["schema_version"] for r in rows} == {str(run.schema_version)}
        assert f"results.json schema {run.schema_version}" in export(run, "markdown")


def test_an_older_run_loaded_exports_as_migrated() -> None:
    """A schema 3 or 4 results.json, loaded (its verdicts decided on load), exports at the
    current schema and says what it was migrated from: never 'schema 4' beside schema 5's
    verdicts."""
    from fsbench.records.schema import SCHEMA_VERSION
    from fsbench.records.store import _read_results_json
    from fsbench.report.model.upgrade import upgrade

    for path in FIXTURES:
        old = json.loads(path.read_text())["schema_version"]
        if old == SCHEMA_VERSION:
            continue
        run = upgrade(_read_results_json(path))
        rows = list(csv.DictReader(io.StringIO(export(run, "csv"))))
        assert {r["schema_version"] for r in rows} == {str(SCHEMA_VERSION)}
        said = f"results.json schema {SCHEMA_VERSION} (migrated from {old})"
        assert said in export(run, "markdown")
        doc = json.loads(export(run, "json"))
        assert doc["schema_version"] == SCHEMA_VERSION and doc["migrated_from"] == old
        assert doc["verdicts"]
