"""Every option of the measuring commands (`compare`, `run`) in one declarative table.

Each `Option` names its flag, default, help, the commands that take it, and the parser that
turns the text into a value or refuses it with one line (a UsageError: exit 2, nothing made).
`click_options(cmd)` builds the click options from the table and `parse(cmd, raw)` validates
them, so adding an option is one entry in OPTIONS (plus its use where the value is consumed).
Where each option applies is in its record too: the commands that take it, what the VM stage
does with it (`guest`: passed to the guest as typed, used by the host only, or refused with the
reason), what it needs (`needs`: another option, `--repeat auto`, a traced warm-up) and what it
cannot go with (`conflicts`). A need unmet or a conflict is one line and exit 2, before anything
is made; a valued option given twice is refused the same way (`Once`). Checks that need the
resolved workloads (`--numjobs`, `--manifest`, `--clients`) stay with those workloads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from fsbench.errors import UsageError

MiB = 1024 * 1024

Parser = Callable[[str, str], Any]  # (flag, text) -> value; raises UsageError

# The results store, as every verb that reads or writes it takes it (compare's own is OPTIONS').
DB_HELP = "SQLite results store (default $XDG_DATA_HOME/fsbench/results.db)."
db_option = click.option("--db", default=None, type=click.Path(path_type=Path), help=DB_HELP)


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
    from fsbench.probes.trace import PROBE_NAMES
    from fsbench.records.choices import parse_choices

    return tuple(parse_choices(flag, text, PROBE_NAMES, "probe", "fuse,sched"))


trace_probes.metavar = "PROBE,..."  # type: ignore[attr-defined]


# -- the table -----------------------------------------------------------------------------------
MEASURING = ("compare", "run")
GUEST_IMAGES = "the guest formats its own images in its RAM"
GUEST_AGE = "aged images are made and kept on the host, which a guest sees read-only"

# With --repeat auto (the default) and no --time-budget: extra rounds only while they are
# expected to end within this many seconds of the command's start; the first 3 rounds always
# run. 210 s keeps README command 1, a fresh machine's set-up included, within 5 minutes
# (docs/internals.md#measurements).
DEFAULT_TIME_BUDGET_S = 210.0


# -- where an option applies: conditions its record names -------------------------------------
@dataclass(frozen=True)
class When:
    """A condition on the parsed options (`v`, with `v["given"]` the keys typed), in words."""

    words: str  # how a refusal names it: "--age", "--repeat auto"
    holds: Callable[[dict[str, Any]], bool]


def given(flag: str) -> When:
    key = flag.lstrip("-").replace("-", "_")
    return When(flag, lambda v: key in v["given"])


REPEAT_AUTO = When("--repeat auto", lambda v: v["repeat"][1])
TRACED = When("a traced warm-up run (--warmup 1 or more)", lambda v: v["warmup"] > 0)
A_VM = When(
    "--kernel NAME or a subject@KERNEL",
    lambda v: v.get("kernel") is not None or any("@" in s for s in v.get("subjects", ())),
)
# What the user's own command or job file is: `--timeout` stops these, and nothing else.
OWN_WORK = When(
    "--command or a fio:JOBFILE workload",
    lambda v: v.get("command") is not None or "fio:" in (v.get("workloads") or ""),
)

# KDiskMark's tests among the workloads: what --diskmark-size and --diskmark-runtime set.
DISKMARK = When(
    "a KDiskMark test (--suite diskmark or diskmark-mix, or --workloads diskmark...)",
    lambda v: "diskmark" in f"{v.get('suite') or ''},{v.get('workloads') or ''}",
)

# `guest`: what the VM stage (compare --kernel) does with an option.
PASS = "pass"  # handed to the guest's `fsbench compare` as typed
HOST = "host"  # the host's business (where results go, the VM itself); the guest needs none
# Any other text is why a guest cannot honour it: refused with that reason.


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
    example: str | None = None  # a value it takes (the fuzz test's, without a default)
    guest: str = PASS  # compare --kernel: PASS, HOST, or why the guest cannot honour it
    needs: tuple[When, ...] = ()  # given, each must hold; else refused ("X needs Y")
    conflicts: tuple[When, ...] = ()  # given, none may hold; else refused ("X and Y conflict")

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
        kw: dict[str, Any] = {"help": self.help, "cls": Typed}
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


class Once(click.Option):
    """A valued option given at most once: the parser collects every occurrence, and a second
    one is refused with one line (click's own parser keeps the last, in silence)."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        if self.multiple or self.is_flag or self.count:
            super().add_to_parser(parser, ctx)
            return
        parser.add_option(obj=self, opts=self.opts, dest=self.name, action="append", nargs=1)

    def consume_value(self, ctx: click.Context, opts: Any) -> tuple[Any, Any]:
        value, source = super().consume_value(ctx, opts)
        if isinstance(value, list) and not self.multiple and not self.is_flag:
            if len(value) > 1:
                shown = ", ".join(repr(x) for x in value)
                raise UsageError(f"{self.opts[0]} given {len(value)} times ({shown}); give it once")
            value = value[0]
        return value, source


class Typed(Once):
    """A table option: the command receives None for one not typed (`parse` applies the
    default), so `needs` and `conflicts` judge only what the user typed; --help still shows the
    default."""

    def consume_value(self, ctx: click.Context, opts: Any) -> tuple[Any, Any]:
        value, source = super().consume_value(ctx, opts)
        if source == click.core.ParameterSource.DEFAULT and not self.is_flag and not self.required:
            return None, source
        return value, source


def refuse_repeats(group: click.Group) -> None:
    """Every valued, single option of every command becomes a `Once` (the hand-written ones of
    show, diff, export, hash, ... as well as the table's): repeating one is an error."""
    for cmd in group.commands.values():
        for p in cmd.params:
            if isinstance(p, click.Option) and type(p) is click.Option:
                p.__class__ = Once


OPTIONS: list[Option] = [
    # compare only: where the subjects live and how they are set up
    Option(("--backing",), "ram | file:DIR | device:/dev/X | dir:PATH", ("compare",), "ram",
           external("fsbench.lab.backing", "parse_backing"), metavar="KIND[:PATH]",
           bad=("nope", "file:/nonexistent"), guest=HOST),
    Option(("--size",), "Image size, e.g. 512M, 1G, 4G.", ("compare",), "1G", size(),
           bad=("12X", "0", "-1G")),
    Option(("--read-only",), "Benchmark an existing volume (--backing device:PATH) without "
           "changing a byte.", ("compare",), flag=True, guest=GUEST_IMAGES,
           conflicts=(given("--destroy-data"),)),
    Option(("--no-tune",), "Leave free page reporting on during the run (it makes RAM-bound "
           "samples erratic).", ("compare",), flag=True),
    Option(("--destroy-data",), "Allow formatting a --backing device that holds a file system "
           "or partition table.", ("compare",), flag=True, guest=GUEST_IMAGES),
    Option(("--kernel",), "Run the lab in a VM with this kernel (debian-6.12: ntfs3, exfat, "
           "vfat; debian-sid: the new ntfs; path:BZIMAGE[,MODULES]); a subject may name its own: "
           "ntfs3@debian-6.12, ntfs@debian-sid, ext4@host.", ("compare",), metavar="NAME",
           guest=HOST, example="debian-6.12"),
    Option(("--vm-memory",), "The VM's memory, e.g. 2G (default: sized).", ("compare",),
           parse=size(256 * 1024**2, "a guest needs at least 256M"), bad=("100M", "lots"),
           guest=HOST, needs=(A_VM,), example="2G"),
    Option(("--vm-cpus",), "The VM's CPUs (default: sized).", ("compare",),
           parse=integer(1, 64), metavar="INTEGER", bad=("0", "65", "two"), guest=HOST,
           needs=(A_VM,), example="2"),
    Option(("--vm-timeout",), "Give up on a VM after S seconds.", ("compare",),
           parse=positive(float, 10**7), metavar="S", bad=("0", "-5", "soon"), guest=HOST,
           needs=(A_VM,), example="600"),
    Option(("--age",), "Aging profiles of the images, a comma list: none (fresh), light, heavy; "
           "each subject once per profile, on a cached aged image identical for every driver "
           "of a format (docs/aging.md).", ("compare",),
           parse=external("fsbench.aging.recipe", "parse_ages"), metavar="PROFILE,...",
           bad=("old", "none,none", ""), guest=GUEST_AGE, example="light"),
    Option(("--age-seed",), "The aging workload's seed (same seed, same aged layout).",
           ("compare",), default="1", parse=integer(0, 2**31 - 1), metavar="INTEGER",
           bad=("-1", "x"), guest=GUEST_AGE, needs=(given("--age"),)),
    Option(("--no-integrity",), "Skip the integrity check after the workloads (read-only "
           "fsck, kernel log, digests).", ("compare",), flag=True),
    # run only: an existing directory, optionally driven from several fio clients
    Option(("--target",), "An existing directory to measure (nothing is formatted or "
           "mounted).", ("run",), parse=directory, required=True, metavar="PATH",
           bad=("/nonexistent", "/etc/hostname"), example="target"),
    Option(("--clients",), "HOST[:PORT],... running `fio --server`, with --target mounted at "
           "the same path on each: fio workloads run from all of them at once.", ("run",),
           parse=external("fsbench.schedule.dimensions.clients", "parse_clients"),
           metavar="HOST[:PORT],...",
           bad=(",", "a:b:c", "host:0"), guest=HOST, example="localhost"),
    Option(("--clients-sweep",), "With --clients: client counts, e.g. 1,2,4 (the first N "
           "clients); each its own result.", ("run",), parse=counts(1, None, "1,2,4"),
           bad=("0", "1,1", "x"), guest=HOST, needs=(given("--clients"),), example="1,2"),
    # both measuring commands: what runs, how often, where results go
    Option(("--verbose", "-v"), "Every subject's notes under each table.", flag=True,
           guest=HOST),
    Option(("--json",), "Print results.json to stdout.", flag=True, dest="as_json",
           guest=HOST),
    Option(("--db",), DB_HELP,
           path=True, guest=HOST, example="results.db"),
    Option(("--out",), "Directory for results.json (default: under the data directory).",
           path=True, guest=HOST, example="out"),
    Option(("--time-budget",), "With --repeat auto: start no extra round that would end more "
           f"than S s after the command started (default {DEFAULT_TIME_BUDGET_S:g}; the first 3 "
           "rounds always run).",
           parse=positive(float, 10**7), metavar="S", bad=("0", "-1", "1e9", "x"),
           needs=(REPEAT_AUTO,), example="60"),
    Option(("--max-repeat",), "With --repeat auto: at most this many samples.", default="10",
           parse=positive(int, 10**7), bad=("0", "1.5", "100000000"), needs=(REPEAT_AUTO,)),
    Option(("--equivalence",), "The ≈ band in percent: a ratio whose interval lies within "
           "±PCT % of 1 is marked the same (docs/verdicts.md: below ~5 % a 2-CPU machine rarely "
           "resolves it in minutes).", default="2", parse=number(0.1, 50, "percent"),
           metavar="PCT", bad=("0", "51", "x")),
    Option(("--placement",), "Where the app and the FUSE daemon run, a comma list: same (one "
           "CPU; the default, said in the run's notes), free (nothing pinned: the scheduler "
           "decides, and samples it splits in two are named), split (two CPUs); each placement "
           "asked for is its own result.",
           parse=external("fsbench.schedule.dimensions.placement", "parse_placements"),
           metavar="PLACEMENT,...", bad=("nowhere", "same,same", "", "free,"), example="split"),
    Option(("--repeat",), "Samples per subject and workload (≥ 1), or 'auto' (the default): at "
           "least 3, then more only for subjects in a comparison still open (with the baseline or "
           "the fastest), as many as their spread plans, up to --max-repeat or --time-budget.",
           default="auto", parse=repeat, bad=("0", "1001", "abc")),
    Option(("--numjobs",), "Concurrent fio jobs, e.g. 1,4: each fio workload per count.",
           parse=counts(1, 256, "1,4"), bad=("0", "257", "1,1", "x"), example="1,4"),
    Option(("--scale",), "Multiply macro workloads' default amounts (file counts, tree sizes, "
           "web-serve's bytes and seconds), e.g. 0.2.", default="1",
           parse=positive(float, 100), bad=("0", "-1", "101", "x")),
    Option(("--manifest",), "With tree-hash: write an `xxhsum -H2` manifest of the hashed tree "
           "to FILE.", path=True,
           guest="the guest sees the host's files read-only", example="tree.xxh128"),
    Option(("--min-sample-time",), "Seconds a sample lasts at least (runs are repeated until "
           "it does); matrix cells do one pass of their work.", default="1",
           parse=number(0, 600, "seconds"), bad=("-1", "601", "x")),
    Option(("--warmup",), "Discarded runs before each subject's first sample of a workload (0 "
           "for none).", default="1", parse=integer(0, 100), bad=("-1", "101", "one")),
    Option(("--suite",), "A named suite (see `fsbench list suites`).", metavar="NAME",
           conflicts=(given("--workloads"),), example="micro"),
    Option(("--workloads",), "Comma-separated workloads (see `fsbench list workloads`); "
           "fio:JOBFILE[:cache=cold] runs your own fio job file (docs/your-workloads.md).",
           metavar="W1,W2,...", example="seq-write"),
    # the user's own command as a workload (workloads/command.py), hyperfine's vocabulary
    Option(("--command",), "Your own command as a workload: run by /bin/sh in each subject's "
           "mount, timed (wall time; CPU of its process tree); alone unless --workloads names "
           "more.", metavar="CMD", example="true"),
    Option(("--prepare",), "With --command: run before every run of it (untimed).",
           metavar="CMD", needs=(given("--command"),), example="true"),
    Option(("--setup",), "With --command: run once per subject, after --input is copied.",
           metavar="CMD", needs=(given("--command"),), example="true"),
    Option(("--cleanup",), "With --command: run once per subject after its last sample.",
           metavar="CMD", needs=(given("--command"),), example="true"),
    Option(("--input",), "With --command: a directory copied onto every subject first, into "
           "the command's working directory (<mount>/fsbench/<its name>).", path=True,
           needs=(given("--command"),), example="target"),
    Option(("--timeout",), "Stop any of your commands or fio job files after S seconds (its "
           "process group killed); that subject's sample fails (default 3600).",
           parse=positive(float, 10**7), metavar="S", bad=("0", "-1", "x"), needs=(OWN_WORK,),
           example="60"),
    Option(("--as-user",), "With --command: run your commands as USER (the lab runs as root).",
           metavar="USER", needs=(given("--command"),), example="nobody"),
    Option(("--trace-probes",), "The kernel trace probes to run, a comma list of fuse, "
           "readahead, block, writeback, sched, libfuse (default: all; they run only in the "
           "untimed traced warm-up run, so none costs a sample anything).", parse=trace_probes,
           bad=("fuse,dtrace", ","), needs=(TRACED,), conflicts=(given("--no-trace"),),
           example="fuse"),
    Option(("--no-trace",), "Leave the kernel trace probes (bpftrace) off; they are on when "
           "root and available.", flag=True),
    Option(("--diskmark-size",), "KDiskMark's test size (its report's \"Test: 1 GiB\"): the "
           "file its tests read and write, e.g. 1G (default: the subject's share of the image, "
           "409 MiB at --size 1G).", parse=size(MiB, "at least 1M"), bad=("0", "12X"),
           needs=(DISKMARK,), example="256M"),
    Option(("--diskmark-runtime",), "KDiskMark's measuring time (its report's \"Measure: 5 "
           "sec\"): a pass's length in seconds (default 5).", parse=integer(1, 600),
           metavar="S", bad=("0", "601", "x"), needs=(DISKMARK,), example="2"),
    Option(("--dry-run",), "Print the plan (subjects, workloads, rounds, budget, images and their "
           "sizes, VMs, what is skipped and why) and exit with the code the run would (3: "
           "this machine would refuse it, naming the kernel that has a driver it lacks): "
           "nothing is formatted, mounted or measured; with --json, as JSON.", flag=True,
           guest=HOST),
]  # fmt: skip


def _check_max_repeat(v: dict[str, Any]) -> None:
    n, adaptive = v["repeat"]
    if adaptive and v["max_repeat"] < n:
        raise UsageError(f"--max-repeat {v['max_repeat']}: must be at least {n} with --repeat auto")


def _check_where(command: str, v: dict[str, Any]) -> None:
    """Each option typed: its needs met, none of its conflicts, and (compare --backing dir:)
    none of the lab's own options, which a directory measured as it is cannot honour."""
    for o in options_for(command):
        if o.key not in v["given"]:
            continue
        for need in o.needs:
            if not need.holds(v):
                raise UsageError(f"{o.name} needs {need.words}; give it too, or drop {o.name}")
        for c in o.conflicts:
            if c.holds(v):
                raise UsageError(f"{o.name} and {c.words} cannot go together; give one")
        b = v.get("backing")
        if b is not None and b.kind == "dir" and "run" not in o.commands and o.name != "--backing":
            raise UsageError(
                f"{o.name} does not apply to --backing dir:PATH (a directory is measured as it "
                "is, nothing formatted or mounted); drop it"
            )


# Checks across options, run in order after every option parsed on its own.
CHECKS: list[Callable[[dict[str, Any]], None]] = [_check_max_repeat]


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


def parse(command: str, raw: dict[str, Any], subjects: tuple[str, ...] = ()) -> dict[str, Any]:
    """The command's option values, parsed and checked; the first bad one raises UsageError.
    An option not typed takes its default; `given` names the ones typed (what `needs` and
    `conflicts` judge). Options the table does not parse (flags, paths, names) come back as
    given."""
    typed = {o.key for o in options_for(command) if raw.get(o.key) not in (None, False)}
    out: dict[str, Any] = {"given": frozenset(typed), "subjects": tuple(subjects)}
    for o in options_for(command):
        text = raw.get(o.key)
        if text is None or text is False:
            text = o.default if not o.flag else bool(text)
        out[o.key] = o.parse(o.name, str(text)) if o.parse and text is not None else text
    for check in CHECKS:
        check(out)
    _check_where(command, out)
    return out
