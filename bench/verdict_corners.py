"""Corner designs of the verdict procedure, written before they were first run (2026-11-27)
and kept as they were: a check against designs nobody tuned on. docs/verdicts.md has the
rates; c1 failed at 8.6 % and is why a quantized side's variance has a floor. The h designs
were written the same way a session later (seed 17, 600 tables); h6 sits at the nominal 5 %
and led to the 2-subject n = 4-5 designs that moved Hsu's degrees to below 6 samples.

    uv run python bench/verdict_corners.py [--runs 400] [--only c1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from simulate_verdicts import Design, false_tables

# fmt: off
D = [
    Design("c1 12 subj, 20 cells, n=2 fixed, 1-10 %, 2 kinds, stalls 5 %, quantum 1 %, p99",
           k=12, cells=20, spreads=tuple(np.geomspace(0.01, 0.1, 12)), kinds=("kernel", "fuse"),
           n0=2, adaptive=False, stall=0.05, quantum=0.01, latency=True),
    Design("c2 2 subj, 20 cells, n=2 fixed, 1/10 %, p99", k=2, cells=20, spreads=(0.01, 0.1),
           n0=2, adaptive=False, latency=True),
    Design("c3 7 subj, n0=2 adaptive 2-10, one 10x noisier, stalls 5 %, drift 1 %", k=7, cells=2,
           spreads=(0.01,) * 6 + (0.1,), n0=2, rounds=(2, 10), stall=0.05, drift=0.01),
    Design("c4 3 subj, n=6 fixed, 1/1/10 %, t3 tails", k=3, spreads=(0.01, 0.01, 0.1), n0=6,
           adaptive=False, shape=3.0),
    Design("c5 5 subj, quantized 5 % steps, adaptive 3-10", k=5, spreads=(0.02, 0.06),
           quantum=0.05, rounds=(3, 10)),
    Design("c6 4 subj, 2 constant, p99, adaptive", k=4, cells=2, spreads=(0.03, 0.1),
           constant=(0, 2), latency=True, rounds=(3, 8)),
    Design("c7 2 subj, n=2, one constant, other 10 %", k=2, spreads=(0.1,), constant=(0,), n0=2,
           adaptive=False),
    Design("c8 10 subj, 5 cells, 1-10 %, round effects 5 %, drift 1 %, adaptive", k=10, cells=5,
           spreads=tuple(np.geomspace(0.01, 0.1, 10)), round_sd=0.05, drift=0.01, rounds=(3, 10)),
    Design("c9 2 subj, n=3 fixed, 1/10 %, 1 cell", k=2, spreads=(0.01, 0.1), adaptive=False),
    Design("c10 6 subj, 3 kinds-ish, linear CV 15 %, stalls 10 %, n0=2 adaptive", k=6, cells=3,
           spreads=(0.15,), linear=True, stall=0.10, n0=2, rounds=(2, 10),
           kinds=("kernel", "fuse", "kernel")),
]
H = [
    Design("h1 3 subj (2 kernel, 1 fuse 10x noisier), adaptive, 5 % rounds stalled", k=3,
           cells=2, spreads=(0.02, 0.02, 0.2), kinds=("kernel", "kernel", "fuse"),
           round_stall=0.05, rounds=(3, 10)),
    Design("h2 6 subj, n=2 fixed, 1-20 %, quantum 0.5 %, p99", k=6, cells=2,
           spreads=tuple(np.geomspace(0.01, 0.2, 6)), n0=2, adaptive=False, quantum=0.005,
           latency=True),
    Design("h3 4 subj, tiny budget (3-4 rounds), t3 tails, 5 % stalls", k=4, cells=2,
           spreads=(0.03, 0.1), shape=3.0, stall=0.05, rounds=(3, 4)),
    Design("h4 8 subj, 1 cell, linear CV 25 %, adaptive", k=8, spreads=(0.25,), linear=True,
           rounds=(3, 10)),
    Design("h5 5 subj, 15 % rounds stalled, drift 1 %, 2 cells", k=5, cells=2,
           spreads=(0.03, 0.08), round_stall=0.15, drift=0.01, rounds=(3, 10)),
    Design("h6 2 subj, n=4 fixed, 1/20 %", k=2, spreads=(0.01, 0.2), n0=4, adaptive=False),
    Design("h7 10 subj, 3 cells, n0=2 adaptive, one constant, 5 %, p99", k=10, cells=3,
           spreads=(0.05,), constant=(3,), n0=2, rounds=(2, 8), latency=True),
    Design("h8 4 subj, fixed n=3, 25 % rounds stalled, spreads 2-15 %", k=4,
           spreads=(0.02, 0.05, 0.1, 0.15), round_stall=0.25, adaptive=False),
]
# fmt: on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400, help="tables per design (about)")
    ap.add_argument("--only", default="", help="designs whose name contains this")
    args = ap.parse_args()
    for d in D:
        if args.only in d.name:
            r = false_tables(d, max(40, args.runs // d.cells), seed=15)
            print(f"{d.name:80s} {r.text()}", flush=True)
    for d in H:
        if args.only in d.name:
            r = false_tables(d, max(100, args.runs * 3 // 2 // d.cells), seed=17)
            print(f"{d.name:80s} {r.text()}", flush=True)


if __name__ == "__main__":
    main()
