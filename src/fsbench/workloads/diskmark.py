"""The eight KDiskMark 3.3 tests as fio jobs (`--suite diskmark`).

KDiskMark (src/helper.cpp, appsettings.cpp) runs each test as one fio job: `ioengine=libaio
direct=1 randrepeat=0 refill_buffers end_fsync=1 runtime=5 size=1024m` over one test file it
lays out first, dropping the caches before each pass, and averages 5 passes. `refill_buffers`
(new random data for every write) is kept although it costs fio CPU per byte written: that cost
is part of the number KDiskMark shows (docs/reading.md: what it costs on a RAM image). Here the
file is the subject's share of `--size` (KDiskMark's 1 GiB at `--size 2560M`), laid out once
by prepare and shared by all eight (one fileset), and the caches are dropped before every pass
(cache "direct": a cold start, a FUSE daemon remounted; KDiskMark writes 1 to drop_caches).

**One fsbench sample is one pass**: one fio run of at most 5 s, never merged with another to
reach --min-sample-time (min_sample_s 0). fsbench's table shows the median of the passes with
its interval and judges it like any result; the suite's grid shows their mean, KDiskMark's
figure (5 passes averaged: `--repeat 5`). CrystalDiskMark 9 reports the best of 3 passes after
an unscored one; a maximum is not an estimate a verdict can be made on, so fsbench follows
KDiskMark (its unscored pass is fsbench's warm-up, which the trace probes watch).

A driver that does not honour O_DIRECT (ntfs-3g) runs the same job buffered; the sample's
cache check flags it `direct-not-honored`, as for the direct micro workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fsbench.errors import UsageError
from fsbench.workloads.fio import FioJob, IoParams, with_io

NAME = "diskmark"
# KDiskMark's default test length, per pass.
RUNTIME_S = 5

# (variant, rw, bs, depth, what KDiskMark calls it)
_TESTS = (
    ("seq1m-q8t1", "read", "1M", 8, "SEQ1M Q8T1"),
    ("seq1m-q1t1", "read", "1M", 1, "SEQ1M Q1T1"),
    ("rnd4k-q32t1", "randread", "4k", 32, "RND4K Q32T1"),
    ("rnd4k-q1t1", "randread", "4k", 1, "RND4K Q1T1"),
)


@dataclass(frozen=True)
class DiskmarkTest(FioJob):
    """One KDiskMark test. Its name says T1, so its job count stays 1 (`--numjobs` or `:jN`
    is refused), and its grid has one cell per test and subject, so one placement."""

    # The suite's grid (report/diskmark.py) keys a subject's results by test only.
    one_per_test: ClassVar[bool] = True

    def with_numjobs(self, numjobs: int) -> FioJob:
        if numjobs != 1:
            raise UsageError(
                f"{self.id}: KDiskMark's tests run one job each (T1), not {numjobs}; drop "
                "--numjobs, or measure jobs with rand-read/4k-direct:qd32:j4"
            )
        return self

    def with_io(self, mods: IoParams) -> FioJob:
        self.with_numjobs(mods.numjobs or 1)
        return with_io(self, mods)


def _job(variant: str, rw: str, bs: str, depth: int, label: str, write: bool) -> DiskmarkTest:
    rw = rw.replace("read", "write") if write else rw
    return DiskmarkTest(
        NAME,
        f"{variant}-{'write' if write else 'read'}",
        f"KDiskMark {label} {'write' if write else 'read'}: {bs.upper()} records, queue depth "
        f"{depth}, 1 job, libaio O_DIRECT{', fresh random data per write' if write else ''}, "
        f"final fsync, at most {RUNTIME_S} s a pass",
        rw=rw,
        bs=bs,
        direct=True,
        end_fsync=True,
        cache="direct",
        fileset=NAME,
        iodepth=depth,
        ioengine="libaio",
        randrepeat=False,
        refill_buffers=True,
        runtime_s=RUNTIME_S,
        min_sample_s=0.0,
    )


# KDiskMark's order: every read test, then every write test.
DISKMARK_JOBS: list[DiskmarkTest] = [
    _job(*t, write=w)
    for w in (False, True)
    for t in _TESTS  # type: ignore[misc]
]
