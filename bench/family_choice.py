"""What another family would buy: Tukey's studentized range (Games-Howell's form: each pair at
its own degrees) against Bonferroni over a table's ordered pairs, on README command 1 simulated
through the real runner (bench/verdict_readme.py's design), at the 3 rounds a fresh machine
gave and the 5-8 a warmed one gives, and the same design's A/A false-table rate.

Bonferroni spreads alpha over k(k - 1) one-sided tails × looks; at 2-4 degrees its t quantile
for 8 subjects is 33-9, the studentized range's 13-6. Holm's step-down tests the largest
difference at Bonferroni's level (no help to the 15x gap that stayed open), and Dunnett's
many-to-one covers the baseline column but not the answer line's comparisons with the
fastest, so neither is simulated.

    uv run python bench/family_choice.py [--runs 100] [--smoke]
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from simulate_verdicts import Design, false_tables
from verdict_readme import EFFECTS, KINDS, SPREADS, ab

from fsbench.stats import verdict
from fsbench.stats.verdict import Family

BONFERRONI = verdict.critical


@functools.cache
def _range_q(p: float, k: int, df: float) -> float:
    from scipy.stats import studentized_range

    return float(studentized_range.ppf(p, k, df)) / math.sqrt(2.0)


def studentized_range(fam: Family, df: float) -> float:
    """The range's quantile at the family's alpha over its looks and columns, at the pair's
    degrees rounded down to a quarter (conservative; the quantile is costly to compute)."""
    if fam.subjects < 3:
        return BONFERRONI(fam, df)
    p = 1.0 - fam.alpha / (fam.looks * fam.columns)
    return _range_q(p, fam.subjects, max(1.0, math.floor(df * 4) / 4))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="A/B runs per case (A/A: twice)")
    ap.add_argument(
        "--smoke", action="store_true", help="CI's smoke: one case (3 rounds, Bonferroni)"
    )
    args = ap.parse_args()
    t0 = time.monotonic()
    families = (("bonferroni", BONFERRONI), ("studentized range", studentized_range))
    for rounds in ((3, 3),) if args.smoke else ((3, 3), (5, 8)):
        common = dict(k=8, cells=2, spreads=SPREADS, kinds=KINDS, rounds=rounds)
        for name, crit in families[:1] if args.smoke else families:
            verdict.critical = crit
            wide, marked = ab(Design("A/B", effects=EFFECTS, **common), args.runs)
            aa = false_tables(Design("A/A", **common), args.runs * 2)
            print(f"{rounds[0]}-{rounds[1]} rounds, {name}: any interval > 5x {wide.text()}; "
                  f"every one outside 0.67-1.5 marked {marked.text()}; false A/A tables "
                  f"{aa.text()}", flush=True)  # fmt: skip
    verdict.critical = BONFERRONI
    print(f"in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
