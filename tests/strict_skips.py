"""A pytest plugin (loaded by pyproject's addopts) for every test. In CI
(FSBENCH_STRICT_SKIPS=1, set by .ci/run) a test skipped for a missing tool, driver or
privilege fails instead: CI installs everything and runs as root, so a skip there would hide a
test that never ran. Skips about the machine's state, not about what is installed, say so by
starting their reason with NOT_APPLICABLE."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

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
