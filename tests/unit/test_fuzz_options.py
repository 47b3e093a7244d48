"""Every option of every command, drawn from the commands themselves (the measuring ones from
fsbench.cli.options' table), alone, twice, and in each pair the table declares (a need left out, a
conflict given): never a traceback, only documented exit codes, a refusal is one line naming the
option, and a pair the table says cannot go together is never run in silence.

In-process with measuring replaced by a recorder: nothing is formatted, mounted or measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import pytest

from fsbench.cli import app as cli
from fsbench.cli import options

if TYPE_CHECKING:
    from conftest import Sandbox  # tests/unit/conftest.py

# Measuring is a recorder here, so nothing fails (1), lacks (3) or is damaged (4): an
# option is accepted (0) or refused (2).
EXIT_CODES = (0, 2)

# judge's samples: two subjects a few percent apart, so every option has a table to act on.
SAMPLES = "run,workload,subject,value\n" + "".join(
    f"r,seq-write,{s},{v}\n" for s, vs in (("a", (100, 102, 98)), ("b", (101, 99, 103))) for v in vs
)
# What each judge option, given the value _value draws, must exit with; any other: 0.
JUDGE_REFUSED = {
    "--baseline": "fsbench: --baseline 'target': no such subject in the samples",
    "--fail-on": "fsbench: --fail-on 'target': give worse",
}


@pytest.fixture
def fuzzed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    monkeypatch.setattr("fsbench.cli.vm_options.plan", lambda *_a: None)  # no kernel fetched
    (sandbox.path / "samples.csv").write_text(SAMPLES)
    return sandbox


# The least each command needs to reach its options (measuring ones on a directory).
BASE = {
    "compare": ["compare", "--backing", "dir:target"],
    "run": ["run", "--target", "target"],
    "list": ["list", "drivers"],
    "show": ["show", "--list"],
    "report": ["report", "nosuchrun"],
    "diff": ["diff", "nosuchrun", "other"],
    "export": ["export", "nosuchrun"],
    "hash": ["hash", "target"],
    "verify": ["verify", "nosuch.xxh128"],
    "judge": ["judge", "samples.csv"],
    "tune": ["tune", "ext4"],
}
SKIP = {"doctor"}  # reads the whole machine (its own tests)


def _value(cmd: str, p: click.Option) -> str:
    """A value the option takes: the table's example or default, else by its type."""
    o = next((o for o in options.OPTIONS if o.key == p.name and cmd in o.commands), None)
    if o is not None:
        value = o.example or o.default
        assert value is not None, f"{cmd} {o.name}: the table gives no example nor default"
        return value
    if isinstance(p.type, click.Choice):
        return str(p.type.choices[0])
    if p.default not in (None, ()) and not callable(p.default):
        return str(p.default)
    # A number's range type (click.FloatRange: "float range") takes the plain type's value.
    kind = p.type.name.upper().removesuffix(" RANGE")
    return {"INTEGER": "2", "FLOAT": "1.5"}.get(kind, "target")


def _cases() -> list[tuple[str, click.Option]]:
    return [
        (name, p)
        for name, c in sorted(cli.cli.commands.items())
        if name not in SKIP
        for p in c.params
        if isinstance(p, click.Option) and not p.hidden and p.name not in ("help",)
    ]


def _args(cmd: str, p: click.Option) -> list[str]:
    return [p.opts[0]] if p.is_flag else [p.opts[0], _value(cmd, p)]


def _base(cmd: str, p: click.Option) -> list[str]:
    base = BASE.get(cmd, [cmd])
    if p.opts[0] in base:  # the base gives it: drop the base's
        i = base.index(p.opts[0])
        base = base[:i] + base[i + 2 :]
    return base


def _sound(argv: list[str], code: int, err: str) -> None:
    assert "Traceback" not in err, (argv, err)
    assert code in EXIT_CODES, (argv, code, err)
    if code == 2:
        assert err.count("\n") == 1 or err.lstrip().startswith("Usage:"), (argv, err)


def test_every_option_alone_and_twice(fuzzed: Sandbox) -> None:
    for cmd, p in _cases():
        argv = [*_base(cmd, p), *_args(cmd, p)]
        code, _out, err = fuzzed.fsbench(argv)
        _sound(argv, code, err)
        if cmd == "judge":
            refused = JUDGE_REFUSED.get(p.opts[0])
            assert code == (2 if refused else 0), (argv, code, err)
            assert err == (f"{refused}\n" if refused else ""), (argv, err)
        o = next((o for o in options.OPTIONS if o.key == p.name and cmd in o.commands), None)
        if o is not None and code == 2:
            # Alone, a table option is refused only for what it needs or where it does not
            # apply, in a line that names it.
            assert err.startswith(f"fsbench: {o.name} "), (argv, err)
            assert " needs " in err or "does not apply" in err, (argv, err)
        if not p.is_flag and not p.multiple:
            twice = [*argv, *_args(cmd, p)]
            code, _out, err = fuzzed.fsbench(twice)
            assert code == 2 and f"{p.opts[0]} given 2 times" in err, (twice, err)


def test_every_declared_pair_is_refused_naming_both(fuzzed: Sandbox) -> None:
    for cmd in options.MEASURING:
        table = {o.name: o for o in options.options_for(cmd)}
        for o in table.values():
            base = ["compare", "ext4"] if cmd == "compare" else BASE[cmd]
            for c in o.conflicts:
                other = table.get(c.words)
                if other is None:
                    continue
                argv = [*base, *_flag_args(o), *_flag_args(other)]
                code, _out, err = fuzzed.fsbench(argv)
                _sound(argv, code, err)
                assert code == 2 and o.name in err and other.name in err, (argv, err)
            for need in o.needs:
                argv = [*base, *_flag_args(o), *_unmeet(need)]
                code, _out, err = fuzzed.fsbench(argv)
                _sound(argv, code, err)
                assert code == 2 and f"{o.name} needs {need.words}" in err, (argv, err)


def _flag_args(o: options.Option) -> list[str]:
    return [o.name] if o.flag else [o.name, o.example or o.default or ""]


def _unmeet(need: options.When) -> list[str]:
    """Arguments under which `need` does not hold (none: it does not by default)."""
    return {"--repeat auto": ["--repeat", "3"], options.TRACED.words: ["--warmup", "0"]}.get(
        need.words, []
    )
