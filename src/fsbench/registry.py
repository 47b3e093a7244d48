"""Built-in plug-ins: drivers, formats and workloads are all declared as data and listed here.

A later plug-in registers the same way (append to the tables); nothing else needs to change.
"""

from __future__ import annotations

import os

from fsbench.errors import UsageError
from fsbench.lab.drivers import DRIVERS
from fsbench.lab.formats import FORMATS
from fsbench.workloads import fiofile, iozone
from fsbench.workloads.agedtree import AGED_JOBS
from fsbench.workloads.agedtree import GROUP as AGED_GROUP
from fsbench.workloads.base import Workload
from fsbench.workloads.compile import COMPILE_JOBS
from fsbench.workloads.copy import COPY_JOBS
from fsbench.workloads.diskmark import DISKMARK_JOBS, MIX_IDS
from fsbench.workloads.fake import FakeWorkload
from fsbench.workloads.fio import FIO_JOBS, IoParams, parse_io_params
from fsbench.workloads.metadata import METADATA_JOBS
from fsbench.workloads.treehash import TREE_HASH_JOBS
from fsbench.workloads.webserve import WEB_SERVE_JOBS

__all__ = ["DRIVERS", "FORMATS", "SUITES", "WORKLOADS", "resolve_workloads"]

WORKLOADS: dict[str, Workload] = {job.id: job for job in FIO_JOBS}
WORKLOADS.update({w.id: w for w in DISKMARK_JOBS})
WORKLOADS.update({w.id: w for w in TREE_HASH_JOBS})
WORKLOADS.update({w.id: w for w in METADATA_JOBS})
WORKLOADS.update({w.id: w for w in COPY_JOBS})
WORKLOADS.update({w.id: w for w in COMPILE_JOBS})
WORKLOADS.update({w.id: w for w in WEB_SERVE_JOBS})
WORKLOADS.update({w.id: w for w in AGED_JOBS})  # by NAME/VARIANT or the group `aged` only

# Hidden from listings: only for tests of the scheduler, statistics and reports, and
# resolvable only where the suite set FAKE_WORKLOAD_ENV (tests/conftest.py): from a user's
# command line a fake result would read like a measurement.
HIDDEN_WORKLOADS: dict[str, type] = {"fake": FakeWorkload}
FAKE_WORKLOAD_ENV = "FSBENCH_TEST_FAKE_WORKLOAD"


def _hidden() -> dict[str, type]:
    return HIDDEN_WORKLOADS if os.environ.get(FAKE_WORKLOAD_ENV) == "1" else {}


# The Iozone matrix: hundreds of generated cells, resolvable by id (or all as "iozone") but kept
# out of `fsbench list workloads`; suites name a subset through WORKLOAD_GROUPS.
MATRIX_WORKLOADS: dict[str, Workload] = {job.id: job for job in iozone.FULL_JOBS}
WORKLOAD_GROUPS: dict[str, list[str]] = {**iozone.groups(), AGED_GROUP: [w.id for w in AGED_JOBS]}

SUITES: dict[str, dict] = {
    "default": {
        "description": "sequential write (1 MiB records, final fsync) and cold sequential read",
        "workloads": ["seq-write/fsync", "seq-read/cold"],
        "takes": (
            "all 8 drivers available here at defaults (--size 1G --repeat auto, 210 s budget): "
            "about 4 min (2-CPU VM, Linux 6.18, RAM images)"
        ),
    },
    "micro": {
        "description": "every fio micro workload: sequential, rewrite, reread, random 4/8 KiB "
        "buffered and O_DIRECT, strided read",
        "workloads": [
            "seq-write",
            "seq-read",
            "rewrite",
            "reread",
            "rand-read",
            "rand-write",
            "stride-read",
        ],
        "takes": "not measured",
    },
    "diskmark": {
        "description": "KDiskMark's eight tests: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K "
        "Q1T1, read and write (libaio O_DIRECT, <= 5 s a pass; diskmark:io_uring for io_uring)",
        "workloads": ["diskmark"],
        "takes": (
            "ext4 and ntfs-3g at --size 512M --repeat 2: 77 s from start to results "
            "(measured 2026-11-26, 2-CPU VM, Linux 6.18, RAM images)"
        ),
    },
    "diskmark-mix": {
        "description": "KDiskMark's Default [+Mix]: its eight tests and each test's MIX (Read "
        "70%/Write 30%, KDiskMark's figure (R*70 + W*30) / 100); --diskmark-size and "
        "--diskmark-runtime are its Test size and Measure time",
        "workloads": ["diskmark", *MIX_IDS],
        "takes": "not measured",
    },
}


