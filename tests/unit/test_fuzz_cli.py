"""Random argument lists against the command line: never a traceback, only documented exit
codes, nothing created when the input is refused.

Runs in-process (fast) with the measuring step replaced by a recorder: validation is real, but
a valid `compare` does not start a benchmark.
"""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsbench import pipeline
from fsbench.cli import app as cli
from fsbench.cli import options
from fsbench.records.schema import Run

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


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)

    def no_measuring(plan: pipeline.Plan, **_kw: object) -> tuple[Run, int]:
        # Begun in the store as the real one does: tune finishes its last run there.
        from fsbench.records.store import Store

        run = Run(run_id=plan.run_id, started="now", status="complete")
        with Store(plan.db) as store:
            store.begin_run(run, plan.out_dir)
        return run, 0

    monkeypatch.setattr(pipeline, "execute", no_measuring)
    # Keep doctor and cleanup cheap and harmless: they are exercised by their own tests.
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
    monkeypatch.setattr("fsbench.lab.state.cleanup_all", lambda *_a: ([], []))
    return tmp_path


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argv=argv_strategy)
def test_random_arguments_never_crash(sandbox: Path, argv: list[str]) -> None:
    if any("\x00" in a for a in argv):
        argv = [a.replace("\x00", "") for a in argv]  # the OS cannot pass NUL in argv
    before = _files(sandbox)
    out, err = io.StringIO(), io.StringIO()
    old_argv = os.sys.argv
    os.sys.argv = ["fsbench", *argv]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                cli.main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        os.sys.argv = old_argv
    text = err.getvalue()
    assert "Traceback" not in text, (argv, text)
    assert code in (0, 1, 2, 3, 4), (argv, code, text)
    if code == 2:
        assert text.strip(), (argv, "a refusal must say why")
        assert _files(sandbox) == before, (argv, _files(sandbox) - before)


@pytest.mark.parametrize(
    ("extra", "adaptive", "repeat", "budget"),
    [
        ([], True, 3, options.DEFAULT_TIME_BUDGET_S),  # conclusive by default, within a budget
        (["--time-budget", "30"], True, 3, 30.0),
        (["--repeat", "5"], False, 5, None),  # a fixed count stays a fixed count
    ],
)
def test_measuring_is_adaptive_by_default_with_a_stated_budget(
    sandbox: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    adaptive: bool,
    repeat: int,
    budget: float | None,
) -> None:
    """`run` shares compare's measuring options and needs no devices."""
    plans: list[pipeline.Plan] = []

    def keep(plan: pipeline.Plan, **_kw: object) -> tuple[Run, int]:
        plans.append(plan)
        return Run(run_id=plan.run_id, started="now", status="complete"), 0

    monkeypatch.setattr(pipeline, "execute", keep)
    with pytest.raises(SystemExit) as exit_:
        cli.cli.main(["run", "--target", str(sandbox), *extra], standalone_mode=True)
    assert exit_.value.code == 0
    (plan,) = plans
    assert (plan.adaptive, plan.repeat, plan.time_budget_s) == (adaptive, repeat, budget)
