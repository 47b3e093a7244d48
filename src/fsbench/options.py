"""Every option of the measuring commands (`compare`, `run`) in one declarative table.

Each `Option` names its flag, default, help, the commands that take it, and the parser that
turns the text into a value or refuses it with one line (a UsageError: exit 2, nothing made).
`click_options(cmd)` builds the click options from the table and `parse(cmd, raw)` validates
them, so adding an option is one entry in OPTIONS (plus its use where the value is consumed).
Checks that relate two options live in CHECKS; checks that need the resolved workloads
(`--manifest`, `--clients`) stay with those workloads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from fsbench.errors import UsageError

Parser = Callable[[str, str], Any]  # (flag, text) -> value; raises UsageError


# -- parser factories: each message is one line that starts with the flag and the input --------
def integer(lo: int, hi: int) -> Parser:
    return _between(int, lo, hi, "a whole number", "", "INTEGER")


def number(lo: float, hi: float, unit: str) -> Parser:
    return _between(float, lo, hi, f"a number of {unit}", f" {unit}", unit.upper())


def _between(kind: type, lo: float, hi: float, noun: str, unit: str, metavar: str) -> Parser:
    show = str if kind is int else "{:g}".format  # 2**31 - 1 is no 2.14748e+09

    def parse(flag: str, text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise UsageError(f"{flag} {text!r}: not {noun}") from None
        if not lo <= v <= hi:  # also refuses nan
            raise UsageError(f"{flag} {text}: must be between {show(lo)} and {show(hi)}{unit}")
        return v

    parse.metavar = metavar  # type: ignore[attr-defined]
    return parse


def positive(kind: type, hi: int) -> Parser:
    """More than zero, at most `hi` (a sanity bound: no run is that big)."""

    def parse(flag: str, text: str) -> float:
        try:
            v = kind(text)
        except ValueError:
            raise UsageError(f"{flag} {text!r}: not a number") from None
        if not v > 0:  # also refuses nan
            raise UsageError(f"{flag} {text!r}: must be more than zero")
        if v > hi:
            raise UsageError(f"{flag} {v:g}: at most {hi}")
        return v

    parse.metavar = "INTEGER" if kind is int else "FLOAT"  # type: ignore[attr-defined]
    return parse


def counts(lo: int, hi: int | None, example: str) -> Parser:
    """A comma list of distinct whole numbers, e.g. `1,4`."""

    def parse(flag: str, text: str) -> list[int]:
        try:
            ns = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"{flag} {text!r}: give whole numbers, e.g. {example}") from None
        bounded = all(lo <= n and (hi is None or n <= hi) for n in ns)
        if not ns or not bounded or len(set(ns)) != len(ns):
            span = f"between {lo} and {hi}" if hi is not None else f"of at least {lo}"
            raise UsageError(f"{flag} {text!r}: distinct counts {span}")
        return ns

    parse.metavar = "N,N,..."  # type: ignore[attr-defined]
    return parse


def size(at_least: int = 0, why: str = "") -> Parser:
    def parse(flag: str, text: str) -> int:
        from fsbench.lab.backing import parse_size

        n = parse_size(text)
        if n < at_least:
            raise UsageError(f"{flag} {text}: {why}")
        return n

    parse.metavar = "SIZE"  # type: ignore[attr-defined]
    return parse


def repeat(flag: str, text: str) -> tuple[int, bool]:
    """`--repeat N` or `--repeat auto` (adaptive: at least 3, until the CI is tight)."""
    if text.strip().lower() == "auto":
        return 3, True
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: not a whole number or 'auto'") from None
    if not 1 <= n <= 1000:
        raise UsageError(f"{flag} {n}: must be between 1 and 1000")
    return n, False


repeat.metavar = "N|auto"  # type: ignore[attr-defined]


def directory(flag: str, text: str) -> Path:
    p = Path(text)
    if not p.is_dir():
        raise UsageError(f"{flag} {text}: not a directory")
    return p.resolve()


def external(module: str, name: str) -> Parser:
    """A parser that lives with its subject (backing, placement, clients); imported on use so
    `fsbench --help` stays fast. It takes the text only and words its own one-line errors."""

    def parse(_flag: str, text: str) -> Any:
        return getattr(importlib.import_module(module), name)(text)

    return parse


def trace_probes(flag: str, text: str) -> tuple[str, ...]:
    from fsbench.choices import parse_choices
    from fsbench.probes.trace import PROBE_NAMES

    return tuple(parse_choices(flag, text, PROBE_NAMES, "probe", "fuse,sched"))


trace_probes.metavar = "PROBE,..."  # type: ignore[attr-defined]


# -- the table -----------------------------------------------------------------------------------
MEASURING = ("compare", "run")

# With --repeat auto (the default) and no --time-budget: extra rounds only while they are
# expected to end within this many seconds of the command's start; the first 3 rounds always
# run. The default 8 drivers' 3 rounds take ~270 s here (half of it dropping caches and
# remounting for cold samples), so 285 s left no sample for the comparisons still open after
# them (measured 2026-11-26: 3 samples everywhere, 4 of 14 open); 420 s gives the open ones
# about 3 more each. With the integrity checks and the report the run ends within 7.5 minutes.
DEFAULT_TIME_BUDGET_S = 420.0


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]  # ("--max-repeat",) or ("--verbose", "-v"); the first is the name
    help: str
    commands: tuple[str, ...] = MEASURING
    default: str | None = None  # as typed on the command line; parsed like user input
    parse: Parser | None = None  # None: the text (or flag, or path) is used as given
    flag: bool = False
    path: bool = False  # a click.Path, handed over as a pathlib.Path
    required: bool = False
    metavar: str | None = None  # what `--help` shows for the value (click's default: TEXT)
    dest: str = ""  # the keyword the command receives; default: the name without dashes
    bad: tuple[str, ...] = ()  # inputs it must refuse (exit 2, one line): the table's own test

    @property
    def name(self) -> str:
        return self.flags[0]

    @property
    def key(self) -> str:
        return self.dest or self.name.lstrip("-").replace("-", "_")

    def parse_text(self, text: str) -> Any:
        """The value for `text` as typed after this option; a UsageError if refused."""
        return self.parse(self.name, text) if self.parse else text

    @property
    def value_name(self) -> str:
        """What `--help` and docs/commands.md show for the value: the option's own metavar, its
        parser's (INTEGER, FLOAT, SIZE, ...), PATH for a path, TEXT otherwise."""
        if self.flag:
            return ""
        return self.metavar or getattr(self.parse, "metavar", "PATH" if self.path else "TEXT")

    def click(self) -> Callable[[Any], Any]:
        kw: dict[str, Any] = {"help": self.help}
        if self.flag:
            kw["is_flag"] = True
        else:
            if self.default is not None:  # click counts an explicit None as a value given
                kw["default"] = self.default
                kw["show_default"] = True
            kw["required"] = self.required
            kw["metavar"] = self.value_name
            if self.path:
                kw["type"] = click.Path(path_type=Path)
        return click.option(*self.flags, self.key, **kw)


