"""Docs that cannot go stale: docs/commands.md's reference is what scripts/commands_doc.py
generates from the commands (a test fails when it differs), it names every long option of
every subcommand, `--help` shows defaults, value types and an example, and `show` prints a
stored run as `compare` did, `--verbose` and the results path included."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
from click.testing import CliRunner

from fsbench.cli.app import cli
from fsbench.cli.commands.docs import EXAMPLES, reference, with_reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "commands.md"
FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"


def test_commands_md_is_what_the_script_writes() -> None:
    page = PAGE.read_text()
    assert with_reference(page, cli) == page, (
        "docs/commands.md differs from the commands: run `uv run python scripts/commands_doc.py`"
    )


def test_commands_md_names_every_long_option_of_every_subcommand() -> None:
    page = PAGE.read_text()
    for name, cmd in cli.commands.items():
        assert f"### `fsbench {name}`" in page, name
        section = page.split(f"### `fsbench {name}`", 1)[1].split("### ", 1)[0]
        for p in cmd.params:
            for flag in (f for f in p.opts if isinstance(p, click.Option) and f.startswith("--")):
                assert f"`{flag}`" in section, (name, flag)
    # The ones an earlier hand-written page missed.
    for flag in ("--age", "--age-seed", "--force", "--output", "--relative", "--threads"):
        assert f"`{flag}`" in page, flag


def test_the_reference_changes_with_the_options() -> None:
    before = reference(cli)
    cmd = cli.commands["diff"]
    extra = click.Option(["--brand-new"], help="A new option.")
    cmd.params.append(extra)
    try:
        assert "`--brand-new`" in reference(cli) != before
    finally:
        cmd.params.remove(extra)


def test_every_subcommand_has_one_example_in_its_help() -> None:
    runner = CliRunner()
    assert set(EXAMPLES) == set(cli.commands)
    for name in cli.commands:
        out = runner.invoke(cli, [name, "--help"]).output
        assert f"Example:\n    {EXAMPLES[name]}" in out, (name, out[-300:])


def test_compare_help_shows_defaults_and_types() -> None:
    out = CliRunner().invoke(cli, ["compare", "--help"]).output
    cmd = cli.commands["compare"]
    ctx = click.Context(cmd)
    help_of = {p.opts[0]: p.get_help_record(ctx) for p in cmd.params if isinstance(p, click.Option)}
    for flag, value, default in (
        ("--size", "SIZE", "1G"),
        ("--backing", "KIND[:PATH]", "ram"),
        ("--max-repeat", "INTEGER", "10"),
        ("--repeat", "N|auto", "auto"),
        ("--warmup", "INTEGER", "1"),
    ):
        record = help_of[flag]
        assert record is not None and record[0] == f"{flag} {value}", record
        assert record[1].endswith(f"[default: {default}]"), record
        assert f"{flag} {value}" in out
    assert not re.search(r"--(size|max-repeat|warmup|scale|time-budget|vm-cpus) TEXT", out)
    assert "all but sched" not in out


def test_show_verbose_and_paths(tmp_path: Path) -> None:
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    shutil.copy(FIXTURE, out_dir / "results.json")
    runner = CliRunner()
    db = ["--db", str(tmp_path / "results.db")]
    plain = runner.invoke(cli, ["show", str(out_dir), *db], terminal_width=100)
    assert plain.exit_code == 0, plain.output
    assert f"results: {out_dir}/results.json" in plain.output.replace("\n", "")
    assert "--verbose" in plain.output  # it tells where the per-subject notes are ...
    verbose = runner.invoke(cli, ["show", str(out_dir), "--verbose", *db], terminal_width=100)
    assert verbose.exit_code == 0, verbose.output  # ... and that flag works
    assert "· ext4: CV is" in verbose.output and "· ext4: CV is" not in plain.output
