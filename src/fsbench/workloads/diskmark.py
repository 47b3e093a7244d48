"""The eight KDiskMark 3.3 tests as fio jobs (`--suite diskmark`), and each test's MIX
(`--suite diskmark-mix`, KDiskMark's "Default [+Mix]": Read 70%/Write 30%).

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

KDiskMark's test size and measuring time are `--diskmark-size` and `--diskmark-runtime`
(`with_choices`); a MIX pass is one `rw`/`randrw` job with `rwmixread=70`, its figure
KDiskMark's weighting of the two directions' rates (`mix_measurement`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.workloads.base import ChildResult, Measurement, Target, measured_child
from fsbench.workloads.fio import (
    FIO_RUNTIME_CAP_S,
    FioJob,
    IoParams,
    MiB,
    fio_error,
    fio_measurement,
    with_io,
)
from fsbench.workloads.fiojson import parse_fio_json

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

    # The suite's grid (report/model/grids.py) keys a subject's results by test only.
    one_per_test: ClassVar[bool] = True
    by_name: bool = True  # the workload contract's hook: `diskmark` names it

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

    def run(self, target: Target) -> Measurement:
        if self.rwmixread is None:
            return super().run(target)
        res = measured_child(self.argv(target), timeout=FIO_RUNTIME_CAP_S * 3)
        if res.returncode != 0:
            raise WorkloadFailed(fio_error(res.stdout, res.stderr))
        return mix_measurement(res.stdout, self.rwmixread, res)


def mix_measurement(stdout: str, read_pct: int, res: ChildResult) -> Measurement:
    """A mixed job's pass as KDiskMark shows its MIX figure: the read and the write rates
    weighted by the mix, (R*p + W*(100-p)) / 100 (its IOPS alike); each direction's own rate,
    IOPS and latency are kept in the sample's extra["mix"]. Bytes and I/Os are both
    directions'."""
    parts = {d: parse_fio_json(stdout, d) for d in ("read", "write")}
    rates = {d: o["bytes"] / MiB / o["seconds"] if o["seconds"] > 0 else 0.0
             for d, o in parts.items()}  # fmt: skip
    r, w = parts["read"], parts["write"]

    def weigh(a: float, b: float) -> float:
        return (a * read_pct + b * (100 - read_pct)) / 100

    both = {
        "bytes": r["bytes"] + w["bytes"],
        "seconds": max(r["seconds"], w["seconds"]),
        "ios": r["ios"] + w["ios"],
        "iops": weigh(r["iops"], w["iops"]),
        "fio_version": r.get("fio_version"),
        "mix": {
            "read_pct": read_pct,
            **{d: {"bytes": o["bytes"], "mib_s": rates[d], "iops": o["iops"], "lat_us": o["lat_us"],
                   "lat_mean_us": o["lat_mean_us"]} for d, o in parts.items()},
        },
    }  # fmt: skip
    m = fio_measurement(both, res)
    return replace(m, value=weigh(rates["read"], rates["write"]))


# KDiskMark's "Mix ratio" default (R70%/W30%): a MIX pass is one fio job over the same file,
# 70 % of its I/Os reads (fio's rwmixread), its figure (R*70 + W*30) / 100 of the two rates.
MIX_READ_PCT = 70
# What each kind of test does to the file: fio's rw= for a sequential and a random test.
_RW = {"read": ("read", "randread"), "write": ("write", "randwrite"), "mix": ("rw", "randrw")}


def _job(variant: str, rw: str, bs: str, depth: int, label: str, kind: str) -> DiskmarkTest:
    mix = kind == "mix"
    how = {
        "read": "",
        "write": ", fresh random data per write",
        "mix": f", {MIX_READ_PCT} % reads and {100 - MIX_READ_PCT} % writes of fresh random "
        f"data; the figure is KDiskMark's (R*{MIX_READ_PCT} + W*{100 - MIX_READ_PCT}) / 100",
    }[kind]
    return DiskmarkTest(
        NAME,
        f"{variant}-{kind}",
        f"KDiskMark {label} {kind}: {bs.upper()} records, queue depth {depth}, 1 job, libaio "
        f"O_DIRECT{how}, final fsync, {pass_words(RUNTIME_S)}",
        rw=_RW[kind][rw == "randread"],
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
        rwmixread=MIX_READ_PCT if mix else None,
        # KDiskMark runs MIX only when asked ("[+Mix]"): `--suite diskmark-mix`, or by its id.
        by_name=not mix,
    )


def pass_words(runtime_s: int) -> str:
    return f"at most {runtime_s} s a pass"


# KDiskMark's order: every read test, then every write test, then (asked for) every mix.
DISKMARK_JOBS: list[DiskmarkTest] = [
    _job(*t, kind=k)  # type: ignore[misc]
    for k in ("read", "write", "mix")
    for t in _TESTS
]
MIX_IDS = [str(j.id) for j in DISKMARK_JOBS if j.rwmixread is not None]


def with_choices(workloads: list[Any], size: int | None, runtime_s: int | None) -> list[Any]:
    """`--diskmark-size` (KDiskMark's "Test: 1 GiB", its test file) and `--diskmark-runtime`
    (its "Measure: 5 sec", a pass's length) set on every KDiskMark test among the workloads;
    the others as they are."""
    out = []
    for w in workloads:
        if isinstance(w, DiskmarkTest):
            rt = runtime_s if runtime_s is not None else w.runtime_s
            said = w.description.replace(pass_words(w.runtime_s or RUNTIME_S), pass_words(rt or 0))
            if size is not None:
                said += f"; a {size // MiB} MiB test file (--diskmark-size)"
            w = replace(w, runtime_s=rt, file_size=size, description=said)
        out.append(w)
    return out
