"""What the explanation is made of: a result's `Profile` (its probe figures per unit of work),
the `Factor` records it ranks, and the input every factor function gets (`FactorInput`). In the
records layer so the probe records (`records/probes/`) and the report
(`report/model/explain.py`) both build on them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsbench.records.probes.numbers import fmt_pct
from fsbench.records.schema import Environment, Quirk, Result, Run

# Figures closer than this ratio to the baseline's (or to the other run's) are not a difference.
SAME_WITHIN = 1.1
PART_WORDS = {"app": "app", "driver": "daemon", "kernel_threads": "kernel threads"}
# (key, label, value, how to print it: "count", "bytes", "us", "s", "n"): a figure `diff` sets
# against the same figure of another run.
Figure = tuple[str, str, float, str]


class FigureSource(Protocol):
    """What a Profile asks of a probe record (`record.Probe`) for `diff`."""

    @property
    def name(self) -> str: ...

    @property
    def figures(self) -> Callable[[Any, str], list[Figure]]: ...


@dataclass
class OpFigures:
    """FUSE requests of one opcode, or block requests of one direction, per unit of work."""

    count: float
    size_hist: dict[int, float]  # bucket (lower bound, bytes) -> requests per unit of work
    mean_size: float | None
    p50_us: float | None
    p99_us: float | None
    seconds: float | None  # total latency per unit of work
    mean_us: float | None  # per request
    latency_hist: dict[int, float] = field(default_factory=dict)  # µs bucket -> per unit


@dataclass
class Profile:
    """What was measured about one result, per unit of work (`per`)."""

    result: Result
    per: str  # "GiB" or "1000 ops"
    amount: float  # units of work the samples moved
    seconds: float | None  # wall seconds per unit
    kind: str  # subject kind: fuse, kernel, ...
    driver: str
    quirks: list[Quirk] = field(default_factory=list)  # the driver's, as the subject records
    transport: str | None = None  # the FUSE transport (dev-fuse, uring, passthrough)
    unavailable: list[str] = field(default_factory=list)
    # Each probe's figures by its name, as its record's `read` made them (absent: not measured).
    measured: dict[str, Any] = field(default_factory=dict)
    probes: tuple[FigureSource, ...] = ()  # the records `measured` was read with
    cpu: dict[str, float] | None = None  # seconds per unit by part
    ctx: float | None = None  # context switches per GiB
    ctx_machine: bool = False  # ctx is the whole machine's (older runs), not app + daemon
    amplification: dict[str, float] = field(default_factory=dict)

    def figures(self) -> list[Figure]:
        """(key, label, value, how to print it) of every figure, for `diff`."""
        out: list[Figure] = []
        for p in self.probes:
            if self.measured.get(p.name) is not None:
                out += p.figures(self.measured[p.name], self.per)
        for part, v in sorted((self.cpu or {}).items()):
            label = f"CPU {PART_WORDS.get(part, part)} per {self.per}"
            out.append((f"cpu.{part}", label, v, "s"))
        if self.ctx is not None:
            # Different keys: diff never sets a machine figure against a subject's.
            if self.ctx_machine:
                out.append(("ctx.machine", "machine context switches per GiB", self.ctx, "count"))
            else:
                out.append(("ctx", "context switches per GiB (app + daemon)", self.ctx, "count"))
        return out


@dataclass
class Factor:
    """One measured reason, with its number; what every renderer shows."""

    name: str  # "fuse WRITE", "readahead", "block write", "writeback", "wake-ups", "cpu", ...
    figure: float
    unit: str  # "requests/GiB", "bytes", "s/GiB", ...
    sentence: str
    brief: str  # the same, shorter, for the terminal
    baseline: float | None = None  # the baseline subject's figure, when it has one
    seconds: float | None = None  # seconds per unit of work this factor stands for
    share: float | None = None  # seconds / the traced run's seconds per unit of work
    accounts: float | None = None  # share of the difference to the baseline it accounts for
    weight: float = 0.0  # rank: larger first
    # A comparison's verdict when the factor is one ("better", "worse", "same", "open"; None:
    # not a verdict, or too few samples to judge): the table reads it, not the sentence.
    outcome: str | None = None


@dataclass(frozen=True)
class FactorInput:
    """What a factor function is given: the result's profile and its baseline's (None when the
    result is the baseline or they count work in different units), the run, the gap in seconds
    per unit to the baseline (None within noise), and a profile reader for other results."""

    result: Result
    prof: Profile
    base: Profile | None
    base_name: str
    run: Run
    gap: float | None
    profile_of: Callable[[Result], Profile]

    @property
    def env(self) -> Environment:
        return self.run.environment


def time_factor(
    name: str,
    figure: float,
    unit: str,
    sentence: str,
    brief: str,
    seconds: float | None,
    base_seconds: float | None,
    prof: Profile,
    gap: float | None,
    baseline: float | None = None,
) -> Factor:
    """A factor that stands for time, ranked by the share of the gap (or the run) it takes."""
    share = seconds / prof.seconds if seconds is not None and prof.seconds else None
    accounts = None
    if gap is not None and seconds is not None and base_seconds is not None:
        accounts = (seconds - base_seconds) / gap
    # Time that explains the gap first, then time that fills the sample; a few per cent of
    # either ranks below the factors without a time (a 220× in context switches says more).
    if accounts is not None:
        weight = 10 + abs(accounts) if abs(accounts) >= 0.05 else abs(accounts)
    else:
        weight = 5 + (share or 0.0) if (share or 0.0) >= 0.05 else share or 0.0
    return Factor(name, figure, unit, sentence, brief, baseline, seconds, share, accounts, weight)


def ratio_weight(a: float | None, b: float | None) -> float:
    if a is None or b is None or a <= 0 or b <= 0:
        return 1.0 if (a or 0) != (b or 0) else 0.0
    return abs(math.log(a / b))


def differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return True  # nothing to compare with: the figure stands on its own
    if a <= 0 or b <= 0:
        return a != b
    return max(a, b) / min(a, b) >= SAME_WITHIN


def share_text(seconds: float | None, prof: Profile) -> str:
    if seconds is None or not prof.seconds:
        return ""
    share = seconds / prof.seconds
    if share > 1.05:
        return f" ({fmt_pct(share)} of the traced run: they overlap)"
    return f", {fmt_pct(share)} of the traced run"
