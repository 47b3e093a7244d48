"""A real compare interrupted at random moments leaves nothing behind (see chaos.py).

The quick form: 3 seeded trials, a SIGTERM and a SIGKILL in the freeze window before a cold
read, then one at a random moment. The SIGINT in the freeze window is bench/chaos.py's smoke
(test_bench_smoke: its trial 0, read at once with --settle 0). FSBENCH_CHAOS_SEED replays a
failing seed; the long form is `bench/chaos.py --trials 50`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from chaos import COMPARE_URING, SIGNALS, Trial, run_trial, run_trials, summary
from conftest import need_drivers

from fsbench.fuse import transports

pytestmark = pytest.mark.root

# SIGTERM and SIGKILL at the freeze window, then one at a random moment (bench/chaos.py runs
# 50 random trials; the suite keeps the few that cover every signal, for its time budget).
# SIGINT at the freeze window is bench/chaos.py's smoke (its trial 0), not run twice.
FREEZE = tuple(s for s in SIGNALS if s != "SIGINT")
TRIALS = len(FREEZE) + 1


def test_interrupted_at_random_moments_nothing_left_behind(tmp_path: Path) -> None:
    need_drivers("ext4", "ntfs-3g")
    seed = int(os.environ.get("FSBENCH_CHAOS_SEED") or random.randrange(1, 1_000_000))
    lines: list[str] = []
    outcomes = run_trials(seed, TRIALS, tmp_path, report=lines.append, freeze=FREEZE)
    print("\n".join([*lines, summary(outcomes, seed)]))  # shown with -rP, kept in CI logs
    failed = [o for o in outcomes if not o.clean]
    assert not failed, (
        f"{summary(outcomes, seed)}; replay with FSBENCH_CHAOS_SEED={seed}\n" + "\n".join(lines)
    )
    # The trials did what they are for: signals landed while the run was live, and the
    # freeze window was reached.
    assert sum(o.reached for o in outcomes) >= TRIALS // 2, "\n".join(lines)
    assert any(o.reached and o.trial.moment == "freeze" for o in outcomes), "\n".join(lines)


def test_killed_mid_sample_over_io_uring_enable_uring_is_put_back(tmp_path: Path) -> None:
    """One SIGKILL trial during a FUSE-over-io_uring run's fio: `fsbench cleanup` restores
    enable_uring (the leftover checks compare it with the suite's start)."""
    need_drivers("ext4", "passthrough_hp")
    st = transports.kernel_status("uring")
    if not st.available:
        pytest.skip(f"not applicable here: no FUSE over io_uring ({st.reason})")
    before = transports.uring_enabled()
    out = run_trial(Trial(0, 0, "SIGKILL", "fio", 0.05), tmp_path, COMPARE_URING)
    assert out.reached, out.describe()  # killed while a sample ran, not after the run
    assert out.clean, out.describe()
    assert transports.uring_enabled() == before
    if before is False:
        assert f"restored {transports.ENABLE_URING} = N" in out.cleanup_output, out.describe()