OPTIONS: list[Option] = [
    # compare only: where the subjects live and how they are set up
    Option(("--backing",), "ram | file:DIR | device:/dev/X | dir:PATH", ("compare",), "ram",
           external("fsbench.lab.backing", "parse_backing"), metavar="KIND[:PATH]",
           bad=("nope", "file:/nonexistent")),
    Option(("--size",), "Image size, e.g. 512M, 1G, 4G.", ("compare",), "1G", size(),
           bad=("12X", "0", "-1G")),
    Option(("--read-only",), "Benchmark an existing volume (--backing device:PATH) without "
           "changing a byte.", ("compare",), flag=True),
    Option(("--no-tune",), "Leave free page reporting on during the run (it makes RAM-bound "
           "samples erratic).", ("compare",), flag=True),
    Option(("--destroy-data",), "Allow formatting a --backing device that holds a file system "
           "or partition table.", ("compare",), flag=True),
    Option(("--kernel",), "Run the lab in a VM with this kernel (debian-6.12, "
           "path:BZIMAGE[,MODULES]); a subject may name its own: ntfs3@debian-6.12, ext4@host.",
           ("compare",), metavar="NAME"),
    Option(("--vm-memory",), "The VM's memory, e.g. 2G (default: sized).", ("compare",),
           parse=size(256 * 1024**2, "a guest needs at least 256M"), bad=("100M", "lots")),
    Option(("--vm-cpus",), "The VM's CPUs (default: sized).", ("compare",),
           parse=integer(1, 64), metavar="INTEGER", bad=("0", "65", "two")),
    Option(("--vm-timeout",), "Give up on a VM after S seconds.", ("compare",),
           parse=positive(float, 10**7), metavar="S", bad=("0", "-5", "soon")),
    Option(("--age",), "Aging profiles of the images, a comma list: none (fresh), light, heavy; "
           "each subject once per profile, on a cached aged image identical for every driver "
           "of a format (docs/aging.md).", ("compare",),
           parse=external("fsbench.aging.recipe", "parse_ages"), metavar="PROFILE,...",
           bad=("old", "none,none", "")),
    Option(("--age-seed",), "The aging workload's seed (same seed, same aged layout).",
           ("compare",), default="1", parse=integer(0, 2**31 - 1), metavar="INTEGER",
           bad=("-1", "x")),
    Option(("--no-integrity",), "Skip the integrity check after the workloads (read-only "
           "fsck, kernel log, digests).", ("compare",), flag=True),
    # run only: an existing directory, optionally driven from several fio clients
    Option(("--target",), "An existing directory to measure (nothing is formatted or "
           "mounted).", ("run",), parse=directory, required=True, metavar="PATH",
           bad=("/nonexistent", "/etc/hostname")),
    Option(("--clients",), "HOST[:PORT],... running `fio --server`, with --target mounted at "
           "the same path on each: fio workloads run from all of them at once.", ("run",),
           parse=external("fsbench.dimensions.clients", "parse_clients"),
           metavar="HOST[:PORT],...",
           bad=(",", "a:b:c", "host:0")),
    Option(("--clients-sweep",), "With --clients: client counts, e.g. 1,2,4 (the first N "
           "clients); each its own result.", ("run",), parse=counts(1, None, "1,2,4"),
           bad=("0", "1,1", "x")),
    # both measuring commands: what runs, how often, where results go
    Option(("--verbose", "-v"), "Every subject's notes under each table.", flag=True),
    Option(("--json",), "Print results.json to stdout.", flag=True, dest="as_json"),
    Option(("--db",), "SQLite results store (default $XDG_DATA_HOME/fsbench/results.db).",
           path=True),
    Option(("--out",), "Directory for results.json (default: under the data directory).",
           path=True),
    Option(("--time-budget",), "With --repeat auto: start no extra round that would end more "
           f"than S s after the command started (default {DEFAULT_TIME_BUDGET_S:g}; the first 3 "
           "rounds always run).",
           parse=positive(float, 10**7), metavar="S", bad=("0", "-1", "1e9", "x")),
    Option(("--max-repeat",), "With --repeat auto: at most this many samples.", default="10",
           parse=positive(int, 10**7), bad=("0", "1.5", "100000000")),
    Option(("--equivalence",), "The ≈ band in percent: a ratio whose interval lies within "
           "±PCT % of 1 is marked the same (docs/verdicts.md: below ~5 % a 2-CPU machine rarely "
           "resolves it in minutes).", default="2", parse=number(0.1, 50, "percent"),
           metavar="PCT", bad=("0", "51", "x")),
    Option(("--placement",), "Where the app and the FUSE daemon run, a comma list: free "
           "(default: nothing pinned), same (one CPU), split (two CPUs); each placement is its "
           "own result.", parse=external("fsbench.dimensions.placement", "parse_placements"),
           metavar="PLACEMENT,...", bad=("nowhere", "same,same", "", "free,")),
    Option(("--repeat",), "Samples per subject and workload (≥ 1), or 'auto' (the default): at "
           "least 3, then more only for subjects in a comparison still open (with the baseline or "
           "the fastest), as many as their spread plans, up to --max-repeat or --time-budget.",
           default="auto", parse=repeat, bad=("0", "1001", "abc")),
    Option(("--numjobs",), "Concurrent fio jobs, e.g. 1,4: each fio workload per count.",
           parse=counts(1, 256, "1,4"), bad=("0", "257", "1,1", "x")),
    Option(("--scale",), "Multiply macro workloads' default amounts (file counts, tree sizes), "
           "e.g. 0.2.", default="1", parse=positive(float, 100), bad=("0", "-1", "101", "x")),
    Option(("--manifest",), "With tree-hash: write an `xxhsum -H2` manifest of the hashed tree "
           "to FILE.", path=True),
    Option(("--min-sample-time",), "Seconds a sample lasts at least (runs are repeated until "
           "it does); matrix cells do one pass of their work.", default="1",
           parse=number(0, 600, "seconds"), bad=("-1", "601", "x")),
    Option(("--warmup",), "Discarded runs before each subject's first sample of a workload (0 "
           "for none).", default="1", parse=integer(0, 100), bad=("-1", "101", "one")),
    Option(("--suite",), "A named suite (see `fsbench list suites`).", metavar="NAME"),
    Option(("--workloads",), "Comma-separated workloads (see `fsbench list workloads`); "
           "fio:JOBFILE[:cache=cold] runs your own fio job file (docs/your-workloads.md).",
           metavar="W1,W2,..."),
    # the user's own command as a workload (workloads/command.py), hyperfine's vocabulary
    Option(("--command",), "Your own command as a workload: run by /bin/sh in each subject's "
           "mount, timed (wall time; CPU of its process tree); alone unless --workloads names "
           "more.", metavar="CMD"),
    Option(("--prepare",), "With --command: run before every run of it (untimed).",
           metavar="CMD"),
    Option(("--setup",), "With --command: run once per subject, after --input is copied.",
           metavar="CMD"),
    Option(("--cleanup",), "With --command: run once per subject after its last sample.",
           metavar="CMD"),
    Option(("--input",), "With --command: a directory copied onto every subject first, into "
           "the command's working directory (<mount>/fsbench/<its name>).", path=True),
    Option(("--timeout",), "Stop any of your commands or fio job files after S seconds (its "
           "process group killed); that subject's sample fails (default 3600).",
           parse=positive(float, 10**7), metavar="S", bad=("0", "-1", "x")),
    Option(("--as-user",), "With --command: run your commands as USER (the lab runs as root).",
           metavar="USER"),
    Option(("--trace-probes",), "The kernel trace probes to run, a comma list of fuse, "
           "readahead, block, writeback, sched, libfuse (default: all; they run only in the "
           "untimed traced warm-up run, so none costs a sample anything).", parse=trace_probes,
           bad=("fuse,dtrace", ",")),
    Option(("--no-trace",), "Leave the kernel trace probes (bpftrace) off; they are on when "
           "root and available.", flag=True),
    Option(("--dry-run",), "Print the plan (subjects, workloads, rounds, budget, images and their "
           "sizes, VMs, what is skipped and why) and exit: nothing is formatted, mounted or "
           "measured; with --json, as JSON.", flag=True),
]  # fmt: skip


