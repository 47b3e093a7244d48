"""The freeze window of a cold read: SIGINT/SIGTERM wait until the thaw."""

from __future__ import annotations

import os
import signal

import pytest

from fsbench.lab.lab import signals_deferred


class Stop(Exception):
    pass


def test_signals_wait_until_the_block_ends_then_reach_the_old_handler() -> None:
    def handler(signum: int, _frame: object) -> None:
        raise Stop(signal.Signals(signum).name)

    old = signal.signal(signal.SIGTERM, handler)
    steps: list[str] = []
    try:
        with pytest.raises(Stop, match="SIGTERM"), signals_deferred():
            steps.append("frozen")
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # twice: delivered once
            steps.append("thawed")  # reached: the signal did not cut the block short
        assert steps == ["frozen", "thawed"]
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, old)


def test_no_signal_no_delivery() -> None:
    old = signal.getsignal(signal.SIGINT)
    with signals_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is old
