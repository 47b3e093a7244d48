"""How the suite is spread over pytest-xdist workers (`-n 2` in pyproject.toml).

Integration tests share the machine's loop devices, the global drop_caches, the page cache
and the CPUs, and assert on what they measure (warm rereads, cold device counters, daemon
CPU): one test's drop_caches would spoil another's warm read. So all of them are one scope
that one worker runs in order, while the other worker runs unit test modules (each module one
scope, so module fixtures run once). A scheduler of our own rather than `--dist loadgroup`:
xdist 3.8 marks groups by rewriting `item._nodeid`, which pytest 9 no longer reads.
"""

from __future__ import annotations

from typing import Any

import pytest

INTEGRATION = "tests/integration/"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class LabScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "lab" if nodeid.startswith(INTEGRATION) else nodeid.split("::", 1)[0]

    return LabScheduling(config, log)
