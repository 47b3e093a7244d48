"""How long fsbench takes to decide a real difference, against the least it could take.

For true ratios 1.2x, 1.5x, 3x and 15x between two subjects at the spreads this machine shows
(a kernel file system's samples ~4 % apart, a FUSE driver's ~10 %: the default comparison of
2026-12-04 on a fresh machine), the real runner (tests/unit/simulate_verdicts.py: its rounds,
interim look, plan and stopping rule on a simulated clock, one second a sample) runs until it
stops. Its time is the samples it took when it decided; the bound is the data the same
decision needs with the spreads known (a z interval at the same per-table confidence, one
look, equal samples a side, at least 2), so the ratio is what fsbench's caution costs.

    uv run python bench/decisive.py [--runs 400] [--seed 7]

A line per ratio ends in "N× the bound"; the issue asks for N <= 3.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from simulate_verdicts import Design, make_runner

from fsbench.stats import decide
from fsbench.stats.verdict import table_family

SPREADS = (0.04, 0.10)  # baseline (kernel), other (FUSE): log-scale sd
RATIOS = (1.2, 1.5, 3.0, 15.0)


def bound(ratio: float) -> int:
    """Samples a side the decision needs with the spreads known (z at the table's confidence)."""
    miss = table_family(2, looks=1).miss
    z = float(norm.ppf(1.0 - miss / 2.0))
    n = (z * math.hypot(*SPREADS) / abs(math.log(ratio))) ** 2
    return max(2, math.ceil(n))


def decide_time(ratio: float, runs: int, seed: int) -> tuple[float, float]:
    """(median samples a side when the runner stopped, share of runs that decided)."""
    rng = np.random.default_rng(seed)
    d = Design(f"{ratio}x", k=2, spreads=SPREADS, kinds=("kernel", "fuse"),
               effects=(1.0, 1.0 / ratio), rounds=(40, 40), max_repeat=40)  # fmt: skip
    took, decided = [], 0
    for _ in range(runs):
        run = make_runner(d, rng).execute()
        p = decide.printed(run.results, ["s0", "s1"])["w0"]
        v = p.looks["rate"].against("s0", "s1")
        decided += bool(v and v.mark == "below")
        took.append(max(len(r.samples) for r in run.results))
    return float(np.median(took)), decided / runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    worst = 0.0
    for r in RATIOS:
        n, share = decide_time(r, args.runs, args.seed)
        b = bound(r)
        worst = max(worst, n / b)
        print(
            f"{r:>5g}x at {SPREADS[0] * 100:.0f}/{SPREADS[1] * 100:.0f} %: fsbench {n:g} samples a "
            f"side (decided in {share * 100:.1f} % of {args.runs}), bound {b}: "
            f"{n / b:.2f}× the bound",
            flush=True,
        )
    return 0 if worst <= 3.0 else 1


if __name__ == "__main__":
    sys.exit(main())
