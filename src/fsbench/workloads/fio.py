"""Micro workloads run by fio, declared as data. fio's JSON is parsed, never its text.

A workload name (`rand-read`) stands for its variants (`rand-read/4k-direct`, ...); each
variant is one result with its parameters stated: block size, file size, numjobs, direct,
fsync and the cache state the runner prepares and then verifies.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar

from fsbench.errors import Unsupported, UsageError, WorkloadFailed
from fsbench.workloads.base import (
    IO_EXTRAS,
    ChildResult,
    Declared,
    Measurement,
    Target,
    measured_child,
)

# fio's JSON is read in fiojson.py; its readers are importable from here as they were.
from fsbench.workloads.fiojson import LAT_ARGS, parse_fio_json
from fsbench.workloads.fiojson import fio_json as fio_json
from fsbench.workloads.fiojson import part_figures as part_figures
from fsbench.workloads.seqloop import SeqLoop

MiB = 1024 * 1024
KiB = 1024
J = TypeVar("J")
# Random I/O touches at most this much per sample: a cold 4 KiB read over a loop device costs
# ~75 µs, so 64 MiB is ~1.2 s of work, long enough to measure and short enough to repeat.
RANDOM_IO_BYTES = 64 * MiB
# A bound on any one fio run, so a pathologically slow driver cannot stall the whole run.
FIO_RUNTIME_CAP_S = 60


@dataclass(frozen=True)
class FioJob(Declared):
    """One fio job as data: everything that decides what fio does is a field here."""

    merge_extra: ClassVar[dict[str, Any]] = IO_EXTRAS

    # The task name of the application in the kernel trace (sched wake-ups are by comm).
    app_comms = ("fio",)
    name: str  # the workload (what users type), e.g. "rand-read"
    variant: str = field()  # e.g. "4k-direct"; name/variant is the result's identity
    description: str
    rw: str  # fio's rw=: write, read, randread, randwrite, read:56k (strided)
    bs: str = "1M"
    direct: bool = False
    end_fsync: bool = False
    numjobs: int = 1
    cache: str = "none"  # what the runner prepares: cold | warm | direct | none (writes)
    fileset: str = "seq"  # jobs of one fileset read what another laid out
    fresh_file: bool = False  # delete the file first: a new file, as dd writes one
    io_limit: int | None = None  # bytes per sample when less than the whole file
    file_size: int | None = None  # fixed file size (matrix suites); None: scale to the image
    # Strided reads move only part of the file; without a limit fio wraps around and re-reads.
    io_fraction: float | None = None
    # warm: what put the file in the cache before the timed read: reading it (Iozone's reread)
    # or writing it (Iozone's read, which follows its write).
    warm_by: str = "read"
    # Several files of `file_size` per job, one open at a time (the Iozone matrix' fio form).
    nrfiles: int = 1
    fsync_on_close: bool = False  # fsync each file as it is closed (Iozone -e), timed
    # Why this job cannot run (checked by prepare): a form fio cannot take.
    unsupported: str | None = None
    tools: tuple[str, ...] = ("fio",)  # their versions go into the environment
    # Queue depth and engine: psync at depth 1 unless a variant or `:qdN` asks.
    iodepth: int = 1
    ioengine: str = "psync"
    randrepeat: bool = True  # the same random offsets for every subject and sample
    # Fresh random data in every write buffer (KDiskMark's --refill_buffers): costs fio CPU per
    # byte, which a RAM-backed subject feels (docs/reading.md has the measured cost).
    refill_buffers: bool = False
    runtime_s: int | None = None  # a timed pass stops here (KDiskMark's runtime=5)
    # A mixed job (rw=rw|randrw): this percentage of its I/Os are reads (fio's rwmixread); its
    # figure is KDiskMark's MIX, the two directions' rates weighted by it (mix_measurement).
    rwmixread: int | None = None
    min_sample_s: float | None = None  # hook: None is the runner's --min-sample-time

    def with_numjobs(self, numjobs: int) -> FioJob:
        """The workload contract's hook: this job with `numjobs` parallel jobs."""
        return with_numjobs(self, numjobs)

    def with_io(self, mods: IoParams) -> FioJob:
        """The workload contract's hook: this job at another queue depth, engine or job
        count (`rand-read/4k-direct:qd32:io_uring`); the variant names what changed."""
        return with_io(self, mods)

    @property
    def async_io(self) -> bool:
        return self.iodepth != 1 or self.ioengine != "psync"

    def _io_args(self, timed: bool) -> list[str]:
        """Engine, depth, seed and runtime of a timed pass; a layout or warming pass is plain
        psync over the whole file (KDiskMark lays its file out before timing it)."""
        engine, depth = (self.ioengine, self.iodepth) if timed else ("psync", 1)
        runtime = self.runtime_s if timed and self.runtime_s else FIO_RUNTIME_CAP_S
        return [
            f"--ioengine={engine}",
            *([f"--iodepth={depth}"] if depth != 1 else []),
            f"--runtime={runtime}",
            f"--randrepeat={int(self.randrepeat)}",
            *(["--refill_buffers=1"] if timed and self.refill_buffers else []),
            *([f"--rwmixread={self.rwmixread}"] if timed and self.rwmixread is not None else []),
            # Percentiles of the total latency (submission to completion): fiojson.py says why.
            *(LAT_ARGS if timed else ()),
        ]

    @property
    def is_write(self) -> bool:
        return "write" in self.rw or self.rwmixread is not None

    @property
    def read_only_ok(self) -> bool:
        # Reads can run on an existing volume (--read-only) over a file already there, unless
        # their cache state is made by writing it.
        return not self.is_write and not (self.cache == "warm" and self.warm_by == "write")

    def per_job_size(self, target: Target) -> int:
        if self.file_size is not None:
            return self.file_size * self.nrfiles
        return max(MiB, (target.size // self.numjobs) // MiB * MiB)

    def params(self, target: Target) -> dict[str, Any]:
        if target.read_only and target.existing_file:
            existing = os.path.getsize(target.existing_file)
            return {
                **self._params(target),
                "file_size": min(existing, self.per_job_size(target)),
                "existing_file": os.path.relpath(target.existing_file, target.mountpoint or "/"),
            }
        return self._params(target)

    def _params(self, target: Target) -> dict[str, Any]:
        return {
            "engine": "fio",
            "variant": self.variant,
            "rw": self.rw,
            "block_size": self.bs,
            "file_size": self.per_job_size(target),
            "io_per_sample": self.io_limit,
            "numjobs": self.numjobs,
            "direct": self.direct,
            "fsync": "close" if self.fsync_on_close else "end" if self.end_fsync else "none",
            "cache": self.cache,
            "ioengine": self.ioengine,
            # Named only off the old default (psync, depth 1), so older runs still match (diff).
            **({"iodepth": self.iodepth} if self.async_io else {}),
            **({"randrepeat": False} if not self.randrepeat else {}),
            **({"refill_buffers": True} if self.refill_buffers else {}),
            **({"runtime_s": self.runtime_s} if self.runtime_s else {}),
            **({"rwmixread": self.rwmixread} if self.rwmixread is not None else {}),
            **({"files": self.nrfiles} if self.nrfiles > 1 else {}),
            # What prepare did, where variants differ only there (a write to a new file
            # against an overwrite, a read warmed by writing against one warmed by reading).
            # Only the exceptions are named, so results of older runs still match (diff).
            **({"new_file": True} if self.fresh_file else {}),
            **({"warmed_by": "write"} if self.cache == "warm" and self.warm_by == "write" else {}),
        }

    def argv(
        self,
        target: Target,
        rw: str | None = None,
        end_fsync: bool | None = None,
        direct: bool | None = None,
        whole: bool = False,
    ) -> list[str]:
        if target.read_only:
            return self._argv_existing(target, rw, direct)
        fsync = self.end_fsync if end_fsync is None else end_fsync
        argv = [
            fio_binary(),
            "--output-format=json",
            f"--name={self.fileset}",
            f"--directory={target.workdir}",
            f"--rw={rw or self.rw}",
            f"--bs={self.bs if rw is None else '1M'}",
            f"--size={self.per_job_size(target)}",
            f"--numjobs={self.numjobs}",
            f"--direct={int(self.direct if direct is None else direct)}",
            f"--end_fsync={int(fsync)}",
            *self._io_args(timed=rw is None and not whole),
            "--group_reporting=1",
            # The runner, not fio, decides what is cached: no fadvise before the job.
            "--invalidate=0",
            # A plain write like dd's, not posix_fallocate first (FUSE drivers differ there).
            "--fallocate=none",
            "--clocksource=clock_gettime",  # skips fio's 0.15 s CPU clock calibration
        ]
        if self.nrfiles > 1:
            # fio names the files NAME.JOB.FILE; one open at a time, so fsync_on_close syncs
            # each as it is finished.
            argv += [
                f"--nrfiles={self.nrfiles}",
                f"--filesize={self.file_size}",
                "--file_service_type=sequential",
                "--openfiles=1",
            ]
        if self.fsync_on_close and rw is None:
            argv.append("--fsync_on_close=1")
        if self.io_limit and not whole:
            argv.append(f"--io_size={min(self.io_limit, self.per_job_size(target))}")
        elif self.io_fraction and not whole:
            argv.append(f"--io_size={int(self.per_job_size(target) * self.io_fraction)}")
        return argv

    def _argv_existing(self, target: Target, rw: str | None, direct: bool | None) -> list[str]:
        """Read the largest file already on a read-only volume; fio opens it read-only."""
        if not target.existing_file:
            raise Unsupported("no file on the volume to read")
        size = min(os.path.getsize(target.existing_file), self.per_job_size(target))
        if size < self._min_bytes():
            raise Unsupported(f"the largest file on the volume is too small ({size} B)")
        argv = [
            fio_binary(),
            "--output-format=json",
            "--name=existing",
            "--filename=" + target.existing_file.replace(":", "\\:"),
            "--readonly",
            f"--rw={rw or self.rw}",
            f"--bs={self.bs if rw is None else '1M'}",
            f"--size={size}",
            f"--direct={int(self.direct if direct is None else direct)}",
            *self._io_args(timed=rw is None),
            "--invalidate=0",
        ]
        if self.io_limit:
            argv.append(f"--io_size={min(self.io_limit, size)}")
        return argv

    def _min_bytes(self) -> int:
        return 64 * KiB

    def each_file_size(self, target: Target) -> int:
        """The size of each of a job's files."""
        return self.per_job_size(target) // self.nrfiles

    def _files(self, target: Target) -> list[str]:
        return [
            os.path.join(target.workdir, f"{self.fileset}.{i}.{f}")
            for i in range(self.numjobs)
            for f in range(self.nrfiles)
        ]

    def prepare(self, target: Target) -> None:
        """Untimed: a new-file write starts from no file; everything else needs its file."""
        if self.unsupported:
            raise Unsupported(self.unsupported)
        if target.read_only:
            if self.cache == "warm":
                measured_child(self._argv_existing(target, "read", False))
            return
        os.makedirs(target.workdir, exist_ok=True)
        files = self._files(target)
        if self.fresh_file:
            for f in files:
                if os.path.exists(f):
                    os.unlink(f)
            return
        size = self.each_file_size(target)
        if self.cache == "warm" and self.warm_by == "write":
            # Written just now (fsynced, so no writeback falls into the sample): the timed
            # read finds what the driver kept in the page cache of what it wrote.
            res = measured_child(
                self.argv(target, rw="write", end_fsync=True, direct=False, whole=True)
            )
            if res.returncode != 0:
                raise WorkloadFailed(f"writing {self.id}: {fio_error(res.stdout, res.stderr)}")
            return
        if not all(os.path.exists(f) and os.path.getsize(f) >= size for f in files):
            res = measured_child(
                self.argv(target, rw="write", end_fsync=True, direct=False, whole=True)
            )
            if res.returncode != 0:
                why = fio_error(res.stdout, res.stderr)
                raise WorkloadFailed(f"laying out files for {self.id}: {why}")
        if self.cache == "warm":
            # Read it once so the measured read finds it cached (verified by the runner).
            res = measured_child(self.argv(target, rw="read", direct=False, whole=True))
            if res.returncode != 0:
                raise WorkloadFailed(f"warming {self.id}: {fio_error(res.stdout, res.stderr)}")

    def run(self, target: Target) -> Measurement:
        res = measured_child(self.argv(target), timeout=FIO_RUNTIME_CAP_S * 3)
        if res.returncode != 0:
            raise WorkloadFailed(fio_error(res.stdout, res.stderr))
        out = parse_fio_json(res.stdout, "write" if self.is_write else "read")
        return fio_measurement(out, res)


def fio_measurement(out: dict[str, Any], res: ChildResult) -> Measurement:
    """A `Measurement` from fio's figures (`parse_fio_json`, `fiofile.phase_figures`) and the
    child's rusage. A phase fio timed at 0 s has no rate: it fails, never reads as 0 MiB/s."""
    if out["seconds"] <= 0:
        raise WorkloadFailed(
            f"fio timed the run at {out['seconds']} s ({out['bytes']} bytes): no rate to report"
        )
    return Measurement(
        value=out["bytes"] / MiB / out["seconds"],
        seconds=out["seconds"],
        bytes=out["bytes"],
        ops=out["ios"],
        app_user_s=res.user_s,
        app_sys_s=res.sys_s,
        app_ctx=res.ctx,
        extra={k: v for k, v in out.items() if k not in ("bytes", "seconds", "ios")},
    )


def fio_binary() -> str:
    path = shutil.which("fio")
    if path is None:
        raise WorkloadFailed("fio not found; apt-get install fio")
    return path


_FIO_ERR = re.compile(r"err=\s*(\d+)/[^,]*,\s*func=([^,]+?)(?:, error=|$)")


def fio_error(stdout: str, stderr: str) -> str:
    """One line: what fio could not do and the errno's text (fio wraps its own message)."""
    m = _FIO_ERR.search(stderr) or _FIO_ERR.search(stdout)
    if m:
        func = re.sub(r"\(/\S*/", "(", m.group(2).strip())  # keep the file name, not the path
        return f"{func}: {os.strerror(int(m.group(1)))}"
    for text in (stderr, stdout):
        for line in text.splitlines():
            low = line.lower()
            if "error" in low or "no space" in low or "err=" in low:
                return line.strip().removeprefix("fio: ")
    lines = [ln for ln in (stderr or stdout).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "fio failed without a message"


def _rand(name: str, rw: str, what: str) -> list[FioJob]:
    jobs = []
    for bs in ("4k", "8k"):
        for direct in (False, True):
            mode = "O_DIRECT" if direct else "buffered"
            jobs.append(
                FioJob(
                    name,
                    f"{bs}-{'direct' if direct else 'buffered'}",
                    f"random {what}, {bs.upper().replace('K', ' KiB')} records, {mode}"
                    + (" (seed 004: 8 KiB O_DIRECT)" if direct and bs == "8k" else "")
                    + (
                        " without fsync: kernel drivers report page-cache speed, FUSE drivers"
                        " without a writeback cache write through to their daemon"
                        if rw == "randwrite" and not direct
                        else ""
                    ),
                    rw=rw,
                    bs=bs,
                    direct=direct,
                    cache="direct" if direct else ("cold" if rw == "randread" else "none"),
                    io_limit=RANDOM_IO_BYTES * (2 if bs == "8k" else 1),
                )
            )
    return jobs


FIO_JOBS: list[FioJob | SeqLoop] = [
    SeqLoop(
        FioJob(
            "seq-write",
            "fsync",
            "sequential write of a new file, 1 MiB records by a write() loop, fsync at the "
            "end (dd bs=1M conv=fsync)",
            rw="write",
            end_fsync=True,
            fresh_file=True,
        )
    ),
    SeqLoop(
        FioJob(
            "seq-write",
            "buffered",
            "sequential write of a new file, 1 MiB records by a write() loop, no "
            "fsync: what the page cache (or the FUSE daemon) absorbs",
            rw="write",
            fresh_file=True,
        )
    ),
    SeqLoop(
        FioJob(
            "seq-read",
            "cold",
            "sequential read, 1 MiB records by a read() loop (dd bs=1M), after sync, "
            "drop_caches and (FUSE) a remount; verified by the device's read counter",
            rw="read",
            cache="cold",
        )
    ),
    FioJob(
        "seq-read",
        "warm",
        "sequential read, 1 MiB records, of a file just written (Iozone's read after its "
        "write): what the driver keeps cached of what it wrote",
        rw="read",
        cache="warm",
        warm_by="write",
    ),
    FioJob(
        "rewrite",
        "fsync",
        "sequential overwrite of an existing file, 1 MiB records, final fsync (Iozone rewrite)",
        rw="write",
        end_fsync=True,
    ),
    FioJob(
        "reread",
        "warm",
        "a second sequential read right after the first, 1 MiB records (Iozone reread)",
        rw="read",
        cache="warm",
    ),
    *_rand("rand-read", "randread", "read"),
    *_rand("rand-write", "randwrite", "write"),
    FioJob(
        "stride-read",
        "8k-64k",
        "strided read: 8 KiB records every 64 KiB, cold (Iozone strided read)",
        rw="read:56k",
        bs="8k",
        cache="cold",
        io_fraction=8 / 64,  # one pass over the file: 8 KiB of every 64 KiB
    ),
]


def with_numjobs(job: J, numjobs: int) -> J:
    """The job with `numjobs` parallel jobs (a FioJob, or any frozen job record with that
    field: the Iozone cells run theirs on threads)."""
    return job if numjobs == job.numjobs else replace(job, numjobs=numjobs)  # type: ignore[attr-defined]


# fio engines a workload may name (`:io_uring`): psync is synchronous (one I/O per call, depth
# 1); libaio (KDiskMark's) and io_uring keep `iodepth` I/Os in flight.
ENGINES = ("psync", "libaio", "io_uring")
MAX_IODEPTH = 1024
MAX_MOD_NUMJOBS = 64


@dataclass(frozen=True)
class IoParams:
    """What `NAME[/VARIANT]:qdN:jN:ENGINE` asks of a fio job (None: as the job has it)."""

    iodepth: int | None = None
    ioengine: str | None = None
    numjobs: int | None = None


def parse_io_params(spec: str, text: str) -> IoParams:
    """`qd32:io_uring` (after a workload's name) -> IoParams; anything else is refused with one
    line saying what is accepted (UsageError, exit 2)."""
    depth: int | None = None
    engine: str | None = None
    jobs: int | None = None
    for tok in text.split(":"):
        t = tok.strip().lower()
        m = re.fullmatch(r"(qd|j|t)(\d+)", t)
        _refuse_twice(spec, t, m, depth, engine, jobs)
        if t in ENGINES and engine is None:
            engine = t
        elif m and m.group(1) == "qd" and depth is None:
            depth = int(m.group(2))
            if not 1 <= depth <= MAX_IODEPTH:
                raise UsageError(f"{spec}: queue depth {depth} is out of range 1-{MAX_IODEPTH}")
        elif m and m.group(1) in ("j", "t") and jobs is None:
            jobs = int(m.group(2))
            if not 1 <= jobs <= MAX_MOD_NUMJOBS:
                raise UsageError(f"{spec}: {jobs} jobs is out of range 1-{MAX_MOD_NUMJOBS}")
        else:
            raise UsageError(
                f"{spec}: {tok!r} is not a fio parameter; give qdN (queue depth), jN or tN "
                f"(jobs), or an engine ({', '.join(ENGINES)}), e.g. rand-read/4k-direct:qd32"
            )
    if engine == "psync" and depth is not None and depth > 1:
        raise UsageError(
            f"{spec}: psync is synchronous (depth 1); qd{depth} needs libaio or io_uring"
        )
    return IoParams(depth, engine, jobs)


def _refuse_twice(
    spec: str,
    t: str,
    m: re.Match[str] | None,
    depth: int | None,
    engine: str | None,
    jobs: int | None,
) -> None:
    """`rand-read:qd32:qd16` sets one thing twice: say so, not that qd16 is unknown."""
    kind = "qd" if m and m.group(1) == "qd" else "j" if m else "engine" if t in ENGINES else ""
    before = {"qd": depth and f"qd{depth}", "j": jobs and f"j{jobs}", "engine": engine}.get(kind)
    if before:
        what = {"qd": "queue depth", "j": "job count", "engine": "engine"}[kind]
        raise UsageError(f"{spec}: {t!r} sets the {what} again ({before} before it); give one")


def with_io(job: FioJob, mods: IoParams) -> FioJob:
    """The job at the depth, engine and job count asked. A depth above 1 on a psync job takes
    libaio (KDiskMark's engine), since psync would run it at depth 1 whatever it is told."""
    depth = mods.iodepth if mods.iodepth is not None else job.iodepth
    engine = mods.ioengine or ("libaio" if depth > 1 and job.ioengine == "psync" else job.ioengine)
    if engine == "psync" and depth > 1:
        # fio runs psync at depth 1 whatever iodepth says: a Q32 label would not be true.
        raise UsageError(
            f"{job.id}:psync: psync is synchronous (depth 1), and this test's queue depth is "
            f"{depth}; use libaio or io_uring"
        )
    out = job
    if (depth, engine) != (job.iodepth, job.ioengine):
        # The variant names what changed; libaio taken for a depth is implied by "-qdN".
        named_engine = mods.ioengine is not None and engine != job.ioengine
        suffix = (f"-qd{depth}" if depth != job.iodepth else "") + (
            f"-{engine}" if named_engine else ""
        )
        buffered = engine == "libaio" and not job.direct and depth > 1
        how = f"; queue depth {depth}, {engine}" + (
            " (buffered: libaio completes it in the submitting call, so the depth is not reached)"
            if buffered
            else ""
        )
        out = replace(
            job,
            variant=job.variant + suffix,
            description=job.description + how,
            iodepth=depth,
            ioengine=engine,
        )
    return with_numjobs(out, mods.numjobs) if mods.numjobs else out
