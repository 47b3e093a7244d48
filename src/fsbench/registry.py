"""Built-in plug-ins: drivers, formats and workloads are all declared as data and listed here.

A later plug-in registers the same way (append to the tables); nothing else needs to change.
"""

from __future__ import annotations

from fsbench.errors import UsageError
from fsbench.lab.drivers import DRIVERS
from fsbench.lab.formats import FORMATS
from fsbench.workloads.base import Workload
from fsbench.workloads.fake import FakeWorkload
from fsbench.workloads.fio import FIO_JOBS

__all__ = ["DRIVERS", "FORMATS", "SUITES", "WORKLOADS", "resolve_workloads"]

WORKLOADS: dict[str, Workload] = {job.name: job for job in FIO_JOBS}

# Hidden from listings: only for tests of the scheduler, statistics and reports.
HIDDEN_WORKLOADS: dict[str, type] = {"fake": FakeWorkload}

SUITES: dict[str, dict] = {
    "default": {
        "description": "sequential write (1 MiB records, final fsync) and cold sequential read",
        "workloads": ["seq-write", "seq-read"],
    },
}


def resolve_workloads(spec: str | None, suite: str | None) -> list[Workload]:
    if spec and suite:
        raise UsageError("give --workloads or --suite, not both")
    if suite:
        if suite not in SUITES:
            raise UsageError(f"unknown suite {suite!r}; known suites: {', '.join(SUITES)}")
        names = SUITES[suite]["workloads"]
    elif spec:
        names = [n.strip() for n in spec.split(",") if n.strip()]
        if not names:
            raise UsageError("--workloads is empty; e.g. --workloads seq-write,seq-read")
    else:
        names = SUITES["default"]["workloads"]
    out: list[Workload] = []
    for n in names:
        if n in WORKLOADS:
            out.append(WORKLOADS[n])
        elif n in HIDDEN_WORKLOADS:
            out.append(HIDDEN_WORKLOADS[n]())
        else:
            raise UsageError(f"unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
    if len({w.name for w in out}) != len(out):
        raise UsageError("a workload is listed twice in --workloads")
    return out
