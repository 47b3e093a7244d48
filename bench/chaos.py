"""Long-form chaos test: N seeded trials of a real compare interrupted at random moments.

    flock /tmp/fsbench-heavy.lock uv run python bench/chaos.py --trials 50 --seed 1234

`--signal SIGKILL --settle 0`: every trial kills fsbench outright, runs `fsbench cleanup`, and
reads the system the moment cleanup returns (no grace): cleanup must return only once what it
released is gone, daemons included.

Prints one line per trial and, last, how many trials left nothing behind; exits 1 when any
trial left something (the seed and trial replay it). See tests/integration/chaos.py.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # polling.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from chaos import SIGNALS, run_trials, summary
from conftest import root_problem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument(
        "--signal", choices=SIGNALS, action="append", help="only this signal (repeatable)"
    )
    ap.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds the system may take to let go after the run (0: read at once)",
    )
    args = ap.parse_args()
    problem = root_problem()
    if problem:
        print(f"chaos: cannot run: {problem}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fsbench-chaos-") as work:
        outcomes = run_trials(
            seed,
            args.trials,
            Path(work),
            report=lambda s: print(s, flush=True),
            signals=tuple(args.signal or SIGNALS),
            settle=args.settle,
        )
    print(f"chaos: {time.monotonic() - t0:.0f} s wall time", flush=True)
    print(summary(outcomes, seed))
    return 0 if all(o.clean for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
