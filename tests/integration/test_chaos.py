"""A real compare interrupted at random moments leaves nothing behind (see chaos.py).

The quick form: 6 seeded trials, the first three a SIGINT, SIGTERM and SIGKILL in the freeze
window before a cold read. FSBENCH_CHAOS_SEED replays a failing seed; the long form is
`bench/chaos.py --trials 50`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from chaos import run_trials, summary
from conftest import need_drivers

pytestmark = pytest.mark.root

TRIALS = 6


def test_interrupted_at_random_moments_nothing_left_behind(tmp_path: Path) -> None:
    need_drivers("ext4", "ntfs-3g")
    seed = int(os.environ.get("FSBENCH_CHAOS_SEED") or random.randrange(1, 1_000_000))
    lines: list[str] = []
    outcomes = run_trials(seed, TRIALS, tmp_path, report=lines.append)
    print("\n".join([*lines, summary(outcomes, seed)]))  # shown with -rP, kept in CI logs
    failed = [o for o in outcomes if not o.clean]
    assert not failed, (
        f"{summary(outcomes, seed)}; replay with FSBENCH_CHAOS_SEED={seed}\n" + "\n".join(lines)
    )
    # The trials did what they are for: signals landed while the run was live, and the
    # freeze window was reached.
    assert sum(o.reached for o in outcomes) >= TRIALS // 2, "\n".join(lines)
    assert any(o.reached and o.trial.moment == "freeze" for o in outcomes), "\n".join(lines)
