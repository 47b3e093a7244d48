"""Simulated runs of the verdict procedure through the runner's real schedule.

A `Design` is what a user can ask for: k subjects of some driver kinds, W workloads (cells
per subject), the minimum rounds, fixed (`--repeat N`) or adaptive within a budget of rounds,
and how the samples behave — each subject's spread (consistent across its workloads, so a
subject can be noisier than the rest), stalls (a sample halved), drift per round (the machine
slowing for everyone), quantized or constant values, a p99 column beside the rate. `run_once`
drives `fsbench.schedule.runner.Runner` itself (its rounds, interim look, planned samples and
budget, on a simulated clock) with a sampler that draws the values, then reads the printed verdicts
with `fsbench.stats.decide.printed`, exactly as the reports do. Used by tests/unit/test_decide.py
(small) and bench/verdict_designs.py (full size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fsbench.records.schema import Result, Run, Sample, Subject
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.stats import decide
from fsbench.stats.latency import LAT_TOTAL
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload

FIO_BUCKETS = 64  # fio's histogram: 64 buckets per power of two


@dataclass
class Design:
    name: str
    k: int = 2
    cells: int = 1
    spreads: Sequence[float] = (0.1,)  # per subject, cycled; log-scale sd
    kinds: Sequence[str] = ("kernel",)  # per subject, cycled
    n0: int = 3  # the minimum rounds (--repeat)
    rounds: tuple[int, int] = (3, 3)  # the budget, in rounds, drawn per run (lo, hi)
    adaptive: bool = True
    max_repeat: int = 10
    stall: float = 0.0  # chance a sample is stalled (slowed to stall_factor)
    stall_factor: float = 0.5
    drift: float = 0.0  # per round, for every subject alike (up to this, drawn per run)
    quantum: float = 0.0  # values rounded to this relative step (0: exact)
    constant: Sequence[int] = ()  # subjects whose samples are all one value
    latency: bool = False  # a p99 column (fio buckets) beside the rate
    effects: Sequence[float] = ()  # per subject true ratio (default 1: A/A)
    shape: float = 0.0  # Student-t noise of these degrees (heavy tails); 0: normal
    bimodal: float = 0.0  # each sample from one of two modes this ratio apart (0: one mode)
    round_sd: float = 0.0  # log sd of an effect shared by every subject of a round (load)
    # The chance a round stalls the machine for every subject of a cell alike in direction,
    # not in size: each subject's sample slowed by its own factor, exp(-U(0.1, 1.4)) (run
    # 20261127-110521: ext4 at 0.66x of its median, exfat-fuse at 0.26x, in one round).
    round_stall: float = 0.0
    linear: bool = False  # normal noise on the linear scale (spread = CV), not log-normal
    # A subject wandering on its own (AR(1) across its samples: rho, log sd): samples that
    # are not independent, which no interval from within one run can cover.
    wander: tuple[float, float] = (0.0, 0.0)
    # False: outside the promise, simulated to say so (a bimodal factor the run leaves free
    # defeats any interval from 3 samples: the lab controls it, docs/verdicts.md).
    promised: bool = True
    why: str = "the lab controls it"  # why a design is outside the promise

    def spread(self, i: int) -> float:
        return self.spreads[i % len(self.spreads)]

    def kind(self, i: int) -> str:
        return self.kinds[i % len(self.kinds)]

    def effect(self, i: int) -> float:
        return self.effects[i] if i < len(self.effects) else 1.0


def fio_bucket(v: float) -> float:
    """The value fio's latency histogram reports for v (its bucket's lower edge)."""
    if v < FIO_BUCKETS:
        return float(int(v))
    e = math.floor(math.log2(v))
    width = 2.0 ** (e - 6)
    return math.floor(v / width) * width


@dataclass
class _Sampler:
    """Stands in for fsbench.schedule.sampler.Sampler: each sample is a draw, each costs one
    second of the simulated clock."""

    design: Design
    rng: np.random.Generator
    drift: float
    clock: list[float]
    count: dict[tuple[str, str], int] = field(default_factory=dict)
    trace: Any = None
    rounds: dict[tuple[Any, ...], float] = field(default_factory=dict)
    walk: dict[tuple[int, int], float] = field(default_factory=dict)

    def warmups(self, wl: Any) -> int:
        return 0

    def untraced(self, res: Result, wl: Any) -> None:
        return None

    def unplace(self, m: Any = None) -> None:
        return None

    def _value(self, i: int, cell: int, rnd: int, centre: float) -> float:
        d = self.design
        if i in d.constant:
            return centre
        z = self.rng.standard_t(d.shape) / math.sqrt(d.shape / (d.shape - 2)) if d.shape else 0.0
        z = z or self.rng.normal()
        if d.linear:
            x = centre * max(0.05, 1.0 + d.spread(i) * z)
        else:
            x = centre * math.exp(d.spread(i) * z)
        if d.round_sd:
            # A subject's n-th sample is in the n-th round: the first rounds take every
            # subject, later ones every subject still sampling.
            if (cell, rnd) not in self.rounds:
                self.rounds[(cell, rnd)] = math.exp(d.round_sd * self.rng.normal())
            x *= self.rounds[(cell, rnd)]
        if d.round_stall:
            if (cell, rnd, "stall") not in self.rounds:
                self.rounds[(cell, rnd, "stall")] = float(self.rng.random() < d.round_stall)
            if self.rounds[(cell, rnd, "stall")]:
                x *= math.exp(-self.rng.uniform(0.1, 1.4))
        rho, sd = d.wander
        if sd:
            w = rho * self.walk.get((i, cell), 0.0) + math.sqrt(1 - rho * rho) * self.rng.normal()
            self.walk[(i, cell)] = w
            x *= math.exp(sd * w)
        if d.bimodal and self.rng.random() < 0.5:
            x *= d.bimodal  # the daemon on the other CPU: a second mode, for every subject
        x *= (1.0 + self.drift) ** rnd
        if self.rng.random() < d.stall:
            x *= d.stall_factor
        if d.quantum:
            step = math.log1p(d.quantum)
            x = math.exp(round(math.log(x) / step) * step)
        return x

    def iterations(self, rt: AlwaysMounted, wl: Any, res: Result) -> tuple[float, float | None]:
        i = int(rt.subject.id[1:])
        cell = int(wl.name[1:])
        rnd = self.count.get((rt.subject.id, wl.name), 0)
        self.count[(rt.subject.id, wl.name)] = rnd + 1
        if not res.params:
            res.params = {"rw": "randread", "block_size": "4k"} if self.design.latency else {}
        self.clock[0] += 1.0
        rate = self._value(i, cell, rnd, 100.0 * self.design.effect(i))
        p99 = None
        if self.design.latency:
            p99 = fio_bucket(self._value(i, cell, rnd, 90_000.0 / self.design.effect(i)))
        return rate, p99

    def sample(self, its: tuple[float, float | None], wl: Any) -> Sample:
        rate, p99 = its
        extra: dict[str, Any] = {}
        if p99 is not None:
            extra = {"lat_us": {"p50": p99 / 2e3, "p99": p99 / 1e3}, "lat_basis": LAT_TOTAL}
        return Sample(value=rate, seconds=1.0, extra=extra)


def run_once(design: Design, rng: np.random.Generator) -> dict[str, decide.Printed]:
    """One run of the design through the real Runner; the tables' printed comparisons."""
    run = make_runner(design, rng).execute()
    return decide.printed(run.results, [f"s{i}" for i in range(design.k)])


