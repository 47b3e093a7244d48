"""How the suite is spread over pytest-xdist workers (`-n 2` in pyproject.toml).

Integration tests share the machine's loop devices, the global drop_caches, the page cache
and the CPUs, and assert on what they measure (warm rereads, cold device counters, daemon
CPU): one test's drop_caches would spoil another's warm read. So all of them are one scope
that one worker runs in order, while the other worker runs unit test modules (each module one
scope, so module fixtures run once). A scheduler of our own rather than `--dist loadgroup`:
xdist 3.8 marks groups by rewriting `item._nodeid`, which pytest 9 no longer reads.

In CI (FSBENCH_STRICT_SKIPS=1, set by .ci/run) a test skipped for a missing tool, driver or
privilege fails instead: CI installs everything and runs as root, so a skip there would hide a
test that never ran. Skips about the machine's state, not about what is installed, say so by
starting their reason with NOT_APPLICABLE.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

INTEGRATION = "tests/integration/"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class LabScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "lab" if nodeid.startswith(INTEGRATION) else nodeid.split("::", 1)[0]

    return LabScheduling(config, log)


NOT_APPLICABLE = "not applicable here:"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if os.environ.get("FSBENCH_STRICT_SKIPS") != "1":
        return
    rep = outcome.get_result()
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith(NOT_APPLICABLE):
        return
    rep.outcome = "failed"
    rep.longrepr = f"skipped in CI, where everything is installed: {reason}"
