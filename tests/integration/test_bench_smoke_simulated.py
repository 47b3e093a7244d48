"""The bench/ simulations at their smallest size (see test_bench_smoke.py): no file system and
no I/O, only fsbench's runner and verdict code on made-up samples; and the scripts whose I/O
stays in the test's own directory (no loop device, no drop_caches, no mount but a tmpfs of its
own). They run beside the lab scope (tests/conftest.py's BESIDE_THE_LAB) as the unit tests do,
not in its queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bench_smoke import SMOKES, run_smoke


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(s, marks=pytest.mark.root) if SMOKES[s].root else s
        for s in sorted(SMOKES)
        if SMOKES[s].simulated or SMOKES[s].beside
    ],
)
def test_the_simulation_runs_at_its_smallest_size(script: str, tmp_path: Path) -> None:
    run_smoke(script, tmp_path)