def make_runner(design: Design, rng: np.random.Generator) -> Runner:
    """The real Runner over the design's subjects and fake workloads, its sampler drawing
    the design's values on a simulated clock."""
    d = design
    subjects = [
        Subject(id=f"s{i}", driver=f"s{i}", fs="x", kind=d.kind(i))  # type: ignore[arg-type]
        for i in range(d.k)
    ]
    targets = [
        AlwaysMounted(subject=s, target=Target(s.id, "/nonexistent", "fake", 1 << 20))
        for s in subjects
    ]
    workloads = [FakeWorkload(name=f"w{j}") for j in range(d.cells)]
    rounds = int(rng.integers(d.rounds[0], d.rounds[1] + 1))
    clock = [0.0]
    runner = Runner(
        Run(run_id="sim", started="2026-11-27T00:00:00"),
        targets,
        workloads,  # type: ignore[arg-type]
        repeat=d.n0,
        adaptive=d.adaptive,
        max_repeat=max(d.max_repeat, d.n0),
        time_budget_s=rounds * d.k * d.cells + 0.5 if d.adaptive else None,
        now=lambda: clock[0],
    )
    drift = float(rng.uniform(-d.drift, d.drift)) if d.drift else 0.0
    runner._sampler = _Sampler(d, rng, drift, clock)  # type: ignore[assignment]
    return runner


@dataclass
class Rate:
    hits: int = 0
    trials: int = 0

    @property
    def p(self) -> float:
        return self.hits / self.trials if self.trials else 0.0

    def interval(self) -> tuple[float, float]:
        """The Monte-Carlo 95 % interval of the rate (Wilson)."""
        n, p, z = self.trials, self.p, 1.96
        if not n:
            return 0.0, 1.0
        c = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, c - h), min(1.0, c + h)

    def text(self) -> str:
        lo, hi = self.interval()
        return f"{self.hits}/{self.trials} = {self.p * 100:.2f} % ({lo * 100:.2f}–{hi * 100:.2f})"


