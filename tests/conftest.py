"""How the suite is spread over pytest-xdist workers (`-n 2` in pyproject.toml).

Integration tests share the machine's loop devices, the global drop_caches, the page cache
and the CPUs, and assert on what they measure (warm rereads, cold device counters, daemon
CPU): one test's drop_caches would spoil another's warm read. So all of them are one scope
that one worker runs in order, while the other worker runs unit test modules (each module one
scope, so module fixtures run once). A scheduler of our own rather than `--dist loadgroup`:
xdist 3.8 marks groups by rewriting `item._nodeid`, which pytest 9 no longer reads.

Four integration modules touch none of the host's lab state and run beside the lab scope: the
VM tests (the guest has its own kernel, page cache and loop devices; the host only runs qemu),
the browser tests (a report file and Chromium), the bench/ simulations' smokes (CPU only, as
the unit tests, and scripts whose I/O stays in a directory of their own) and `run --target`
as user nobody (a tmpfs of its own; nobody drops no cache). Scopes are queued in collection order
(`--no-loadscope-reorder` in pyproject.toml) and the VM tests are collected first, so the VM
scope starts on one worker and the lab scope on the other; the rest fill in behind them. The VM
test's one host subject (ext4@host) is measured before the guest boots, in its first seconds:
beside the lab scope's first test, the chaos test, which asserts nothing about cache states.

In CI (FSBENCH_STRICT_SKIPS=1, set by .ci/run) a test skipped for a missing tool, driver or
privilege fails instead: CI installs everything and runs as root, so a skip there would hide a
test that never ran. Skips about the machine's state, not about what is installed, say so by
starting their reason with NOT_APPLICABLE's value, "not applicable here:".

No test touches a fixed path outside its own temporary directory (tests/fixedpaths.py watches
every open, listing and stat of this process, and fails the test that did). The session has a
temporary directory of its own, made here under the caller's $TMPDIR and set as $TMPDIR for the
tests, the workers and every command they start: every tmp_path is under it, /tmp itself is
outside it, and it is removed at the end when the session passed (kept, and named, when not).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fixedpaths

# The session's own $TMPDIR (see above); xdist's workers inherit it through the environment.
SESSION_TMP = "FSBENCH_TEST_TMPDIR"
if SESSION_TMP not in os.environ:
    os.environ[SESSION_TMP] = tempfile.mkdtemp(prefix="fsbench-tests-")
    # Open to every user as /tmp is: a test runs fsbench as nobody in a directory below it.
    os.chmod(os.environ[SESSION_TMP], 0o755)
os.environ["TMPDIR"] = os.environ[SESSION_TMP]
tempfile.tempdir = os.environ[SESSION_TMP]
fixedpaths.install()

# The fake workload resolves only under the suite (registry.FAKE_WORKLOAD_ENV); CLI
# subprocesses the tests start inherit it.
os.environ["FSBENCH_TEST_FAKE_WORKLOAD"] = "1"
# Real runs skip the machine's noise floor (~2.7 s each, ~100 s of the lab scope); the tests
# of the floor itself (test_compare_e2e, test_vm_real) unset it (env.NO_NOISE_FLOOR_ENV).
os.environ["FSBENCH_TEST_NO_NOISE_FLOOR"] = "1"

INTEGRATION = "tests/integration/"
# Integration modules that share nothing with the lab scope (see above): a scope each.
BESIDE_THE_LAB = (
    "test_vm_real.py",
    "test_report_browser.py",
    "test_bench_smoke_simulated.py",
    "test_run_as_nobody.py",
)


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
    found = fixedpaths.take()
    if found:  # a test module touched one as it was imported
        raise pytest.UsageError("collecting touched a fixed path: " + "; ".join(found))


# Free page reporting hands every page a test frees back to the hypervisor, and the next test
# first touches its images' memory at ~330 MB/s instead of ~3.6 GB/s (4.25 GiB: 13 s, not 1.2).
# A run holds it off only while it runs (lab.py); the suite holds it for the session, so the
# memory one test frees is the next one's, and puts the machine's order back at the end.
# test_safety's test of the hold puts that order back for its own run (HELD_ENV says it).
PAGE_REPORTING = Path("/sys/module/page_reporting/parameters/page_reporting_order")
HELD_ENV = "FSBENCH_TEST_PAGE_REPORTING_ORDER"


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or HELD_ENV in os.environ:
        return  # a worker (the controller holds it), or a suite inside a suite
    try:
        order = PAGE_REPORTING.read_text().strip()
        if int(order) <= 10:
            PAGE_REPORTING.write_text("11")
            os.environ[HELD_ENV] = order  # the workers inherit it
    except (OSError, ValueError):
        return  # no such module, or not root: nothing held


def pytest_unconfigure(config: pytest.Config) -> None:
    order = os.environ.get(HELD_ENV)
    if order is not None and not hasattr(config, "workerinput"):
        with contextlib.suppress(OSError):
            PAGE_REPORTING.write_text(order)
        del os.environ[HELD_ENV]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a worker: the controller owns the directory
    tmp = os.environ[SESSION_TMP]
    mounted = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if f" {tmp}/" in line]  # fmt: skip
    if exitstatus == 0 and not mounted:
        shutil.rmtree(tmp, ignore_errors=True)
    elif os.path.isdir(tmp):
        why = "something is still mounted under it" if mounted else "the session failed"
        session.config.get_terminal_writer().line(f"kept {tmp} ({why})")


NOT_APPLICABLE = "not applicable here:"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    found = fixedpaths.take()
    if found:  # in this phase (set-up, call or teardown) the test touched a fixed path
        touched = "touched a path outside its own temporary directory:\n  " + "\n  ".join(found)
        if rep.failed:
            rep.sections.append(("fixed paths", touched))
        else:
            rep.outcome, rep.longrepr = "failed", touched
        return
    if os.environ.get("FSBENCH_STRICT_SKIPS") != "1":
        return
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith(NOT_APPLICABLE):
        return
    rep.outcome = "failed"
    rep.longrepr = f"skipped in CI, where everything is installed: {reason}"