SUITES.update(iozone.suites())


def resolve_workloads(
    spec: str | None,
    suite: str | None,
    numjobs: list[int] | None = None,
    own: list[Workload] | None = None,
    timeout_s: float | None = None,
) -> list[Workload]:
    """The workloads named; `own` (a --command) runs after them, alone when none is named.
    `fio:PATH[:cache=cold]` names a user's job file (workloads/fiofile.py)."""
    if spec and suite:
        raise UsageError("give --workloads or --suite, not both")
    if own and not spec and not suite:
        return list(own)
    suite_io = None
    if suite and ":" in suite:
        # `--suite diskmark:io_uring`: every workload of the suite at that engine or depth.
        suite, mods = suite.split(":", 1)
        suite_io = parse_io_params(f"--suite {suite}:{mods}", mods)
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
    names = [m for n in names for m in WORKLOAD_GROUPS.get(n, [n])]
    pool = {**WORKLOADS, **MATRIX_WORKLOADS}
    out: list[Workload] = []
    for spec_n in names:
        n, io = _io_spec(spec_n)
        if numjobs and io is not None and io.numjobs:
            raise UsageError(
                f"{spec_n}: ':j{io.numjobs}' and --numjobs both set the job count; give one"
            )
        io = io or suite_io
        matches = [w for wid, w in pool.items() if n == wid or (n == w.name and w.by_name)]
        if io is not None and matches:
            matches = [_with_io(w, io, spec_n) for w in matches]
        if n.startswith(fiofile.PREFIX):
            out += fiofile.resolve(n, timeout_s)
        elif matches:
            out += matches
        elif n in _hidden():
            out.append(_hidden()[n]())
        else:
            known = ", ".join(dict.fromkeys(w.name for w in WORKLOADS.values()))
            raise UsageError(
                f"unknown workload {n!r}; known: {known} (or NAME/VARIANT, or fio:JOBFILE)"
            )
    if numjobs:
        # Concurrency as a parameter: each workload that declares it (hook with_numjobs)
        # once per job count; one that cannot take it is refused, never run at one job.
        cannot = [str(w.id) for w in out if not w.with_numjobs]
        if cannot:
            raise UsageError(
                f"--numjobs {','.join(map(str, numjobs))}: {', '.join(cannot[:3])}"
                f"{' and more' if len(cannot) > 3 else ''} take no job count (fio workloads "
                "do); measure those without --numjobs"
            )
        out = [
            v
            for w in out
            for v in ([w.with_numjobs(n) for n in numjobs] if w.with_numjobs else [w])
        ]
    out += own or []
    ids = [str(w.id) for w in out]
    if len(set(ids)) != len(ids):
        raise UsageError("a workload is listed twice in --workloads")
    return out


def _io_spec(name: str) -> tuple[str, IoParams | None]:
    """`rand-read/4k-direct:qd32` -> ("rand-read/4k-direct", its IoParams); a user's fio job
    file (`fio:PATH:...`) keeps its colons."""
    if name.startswith(fiofile.PREFIX) or ":" not in name:
        return name, None
    base, mods = name.split(":", 1)
    return base, parse_io_params(name, mods)


def _with_io(wl: Workload, io: IoParams, spec: str) -> Workload:
    how = wl.with_io
    if how is None:
        raise UsageError(
            f"{spec}: {wl.id} takes no queue depth or engine (only fio micro "
            "workloads and the diskmark suite do)"
        )
    return how(io)
