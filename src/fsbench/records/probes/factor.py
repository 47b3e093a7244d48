"""What the explanation is made of: a result's `Profile` (its probe figures per unit of work),
the `Factor` records it ranks, and the input every factor function gets (`FactorInput`). In the
records layer so the probe records (`records/probes/`) and the report (`report/explain.py`) both
build on them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsbench.records.probes.numbers import (
    as_dict,
    dominant,
    fmt_count,
    fmt_pct,
    histogram,
    number,
    size_phrase,
)
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


def read_ops(part: dict[str, Any], amount: float) -> dict[str, OpFigures]:
    """A trace part shaped {requests, bytes, size_hist, latency_us, latency_hist_us} by opcode
    or direction (FUSE, block) as figures per unit of work."""
    out = {}
    for op, n in as_dict(part.get("requests")).items():
        count = number(n)
        if not count:
            continue
        nbytes = number(as_dict(part.get("bytes")).get(op))
        lat = as_dict(as_dict(part.get("latency_us")).get(op))
        total = number(lat.get("total"))
        out[op] = OpFigures(
            count=count / amount,
            size_hist={
                k: v / amount for k, v in histogram(as_dict(part.get("size_hist")).get(op)).items()
            },
            mean_size=nbytes / count if nbytes else None,
            p50_us=number(lat.get("p50")),
            p99_us=number(lat.get("p99")),
            seconds=total / 1e6 / amount if total is not None else None,
            mean_us=total / count if total is not None else None,
            latency_hist={
                k: v / amount
                for k, v in histogram(as_dict(part.get("latency_hist_us")).get(op)).items()
            },
        )
    return out


def op_figures(
    ops: dict[str, OpFigures], per: str, key: str, noun: str, latency: tuple[str, str]
) -> list[Figure]:
    """What `diff` compares of read_ops' figures: each opcode's or direction's requests per
    unit, its request size and its latency (`latency`: the OpFigures field and its words,
    e.g. ("p50_us", "latency p50")), keyed `KEY.OP.count|size|<words' last>`."""
    field_, words = latency
    out: list[Figure] = []
    for op, f in sorted(ops.items()):
        out.append((f"{key}.{op}.count", f"{noun} {op} requests per {per}", f.count, "count"))
        d = dominant(f.size_hist)
        size = f.mean_size or (d[0] if d else None)
        if size:
            out.append((f"{key}.{op}.size", f"{noun} {op} request size", size, "bytes"))
        lat = getattr(f, field_)
        if lat is not None:
            out.append((f"{key}.{op}.{words.split()[-1]}", f"{noun} {op} {words}", lat, "us"))
    return out


# -- the words and the test both op-shaped probes (FUSE opcodes, block directions) use ------------
def same_ops(f: OpFigures, base: OpFigures | None, latency: str) -> bool:
    """As many requests, as large and (`latency`: the OpFigures field) as slow as the
    baseline's: not what separates them. No baseline figures: not the same."""
    return base is not None and not any(
        differs(x, y)
        for x, y in (
            (f.count, base.count),
            (f.mean_size, base.mean_size),
            (getattr(f, latency), getattr(base, latency)),
        )
        if x is not None and y is not None
    )


def with_size(text: str, brief: str, f: OpFigures) -> tuple[str, str, int | None]:
    """A factor's sentence and brief with the requests' size ("…, 128 KiB each", "… × 128
    KiB"), and the dominant size bucket (None: none dominates)."""
    size, dom = size_phrase(f.size_hist, f.mean_size)
    if size:
        text += f", {size}"
        brief += f" × {size.replace(' each', '')}"
    return text, brief, dom


def base_words(base: OpFigures, base_name: str) -> str:
    """The baseline's requests beside this subject's: " (ext4: 12, 128 KiB)"."""
    size, _ = size_phrase(base.size_hist, base.mean_size)
    return f" ({base_name}: {fmt_count(base.count)}" + (
        f", {size.replace(' each', '')})" if size else ")"
    )
