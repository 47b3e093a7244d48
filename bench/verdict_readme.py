"""README command 1, simulated through the real runner and verdict code: how often a table
keeps an interval wider than 5x, how often every comparison outside 0.67-1.5 is marked, and
the same design's A/A false-table rate; quiet, with 5 % of samples halved, and with 5 % of
rounds stalled. Each rate with its Monte-Carlo interval (docs/verdicts.md, "Samples where
they decide").

    uv run python bench/verdict_readme.py [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from simulate_verdicts import Design, Rate, false_tables, run_once

# README command 1's true ratios (ext4 first) and spreads, kernel drivers then FUSE daemons.
EFFECTS = (1.0, 0.95, 1.0, 0.5, 0.05, 0.04, 0.3, 0.6)
SPREADS = (0.04, 0.05, 0.05, 0.08, 0.15, 0.15, 0.12, 0.1)
KINDS = ("kernel",) * 4 + ("fuse",) * 4
CASES = (("quiet", {}), ("5 % of samples halved", {"stall": 0.05}),
         ("5 % of rounds stalled", {"round_stall": 0.05}))  # fmt: skip


def ab(design: Design, runs: int, seed: int = 3) -> tuple[Rate, Rate]:
    """(tables with an interval against the baseline wider than 5x, tables with every
    comparison whose true ratio is outside 0.67-1.5 marked)."""
    rng = np.random.default_rng(seed)
    wide, marked = Rate(), Rate()
    truth = {f"s{i}": design.effect(i) for i in range(design.k)}
    for _ in range(runs):
        for p in run_once(design, rng).values():
            vs = {s: v for (col, ref, s), v in p.marks().items() if col == "rate" and ref == "s0"}
            widths = [v.interval[1] / v.interval[0] for v in vs.values() if v.interval]
            wide.trials += 1
            wide.hits += any(w > 5 for w in widths)
            need = [v for s, v in vs.items() if not 0.67 < truth[s] < 1.5]
            marked.trials += 1
            marked.hits += all(v.mark in ("above", "below") for v in need)
    return wide, marked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="A/B runs per case (A/A: twice)")
    args = ap.parse_args()
    t0 = time.monotonic()
    for name, kw in CASES:
        common = dict(k=8, cells=2, spreads=SPREADS, kinds=KINDS, rounds=(5, 8), **kw)
        wide, marked = ab(Design(f"A/B {name}", effects=EFFECTS, **common), args.runs)
        aa = false_tables(Design(f"A/A {name}", **common), args.runs * 2)
        print(f"{name}: any interval > 5x {wide.text()}; every one outside 0.67-1.5 marked "
              f"{marked.text()}; false A/A tables {aa.text()}", flush=True)  # fmt: skip
    print(f"in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
