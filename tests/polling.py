"""Synchronisation by condition, never by sleeping: shared by unit and integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Poll `condition` until it is true or `timeout` seconds have passed; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())
