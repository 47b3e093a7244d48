"""wrk is woken until it ends: the first SIGINT may land on its thread that is stopping, and
its main thread then sleeps for all of -d (seen once as a cold web-serve sample of 300 s)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from fsbench.services.wrk import run_wrk

# Stands in for wrk: prints the marker, loses the first SIGINT (as when the kernel gives it to
# the stopping thread), ends at the second. SIGINT is blocked before the marker and taken with
# sigwait, so none is missed between looks and none needs polling for.
FAKE = """
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
print("FSBENCH-STOP {}", flush=True)
hits = 0
while hits < 2:
    signal.sigwait({signal.SIGINT})
    hits += 1
print("done after", hits, flush=True)
"""


def test_a_lost_sigint_is_sent_again(tmp_path: Path) -> None:
    fake = tmp_path / "wrk.py"
    fake.write_text(FAKE)
    t0 = time.monotonic()
    out = run_wrk([sys.executable, str(fake)], "FSBENCH-STOP", timeout=30)
    assert "done after 2" in out
    assert time.monotonic() - t0 < 5
