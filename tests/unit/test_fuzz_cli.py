"""Random argument lists against the command line: never a traceback, only documented exit
codes, nothing created when the input is refused.

Runs in-process (fast) with the measuring step replaced by a recorder: validation is real, but
a valid `compare` does not start a benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsbench.cli import app as cli
from fsbench.cli import options

if TYPE_CHECKING:
    from conftest import Sandbox  # tests/unit/conftest.py

# Every command and every option of every command, from the commands themselves (the
# measuring ones from fsbench.cli.options' table): a new option is fuzzed without anyone listing it.
COMMANDS = [*sorted(cli.cli.commands), "bogus", ""]
OPTIONS = sorted(
    {
        flag
        for cmd in cli.cli.commands.values()
        for p in cmd.params
        if isinstance(p, click.Option)
        for flag in p.opts
    }
    | {"--help", "-h"}
)
# Each table option's refused inputs and example are values too.
TABLE_VALUES = sorted({v for o in options.OPTIONS for v in (*o.bad, o.example or "")})
VALUES = [
    "ext4",
    "ntfs-3g:big_writes",
    "ext4:ro",
    "zfs",
    "ext4:a b",
    "1G",
    "0",
    "-1",
    "1.5T",
    "12X",
    "auto",
    "abc",
    "3",
    "1000000",
    "ram",
    "file:/nonexistent",
    "device:/dev/null",
    "dir:/nonexistent",
    "seq-write",
    "nope",
    "iozone-quick",
    "drivers",
    "workloads",
    "1,4",
    "0,0",
    "",
    ":",
    "ext4:",
    "\x00",
    "é",
    "--",
    "csv",
]

token = st.one_of(
    st.sampled_from(OPTIONS),
    st.sampled_from(VALUES),
    st.sampled_from(TABLE_VALUES),
    st.text(min_size=0, max_size=12),
)
argv_strategy = st.tuples(st.sampled_from(COMMANDS), st.lists(token, max_size=6)).map(
    lambda t: ([t[0]] if t[0] else []) + t[1]
)


@pytest.fixture
def quiet(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    """The sandbox with doctor cheap and harmless: exercised by its own tests."""
    monkeypatch.setattr(
        "fsbench.environment.doctor",
        lambda: {
            "drivers": [],
            "formats": [],
            "tools": [],
            "root": True,
            "fuse": True,
            "loop": True,
            "kernel": "x",
        },
    )
    return sandbox


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argv=argv_strategy)
def test_random_arguments_never_crash(quiet: Sandbox, argv: list[str]) -> None:
    if any("\x00" in a for a in argv):
        argv = [a.replace("\x00", "") for a in argv]  # the OS cannot pass NUL in argv
    before = quiet.files()
    code, _out, text = quiet.fsbench(argv)
    assert "Traceback" not in text, (argv, text)
    assert code in (0, 1, 2, 3, 4), (argv, code, text)
    if code == 2:
        assert text.strip(), (argv, "a refusal must say why")
        assert quiet.files() == before, (argv, quiet.files() - before)


@pytest.mark.parametrize(
    ("extra", "adaptive", "repeat", "budget"),
    [
        ([], True, 3, options.DEFAULT_TIME_BUDGET_S),  # conclusive by default, within a budget
        (["--time-budget", "30"], True, 3, 30.0),
        (["--repeat", "5"], False, 5, None),  # a fixed count stays a fixed count
    ],
)
def test_measuring_is_adaptive_by_default_with_a_stated_budget(
    sandbox: Sandbox,
    extra: list[str],
    adaptive: bool,
    repeat: int,
    budget: float | None,
) -> None:
    """`run` shares compare's measuring options and needs no devices."""
    code, _out, err = sandbox.fsbench(["run", "--target", "target", *extra])
    assert code == 0, err
    (plan,) = sandbox.plans
    assert (plan.adaptive, plan.repeat, plan.time_budget_s) == (adaptive, repeat, budget)