def false_tables(design: Design, runs: int, seed: int = 1) -> Rate:
    """A/A (every effect 1): the share of tables with any false ▲/▼ in any printed column."""
    return more_false_tables(design, runs, np.random.default_rng(seed), Rate())


def more_false_tables(design: Design, runs: int, rng: np.random.Generator, out: Rate) -> Rate:
    """`out` with ``runs`` more A/A runs of the design counted (drawn from ``rng``)."""
    for _ in range(runs):
        for p in run_once(design, rng).values():
            out.trials += 1
            out.hits += any(v.mark in ("above", "below") for v in p.marks().values())
    return out


def within_promise(
    design: Design, runs: int, seed: int, promise: float = 0.05, rungs: int = 4
) -> Rate:
    """A/A tables until the Monte-Carlo 95 % interval of the false rate lies on one side of
    the promise: ``runs`` runs, then 4x, 16x, ... up to ``rungs`` sizes. A design near the
    line needs thousands of tables to show it is under it; most are shown in a few hundred."""
    rng, out, done = np.random.default_rng(seed), Rate(), 0
    for rung in range(rungs):
        more_false_tables(design, runs * 4**rung - done, rng, out)
        done = runs * 4**rung
        lo, hi = out.interval()
        if hi <= promise or lo > promise:
            break
    return out


def power(design: Design, runs: int, subject: str = "s1", seed: int = 2) -> Rate:
    """The share of tables where ``subject`` is marked against the baseline (its rate)."""
    rng = np.random.default_rng(seed)
    out = Rate()
    for _ in range(runs):
        for p in run_once(design, rng).values():
            v = p.looks["rate"].verdicts.get(("s0", subject))
            out.trials += 1
            out.hits += v is not None and v.mark in ("above", "below")
    return out


