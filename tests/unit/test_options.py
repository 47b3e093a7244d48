"""The options table (fsbench.cli.options) drives both click and validation: every option of
`compare` and `run` is a table entry, refuses its declared bad inputs with one line and exit 2
(nothing created), and accepts its default."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from fsbench.cli import app as cli
from fsbench.cli import options
from fsbench.errors import UsageError

if TYPE_CHECKING:
    from conftest import Sandbox  # tests/unit/conftest.py


def _base(command: str) -> list[str]:
    # The least each command needs to get as far as its options: a target, or a dir: backing
    # (no subjects, no root; measuring is replaced by a recorder).
    return (
        ["run", "--target", "target"]
        if command == "run"
        else ["compare", "--backing", "dir:target"]
    )


CASES = [
    (cmd, o, bad)
    for cmd in options.MEASURING
    for o in options.options_for(cmd)
    for bad in o.bad
    if not (cmd == "compare" and o.name == "--backing")  # the base line gives its own
]
CASES += [("compare", options.option("--backing"), b) for b in options.option("--backing").bad]


def test_the_table_is_what_click_offers() -> None:
    for cmd in options.MEASURING:
        params = {p.name: p for p in cli.cli.commands[cmd].params if p.name != "subjects"}
        table = {o.key: o for o in options.options_for(cmd)}
        assert set(params) == set(table)
        for key, o in table.items():
            assert params[key].help == o.help
            assert list(params[key].opts) == list(o.flags)


def test_every_parsed_option_declares_inputs_it_refuses() -> None:
    missing = [o.name for o in options.OPTIONS if o.parse is not None and not o.bad]
    assert missing == []


def test_every_default_parses() -> None:
    for o in options.OPTIONS:
        if o.default is not None:
            assert o.parse_text(o.default) is not None, o.name


@pytest.mark.parametrize(
    ("command", "opt", "bad"), CASES, ids=[f"{c}{o.name}={b!r}" for c, o, b in CASES]
)
def test_option_refuses_bad_input_with_one_line_and_exit_2(
    sandbox: Sandbox, command: str, opt: options.Option, bad: str
) -> None:
    with pytest.raises(UsageError):
        opt.parse_text(bad)
    argv = _base(command)
    if opt.name == "--backing":
        argv = ["compare", "--backing", bad]
    elif opt.name == "--target":
        argv = ["run", "--target", bad]
    else:
        argv = [*argv, opt.name, bad]
    before = sandbox.files()
    code, _out, err = sandbox.fsbench(argv)
    assert code == 2, (argv, err)
    assert err.count("\n") == 1 and err.startswith("fsbench: "), err
    assert opt.name in err or repr(bad) in err or bad in err, err
    assert sandbox.files() == before


def test_all_defaults_are_accepted_end_to_end(sandbox: Sandbox) -> None:
    for command in options.MEASURING:
        argv = [*_base(command), "--out", str(sandbox.path / f"out-{command}")]
        code, _out, err = sandbox.fsbench(argv)
        assert code == 0, err


def test_defaults_parse_to_the_documented_values(sandbox: Sandbox) -> None:
    raw = {o.key: (False if o.flag else None) for o in options.options_for("compare")}
    v = options.parse("compare", raw)
    assert v["repeat"] == (3, True)
    assert (v["warmup"], v["scale"], v["min_sample_time"], v["max_repeat"]) == (1, 1.0, 1.0, 10)
    assert v["size"] == 1024**3 and v["backing"].kind == "ram"
    assert v["numjobs"] is None and v["placement"] is None and v["time_budget"] is None


def test_checks_across_options_run_after_each_option() -> None:
    raw = {o.key: (False if o.flag else None) for o in options.options_for("compare")}
    with pytest.raises(UsageError, match="--max-repeat 2: must be at least 3"):
        options.parse("compare", {**raw, "repeat": "auto", "max_repeat": "2"})
    with pytest.raises(UsageError, match="--read-only and --destroy-data cannot go together"):
        options.parse("compare", {**raw, "read_only": True, "destroy_data": True})


def test_parsers_keep_the_message_style() -> None:
    cases = {
        ("--warmup", "101"): "--warmup 101: must be between 0 and 100",
        ("--scale", "101"): "--scale 101: at most 100",
        ("--scale", "0"): "--scale '0': must be more than zero",
        ("--vm-cpus", "65"): "--vm-cpus 65: must be between 1 and 64",
        ("--vm-memory", "100M"): "--vm-memory 100M: a guest needs at least 256M",
        ("--numjobs", "1,1"): "--numjobs '1,1': distinct counts between 1 and 256",
        ("--min-sample-time", "nan"): "--min-sample-time nan: must be between 0 and 600 seconds",
    }
    for (name, text), says in cases.items():
        with pytest.raises(UsageError) as e:
            options.option(name).parse_text(text)
        assert str(e.value) == says


def test_environment_is_untouched_by_parsing(tmp_path: Path) -> None:
    # Parsing checks; it makes nothing (e.g. --out's directory is created only when running).
    before = set(tmp_path.rglob("*"))
    raw = {o.key: (False if o.flag else None) for o in options.options_for("compare")}
    options.parse("compare", {**raw, "out": tmp_path / "x"})
    assert set(tmp_path.rglob("*")) == before
