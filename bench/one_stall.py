"""One subject's stalls: what judging a cell's slowest sample wherever it stands buys, against
judging only its newest (the rule until 2026-12-05), on the real runner.

Two subjects at the spreads this machine shows (a kernel file system's samples ~4 % apart, a
FUSE driver's ~10 %), each sample stalled to a third with chance P (one subject at a time,
as lowntfs-3g's 148 MiB/s among ~420 in run 20261205-071044), true ratio 1.5x and 1x (A/A),
adaptive within 5-12 rounds. Per rule: the share of runs that decided (▼ at 1.5x; nothing is
to decide at 1x), the share marked wrongly (▲ at 1.5x; ▲ or ▼ at 1x), the interval's median
and 90th-percentile width (hi/lo), and the share wider than 2x. Simulated
(tests/unit/simulate_verdicts.py), the same seed for both rules.

    uv run python bench/one_stall.py [--runs 600] [--seed 11]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from simulate_verdicts import Design, make_runner

from fsbench.schedule import stalled
from fsbench.stats import decide

Rule = Callable[[list[float], bool], "int | None"]


def newest_only(samples: list[float], higher_is_better: bool) -> int | None:
    """The reference: the newest sample against the earlier ones, as fsbench judged until
    2026-12-05 (same thresholds)."""
    if len(samples) <= stalled.SLOW_MIN or min(samples) <= 0:
        return None
    logs = np.log(np.asarray(samples, dtype=float))
    before = logs[:-1]
    dev = float(np.median(before)) - float(logs[-1])
    dev = dev if higher_is_better else -dev
    limit = max(stalled.SLOW_LOG, stalled.SLOW_SD * float(before.std(ddof=1)))
    return len(samples) - 1 if dev > limit else None


def measure(rule: Rule, ratio: float, p: float, runs: int, seed: int) -> dict[str, float]:
    stalled.slow_sample = rule  # the runner reads it through the module at every look
    rng = np.random.default_rng(seed)
    d = Design("one stall", k=2, spreads=(0.04, 0.10), kinds=("kernel", "fuse"),
               effects=(1.0, 1.0 / ratio), rounds=(5, 12), max_repeat=10, stall=p,
               stall_factor=1 / 3)  # fmt: skip
    want = "below" if ratio > 1 else "same"
    wrong_marks = ("above",) if ratio > 1 else ("above", "below")
    decided = wrong = 0
    widths = []
    for _ in range(runs):
        run = make_runner(d, rng).execute()
        v = decide.printed(run.results, ["s0", "s1"])["w0"].looks["rate"].against("s0", "s1")
        if v is None or v.interval is None:
            continue
        decided += v.mark == want
        wrong += v.mark in wrong_marks
        widths.append(v.interval[1] / v.interval[0])
    w = np.asarray(widths)
    return {
        "decided": decided / runs,
        "wrong": wrong / runs,
        "median": float(np.median(w)),
        "p90": float(np.quantile(w, 0.9)),
        "wide": float((w > 2.0).mean()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    rules: dict[str, Rule] = {"newest only": newest_only, "slowest": stalled.slow_sample}
    for ratio in (1.5, 1.0):
        for p in (0.03, 0.08):
            got = {
                name: measure(rule, ratio, p, args.runs, args.seed) for name, rule in rules.items()
            }
            for name, m in got.items():
                print(
                    f"{ratio:g}x, {p:.0%} of samples stalled, {name:>11}: decided "
                    f"{m['decided']:6.1%}, wrong {m['wrong']:5.2%}, width median "
                    f"{m['median']:.2f} p90 {m['p90']:.2f}, wider than 2x {m['wide']:5.1%}",
                    flush=True,
                )
            ref, new = got["newest only"], got["slowest"]
            print(f"  wider than 2x: {new['wide'] / max(ref['wide'], 1e-9):.2f} of the reference's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