# The designs a user can ask for (issue 42), each an A/A: identical true means.
DESIGNS = [
    Design("3 subjects, n=3, spreads 3/3/12 %", k=3, spreads=(0.03, 0.03, 0.12), adaptive=False),
    Design("2 subjects, 2 cells, n=3, 3/12 %", k=2, cells=2, spreads=(0.03, 0.12), adaptive=False),
    Design(
        "adaptive 3-10 rounds, 2 subjects, 3/12 %",
        k=2,
        cells=2,
        spreads=(0.03, 0.12),
        rounds=(3, 10),
    ),
    Design("3 subjects, all 10 %, n=3", k=3, spreads=(0.1,), adaptive=False),
    Design(
        "8 subjects, 2 cells, 7 at 3 %, one at 24 %",
        k=8,
        cells=2,
        spreads=(0.03,) * 7 + (0.24,),
        rounds=(3, 8),
    ),
    Design(
        "12 subjects, n=2, spreads 3-30 %",
        k=12,
        spreads=tuple(np.geomspace(0.03, 0.3, 12)),
        n0=2,
        adaptive=False,
    ),
    Design("2 subjects, n=2, 3/30 %", k=2, spreads=(0.03, 0.3), n0=2, adaptive=False),
    Design(
        "4 subjects, 5 cells, one 10x noisier",
        k=4,
        cells=5,
        spreads=(0.02, 0.02, 0.02, 0.2),
        adaptive=False,
    ),
    Design(
        "6 subjects, 2 kinds, 2 cells, 5 % stalls",
        k=6,
        cells=2,
        spreads=(0.03, 0.2, 0.08, 0.25, 0.05, 0.12),
        kinds=("kernel", "fuse"),
        stall=0.05,
        rounds=(3, 10),
    ),
    Design("2 subjects, 20 cells, 3/12 %", k=2, cells=20, spreads=(0.03, 0.12), adaptive=False),
    Design("3 subjects, one constant", k=3, spreads=(0.05, 0.1), constant=(0,), adaptive=False),
    Design(
        "2 subjects, quantized 2 % steps", k=2, spreads=(0.01, 0.02), quantum=0.02, adaptive=False
    ),
    Design(
        "4 subjects, p99 column (fio buckets), 2 cells",
        k=4,
        cells=2,
        spreads=(0.02, 0.05),
        latency=True,
        rounds=(3, 6),
    ),
    Design(
        "5 subjects, drift 1 %/round, adaptive",
        k=5,
        cells=2,
        spreads=(0.03, 0.1),
        drift=0.01,
        rounds=(3, 10),
    ),
    Design(
        "2 subjects, 2 p99 constant, neighbouring buckets",
        k=2,
        spreads=(0.001,),
        latency=True,
        adaptive=False,
    ),
    Design(
        "12 subjects, 2 kinds, 20 cells, 2-20 %, adaptive",
        k=12,
        cells=20,
        spreads=tuple(np.geomspace(0.02, 0.2, 12)),
        kinds=("kernel", "fuse", "kernel"),
        rounds=(3, 6),
    ),
    Design(
        "4 subjects, heavy tails (t3), 3-12 %, adaptive",
        k=4,
        cells=2,
        spreads=(0.03, 0.12),
        shape=3.0,
        rounds=(3, 10),
    ),
    Design(
        "3 subjects, bimodal 1.3x (placement free), 3 %",
        k=3,
        cells=2,
        spreads=(0.03,),
        bimodal=1.3,
        rounds=(3, 10),
        promised=False,
    ),
    Design(
        "2 subjects, n=2 then adaptive, 5/15 %",
        k=2,
        cells=2,
        spreads=(0.05, 0.15),
        n0=2,
        rounds=(2, 10),
    ),
    Design(
        "4 subjects, round effects 10 % (a loaded machine), 3 %",
        k=4,
        spreads=(0.03,),
        round_sd=0.10,
        rounds=(3, 10),
    ),
    Design(
        "2 subjects, 3/12 %, round effects 20 %, 2 cells",
        k=2,
        cells=2,
        spreads=(0.03, 0.12),
        round_sd=0.20,
        rounds=(3, 10),
    ),
    Design("3 subjects, linear-normal CV 30 %", k=3, spreads=(0.3,), linear=True, rounds=(3, 10)),
    Design(
        "12 subjects, n=2 adaptive, 2 kinds, one 10x noisier each",
        k=12,
        cells=2,
        spreads=(0.02, 0.02, 0.02, 0.02, 0.02, 0.2),
        kinds=("kernel",) * 6 + ("fuse",) * 6,
        n0=2,
        rounds=(2, 10),
    ),
    Design(
        "3 subjects, each wandering on its own (AR .6, 5 %)",
        k=3,
        spreads=(0.02,),
        wander=(0.6, 0.05),
        rounds=(3, 10),
        promised=False,
        why="samples not independent: A/A across setups is the check",
    ),
    Design(
        "12 subjects, n=2, 1-10 %, p99 column, 2 cells",  # 9.3 % before ties had a floor
        k=12,
        cells=2,
        spreads=tuple(np.geomspace(0.01, 0.1, 12)),
        n0=2,
        adaptive=False,
        latency=True,
    ),
    Design(
        "8 subjects, 2 kinds, 2 cells, 10 % of rounds stalled unequally",
        k=8,
        cells=2,
        spreads=(0.04, 0.05, 0.05, 0.08, 0.15, 0.15, 0.12, 0.1),
        kinds=("kernel",) * 4 + ("fuse",) * 4,
        round_stall=0.10,
        rounds=(4, 8),
    ),
    Design(
        "4 subjects, 3 %, 20 % of rounds stalled unequally, fixed n=5",
        k=4,
        spreads=(0.03,),
        round_stall=0.20,
        n0=5,
        adaptive=False,
    ),
    Design(
        "5 subjects, 3-20 %, 10 % of rounds stalled, n=2 then adaptive",
        k=5,
        cells=2,
        spreads=(0.03, 0.2, 0.08, 0.12, 0.05),
        round_stall=0.10,
        n0=2,
        rounds=(2, 10),
    ),
    Design(
        "5 subjects, 10 % stalls, 2 kinds, fixed n=4",
        k=5,
        cells=3,
        spreads=(0.05, 0.1),
        kinds=("fuse", "kernel"),
        stall=0.10,
        n0=4,
        adaptive=False,
    ),
]

# Power the tests state: (design, the least share of tables where s1 is marked).
POWER = [
    (
        Design(
            "1.5x at CV 10 %, n=5, fixed",
            k=2,
            spreads=(0.1,),
            n0=5,
            adaptive=False,
            effects=(1.0, 1 / 1.5),
        ),
        0.80,
    ),
    (
        Design(
            "2x at CV 10 %, n=3, fixed", k=2, spreads=(0.1,), adaptive=False, effects=(1.0, 0.5)
        ),
        0.80,
    ),
    (
        Design(
            "1.5x at CV 10 %, 8 subjects, adaptive 3-10",
            k=8,
            spreads=(0.1,),
            rounds=(3, 10),
            effects=(1.0, 1 / 1.5, 1, 1, 1, 1, 1, 1),
        ),
        0.60,
    ),
]
