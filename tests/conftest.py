"""How the suite is spread over pytest-xdist workers (`-n 2` in pyproject.toml).

Integration tests share the machine's loop devices, the global drop_caches, the page cache
and the CPUs, and assert on what they measure (warm rereads, cold device counters, daemon
CPU): one test's drop_caches would spoil another's warm read. So all of them are one scope
that one worker runs in order, while the other worker runs unit test modules (each module one
scope, so module fixtures run once). A scheduler of our own rather than `--dist loadgroup`:
xdist 3.8 marks groups by rewriting `item._nodeid`, which pytest 9 no longer reads.

Two integration modules touch none of the host's lab state and run beside the lab scope: the
VM tests (the guest has its own kernel, page cache and loop devices; the host only runs qemu)
and the browser tests (a report file and Chromium). Scopes are queued in collection order
(`--no-loadscope-reorder` in pyproject.toml) and the VM tests are collected first, so the VM
scope starts on one worker and the lab scope on the other; the rest fill in behind them. The VM
test's one host subject (ext4@host) is measured before the guest boots, in its first seconds:
beside the lab scope's first test, the chaos test, which asserts nothing about cache states.

In CI (FSBENCH_STRICT_SKIPS=1, set by .ci/run) a test skipped for a missing tool, driver or
privilege fails instead: CI installs everything and runs as root, so a skip there would hide a
test that never ran. Skips about the machine's state, not about what is installed, say so by
starting their reason with NOT_APPLICABLE's value, "not applicable here:".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# The fake workload resolves only under the suite (registry.FAKE_WORKLOAD_ENV); CLI
# subprocesses the tests start inherit it.
os.environ["FSBENCH_TEST_FAKE_WORKLOAD"] = "1"
# Real runs skip the machine's noise floor (~2.7 s each, ~100 s of the lab scope); the tests
# of the floor itself (test_compare_e2e, test_vm_real) unset it (env.NO_NOISE_FLOOR_ENV).
os.environ["FSBENCH_TEST_NO_NOISE_FLOOR"] = "1"

INTEGRATION = "tests/integration/"
# Integration modules that share nothing with the lab scope (see above): a scope each.
BESIDE_THE_LAB = ("test_vm_real.py", "test_report_browser.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class LabScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith(INTEGRATION) and not module.endswith(BESIDE_THE_LAB):
                return "lab"
            return module

    return LabScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The VM tests first, then the lab scope: the two longest scopes start at once."""

    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        if module.endswith(BESIDE_THE_LAB[0]):
            return 0
        return 1 if module.startswith(INTEGRATION) and not module.endswith(BESIDE_THE_LAB) else 2

    items.sort(key=rank)  # stable: the order within each group stays as collected


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