def _check_max_repeat(v: dict[str, Any]) -> None:
    n, adaptive = v["repeat"]
    if adaptive and v["max_repeat"] < n:
        raise UsageError(f"--max-repeat {v['max_repeat']}: must be at least {n} with --repeat auto")


def _check_read_only(v: dict[str, Any]) -> None:
    if v.get("read_only") and v.get("destroy_data"):
        raise UsageError("--read-only and --destroy-data contradict each other; give one")


def _check_command(v: dict[str, Any]) -> None:
    if v.get("command") is not None:
        return
    for key in ("prepare", "setup", "cleanup", "input", "as_user"):
        if v.get(key) is not None:
            raise UsageError(f"--{key.replace('_', '-')} goes with --command; give --command too")


# Checks across options, run in order after every option parsed on its own.
CHECKS: list[Callable[[dict[str, Any]], None]] = [
    _check_max_repeat,
    _check_read_only,
    _check_command,
]


def option(name: str) -> Option:
    return next(o for o in OPTIONS if name in o.flags)


def options_for(command: str) -> list[Option]:
    return [o for o in OPTIONS if command in o.commands]


def click_options(command: str) -> Callable[[Any], Any]:
    """Decorator: the table's options for `command`, in table order on `--help`."""

    def deco(f: Any) -> Any:
        for o in reversed(options_for(command)):
            f = o.click()(f)
        return f

    return deco


def parse(command: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The command's option values, parsed and checked; the first bad one raises UsageError.
    Options the table does not parse (flags, paths, names) come back as given."""
    out: dict[str, Any] = {}
    for o in options_for(command):
        text = raw.get(o.key)
        out[o.key] = o.parse(o.name, str(text)) if o.parse and text is not None else text
    for check in CHECKS:
        check(out)
    return out
