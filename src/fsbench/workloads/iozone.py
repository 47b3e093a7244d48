"""The Iozone-style matrix (seed 003): seven operations over file sizes × record sizes, run by fio.

Each cell is one `IozoneJob` (a `FioJob` with the matrix coordinates as fields), so a result
carries `workload="iozone"` and `params` with `op`, `file_size` and `record_size`.

What each operation does (fio, psync, one record per system call):
- write:       new files (deleted before the sample), sequential, fsync when each file is
               closed (Iozone -e: the rate is what reached the device, not the page cache)
- rewrite:     the same, over existing files
- read:        sequential, cold (sync, drop_caches, FUSE remount; verified by the runner)
- reread:      sequential, of a file just read (warm): the same file read again and again,
               as Iozone's reread does, so a file that fits a CPU cache shows it (the knee)
- rand-read:   every record of each file once, in random order, cold
- rand-write:  every record of each file once, in random order, over existing files, fsync
- stride-read: every record of each file once, in a strided order (records 0, S, 2S, ...,
               then 1, S+1, ...: S = 8 records), cold; replayed from a generated fio iolog,
               because fio's `rw=read:skip` wraps around the first file instead

A 64 KiB file is written in microseconds, far below what a timer can tell apart, so a sample
works on several files of the cell's size (`files` in params) until it moves at least
`sample_bytes`; reread reads its one file that many times instead (`passes`).

Cells that do not fit the image budget (Target.size) are reported as unsupported by `prepare`,
since the image size is known only at run time; `matrix_jobs(..., budget=)` cuts them up front
for callers that know it.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fsbench.units import size_tag, size_text
from fsbench.workloads.base import Measurement, Target, Unsupported, WorkloadFailed, measured_child
from fsbench.workloads.fio import FIO_RUNTIME_CAP_S, FioJob, fio_binary, fio_error

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

OPS: tuple[str, ...] = (
    "write",
    "rewrite",
    "read",
    "reread",
    "rand-read",
    "rand-write",
    "stride-read",
)

# The seed's ranges: file sizes 64 KiB … 2 GiB (×4 steps, plus the seed's 2 GiB end point),
# record sizes 8 KiB … 128 MiB (×4 steps).
FULL_FILE_SIZES: tuple[int, ...] = (
    64 * KiB,
    256 * KiB,
    1 * MiB,
    4 * MiB,
    16 * MiB,
    64 * MiB,
    256 * MiB,
    1 * GiB,
    2 * GiB,
)
FULL_RECORD_SIZES: tuple[int, ...] = tuple(8 * KiB * 4**i for i in range(8))  # 8 KiB … 128 MiB

# A few minutes for two drivers on a 1 GiB RAM image with --repeat 3 (measured; see the suite).
QUICK_FILE_SIZES: tuple[int, ...] = (64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB)
QUICK_RECORD_SIZES: tuple[int, ...] = (8 * KiB, 128 * KiB, 2 * MiB)

# Strided read visits records 0, S, 2S, … then 1, S+1, …: S records apart.
STRIDE_RECORDS = 8
# Work per sample: enough bytes that fio's millisecond runtime is not the resolution limit
# for fast subjects, few enough that a two-driver quick run stays within minutes. Warm
# rereads run at memory speed and cost nothing to repeat, so they get more.
SAMPLE_BYTES = 32 * MiB
REREAD_SAMPLE_BYTES = 256 * MiB
# fio reports its runtime in whole milliseconds: below this (±5 %) a rate is coarse, and
# says so.
SHORT_SAMPLE_MS = 20
MAX_FILES = 1024  # per sample: 64 KiB × 1024 = 64 MiB; more files only add open/close cost
FILESET_PREFIX = "iozone-"


@dataclass(frozen=True)
class OpSpec:
    rw: str  # fio's rw=
    cache: str  # what the runner prepares: cold | warm | none
    fsync: bool  # fsync each file on close (timed)
    fresh: bool  # delete the files first: a new file each time
    what: str  # for descriptions


OP_SPECS: dict[str, OpSpec] = {
    "write": OpSpec("write", "none", True, True, "sequential write of new files"),
    "rewrite": OpSpec("write", "none", True, False, "sequential overwrite of existing files"),
    "read": OpSpec("read", "cold", False, False, "sequential read, cold cache"),
    "reread": OpSpec("read", "warm", False, False, "sequential read of a file just read"),
    "rand-read": OpSpec("randread", "cold", False, False, "random read, cold cache"),
    "rand-write": OpSpec("randwrite", "none", True, False, "random overwrite"),
    "stride-read": OpSpec(
        "read", "cold", False, False, f"strided read ({STRIDE_RECORDS} records apart), cold"
    ),
}


human_size = size_text  # one size formatter for everything (fsbench.units)


def valid_cell(op: str, file_size: int, record_size: int) -> bool:
    """Record ≤ file; a strided read needs at least two strides, or it is just sequential."""
    if record_size > file_size:
        return False
    return not (op == "stride-read" and file_size // record_size < 2 * STRIDE_RECORDS)


@dataclass(frozen=True)
class IozoneJob(FioJob):
    """One matrix cell: `op` on files of `file_size` (FioJob's fixed size: here the size of
    each file) in records of `record_size`."""

    op: str = "write"
    record_size: int = 8 * KiB
    sample_bytes: int = SAMPLE_BYTES
    # Hundreds of cells: a shorter floor per sample keeps the quick suite quick (each cell
    # already works through several files).
    min_sample_s: float = 0.25
    # Cells follow one another over the same files and pages: the matrix warms itself.
    warmup: int = 0

    # -- geometry ------------------------------------------------------------------------
    @property
    def fsize(self) -> int:
        """The cell's file size (always set for a matrix cell)."""
        if self.file_size is None:
            raise ValueError(f"{self.id}: a matrix cell needs a file size")
        return self.file_size

    def files_for(self, target: Target) -> int:
        """Files of the cell's size per job and sample: as many as make `sample_bytes`,
        bounded by MAX_FILES and by what the image budget holds. reread: always one."""
        if self.op == "reread":
            return 1
        want = math.ceil(self.sample_bytes / self.fsize)
        fits = target.size // (self.fsize * self.numjobs)
        return max(1, min(want, MAX_FILES, fits))

    def passes(self) -> int:
        """How often a sample reads each file: reread repeats its one file, as Iozone does."""
        if self.op != "reread":
            return 1
        return max(1, math.ceil(self.sample_bytes / self.fsize))

    def per_job_size(self, target: Target) -> int:
        return self.fsize * self.files_for(target)

    def params(self, target: Target) -> dict[str, Any]:
        spec = OP_SPECS[self.op]
        p: dict[str, Any] = {
            "engine": "fio",
            "variant": self.variant,
            "op": self.op,
            "file_size": self.fsize,
            "record_size": self.record_size,
            "rw": spec.rw,
            "block_size": size_tag(self.record_size),
            "files": self.files_for(target),
            "passes": self.passes(),
            "numjobs": self.numjobs,
            "direct": False,
            "fsync": "close" if spec.fsync else "none",
            "cache": spec.cache,
            "ioengine": "psync",
        }
        if self.op == "stride-read":
            p["stride_records"] = STRIDE_RECORDS
        return p

    # -- files -----------------------------------------------------------------------------
    def _files(self, target: Target) -> list[str]:
        # fio names the files of job j `NAME.j.f` when nrfiles is given.
        n = self.files_for(target)
        return [
            os.path.join(target.workdir, f"{self.fileset}.{j}.{f}")
            for j in range(self.numjobs)
            for f in range(n)
        ]

    def _drop_other_filesets(self, target: Target) -> None:
        # One cell's file size at a time: the matrix' files together would not fit the image.
        try:
            names = os.listdir(target.workdir)
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith(FILESET_PREFIX) and not name.startswith(self.fileset + "."):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(target.workdir, name))

    def check_fits(self, target: Target) -> None:
        need = self.fsize * self.numjobs
        if need > target.size:
            raise Unsupported(
                f"file size {human_size(self.fsize)}"
                + (f" × {self.numjobs} jobs" if self.numjobs > 1 else "")
                + f" exceeds the image budget {human_size(target.size)}; use a larger --size"
            )
        if self.op == "stride-read" and self.numjobs > 1:
            raise Unsupported("stride-read replays one access log: it takes no --numjobs > 1")

    # -- fio command lines ---------------------------------------------------------------
    def _common(self) -> list[str]:
        return [
            fio_binary(),
            "--output-format=json",
            "--ioengine=psync",
            "--group_reporting=1",
            # The runner, not fio, decides what is cached: no fadvise before the job.
            "--invalidate=0",
            "--fallocate=none",
            f"--runtime={FIO_RUNTIME_CAP_S}",
            "--randrepeat=1",
            # Saves fio's ~0.15 s TSC calibration per start; clock_gettime is a vDSO call.
            "--clocksource=clock_gettime",
        ]

    def _fileset_args(self, target: Target, nfiles: int) -> list[str]:
        return [
            f"--name={self.fileset}",
            f"--directory={target.workdir}",
            f"--nrfiles={nfiles}",
            f"--filesize={self.fsize}",
            f"--size={nfiles * self.fsize}",
            f"--numjobs={self.numjobs}",
            "--file_service_type=sequential",
            # One open file at a time, so fsync_on_close syncs each file as it is finished.
            "--openfiles=1",
        ]

    def argv(
        self,
        target: Target,
        rw: str | None = None,
        end_fsync: bool | None = None,
        direct: bool | None = None,
        whole: bool = False,
    ) -> list[str]:
        """The measured run; with `rw` given, an untimed helper over the whole file set
        (layout with rw='write', warming with rw='read') in large records."""
        if rw is not None:
            bs = min(MiB, self.fsize)
            return [
                *self._common(),
                *self._fileset_args(target, self.files_for(target)),
                f"--rw={rw}",
                f"--bs={bs}",
                f"--end_fsync={int(bool(end_fsync))}",
            ]
        spec = OP_SPECS[self.op]
        argv = [*self._common(), f"--bs={self.record_size}"]
        if self.op == "stride-read":
            return [
                *argv,
                f"--name={self.fileset}",
                f"--read_iolog={self._iolog_path()}",
                "--replay_no_stall=1",  # as fast as possible, not at recorded times
            ]
        argv += self._fileset_args(target, self.files_for(target))
        if self.passes() > 1:
            argv.append(f"--loops={self.passes()}")
        argv.append(f"--rw={spec.rw}")
        if spec.fresh:
            argv.append("--create_on_open=1")  # the create is part of writing a new file
        if spec.fsync:
            argv.append("--fsync_on_close=1")
        return argv

    # -- strided access log --------------------------------------------------------------
    def _iolog_path(self) -> str:
        name = f"fsbench-{os.getpid()}-{self.fileset}-{size_tag(self.record_size)}.iolog"
        return os.path.join(tempfile.gettempdir(), name)

    def stride_log(self, target: Target) -> str:
        """A fio v2 iolog: each file opened, its records read in strided order, closed."""
        records = self.fsize // self.record_size
        lines = ["fio version 2 iolog"]
        files = self._files(target)
        lines += [f"{f} add" for f in files]
        for f in files:
            lines.append(f"{f} open")
            for start in range(STRIDE_RECORDS):
                for r in range(start, records, STRIDE_RECORDS):
                    lines.append(f"{f} read {r * self.record_size} {self.record_size}")
            lines.append(f"{f} close")
        return "\n".join(lines) + "\n"

    # -- workload protocol ---------------------------------------------------------------
    def prepare(self, target: Target) -> None:
        """Untimed: files removed for a new-file write, laid out for everything else."""
        self.check_fits(target)
        os.makedirs(target.workdir, exist_ok=True)
        self._drop_other_filesets(target)
        files = self._files(target)
        if OP_SPECS[self.op].fresh:
            for f in files:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)
            # Commit the deletions now, or the first timed fsync pays for them.
            _syncfs(target.workdir)
            return
        size = self.fsize
        if not all(os.path.exists(f) and os.path.getsize(f) >= size for f in files):
            res = measured_child(self.argv(target, rw="write", end_fsync=True))
            if res.returncode != 0:
                why = fio_error(res.stdout, res.stderr)
                raise WorkloadFailed(f"laying out files for {self.id}: {why}")
        if OP_SPECS[self.op].cache == "warm":
            # Read once so the measured reread finds the file cached (verified by the runner).
            res = measured_child(self.argv(target, rw="read"))
            if res.returncode != 0:
                raise WorkloadFailed(f"warming {self.id}: {fio_error(res.stdout, res.stderr)}")

    def run(self, target: Target) -> Measurement:
        if self.op == "stride-read":
            path = self._iolog_path()
            with open(path, "w") as f:
                f.write(self.stride_log(target))
            try:
                m = super().run(target)
            finally:
                os.unlink(path)
        else:
            m = super().run(target)
        ms = round(m.seconds * 1000)
        if ms <= 0:
            raise WorkloadFailed("fio timed the sample at 0 ms: too fast to measure")
        if ms < SHORT_SAMPLE_MS:
            m.flags.append(
                f"short-sample: fio timed {ms} ms; at its 1 ms resolution the rate is "
                f"coarse (±{100 / ms:.0f} %)"
            )
        return m


def _syncfs(path: str) -> None:
    """syncfs(2) on the file system holding path (only that one); sync(2) where unavailable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            os.sync()
    except (OSError, AttributeError):
        os.sync()
    finally:
        os.close(fd)


def make_job(op: str, file_size: int, record_size: int) -> IozoneJob:
    if op not in OP_SPECS:
        raise ValueError(f"unknown iozone op {op!r}; ops: {', '.join(OPS)}")
    spec = OP_SPECS[op]
    variant = f"{op}-{size_tag(file_size)}-{size_tag(record_size)}"
    return IozoneJob(
        name="iozone",
        variant=variant,
        description=(
            f"Iozone {op}: {spec.what}, {human_size(file_size)} files in "
            f"{human_size(record_size)} records" + (", fsync on close" if spec.fsync else "")
        ),
        rw=spec.rw,
        bs=size_tag(record_size),
        end_fsync=False,
        cache=spec.cache,
        fileset=f"{FILESET_PREFIX}{size_tag(file_size)}",
        fresh_file=spec.fresh,
        op=op,
        file_size=file_size,
        record_size=record_size,
        sample_bytes=REREAD_SAMPLE_BYTES if op == "reread" else SAMPLE_BYTES,
    )


def matrix_jobs(
    file_sizes: Iterable[int],
    record_sizes: Iterable[int],
    ops: Iterable[str] = OPS,
    budget: int | None = None,
) -> list[IozoneJob]:
    """Every valid cell, ordered file size → record size → op.

    That order lets each cell's write lay out the files its rewrite, reads and random writes
    then use, so no sample waits for a separate layout. `budget` (bytes the files may take)
    drops cells whose file does not fit; without it they are reported unsupported at run time.
    """
    ops = list(ops)
    records = sorted(record_sizes)
    jobs = []
    for fs in sorted(file_sizes):
        if budget is not None and fs > budget:
            continue
        for rs in records:
            for op in ops:
                if valid_cell(op, fs, rs):
                    jobs.append(make_job(op, fs, rs))
    return jobs


FULL_JOBS: list[IozoneJob] = matrix_jobs(FULL_FILE_SIZES, FULL_RECORD_SIZES)
# The quick cells are full-matrix cells (same ids, same work per sample), so results of the
# two suites match in `diff`.
QUICK_JOBS: list[IozoneJob] = matrix_jobs(QUICK_FILE_SIZES, QUICK_RECORD_SIZES)


def describe_grid(file_sizes: Iterable[int], record_sizes: Iterable[int]) -> str:
    fs, rs = sorted(file_sizes), sorted(record_sizes)
    return (
        f"files {', '.join(human_size(x) for x in fs)}; "
        f"records {', '.join(human_size(x) for x in rs)}"
    )


# -- suites ------------------------------------------------------------------------------------
QUICK_GROUP = "iozone-quick"

# The workloads of the five seeds, each with the parameters its author used, scaled to the
# image. Names are resolved when a run starts, so workloads other modules register (copy-large,
# copy-small, compile, web-serve) are found once they exist.
SEEDS_WORKLOADS: list[str] = [
    "tree-hash/cold",  # 000: XXH128 over a tree, each driver in turn
    "seq-write/fsync",  # 001: dd bs=1M write (conv=fsync) on a RAM disk
    "seq-read/cold",  # 001: dd bs=1M read back
    "copy-large",  # 002: one large file copied from a kernel file system
    "copy-small",  # 002: many 1 MiB files copied
    QUICK_GROUP,  # 003: Iozone's seven operations over file × record sizes
    "compile",  # 004: configure, make -jN, install of a generated C project
    "web-serve",  # 004: HTTP transfer rate vs file size
    "rand-read/8k-direct",  # 004: 8 KiB random reads with O_DIRECT
    "metadata/chmod-flat",  # 004: chmod on every file of a directory
]


def _matrix_info(file_sizes: Iterable[int], record_sizes: Iterable[int], jobs: list) -> dict:
    return {
        "ops": list(OPS),
        "file_sizes": sorted(file_sizes),
        "record_sizes": sorted(record_sizes),
        "cells": len(jobs),
    }


def suites() -> dict[str, dict]:
    """The suites this module defines, in registry.SUITES' shape (plus a `matrix` key)."""
    return {
        "iozone": {
            "description": (
                "Iozone matrix (seed 003): write, rewrite, read, reread, random read/write, "
                f"strided read; {describe_grid(FULL_FILE_SIZES, FULL_RECORD_SIZES)}; record ≤ "
                "file; files larger than the image budget are reported unsupported (use "
                "--size 6G for all); long: hours for two FUSE/kernel drivers"
            ),
            "workloads": ["iozone"],
            "matrix": _matrix_info(FULL_FILE_SIZES, FULL_RECORD_SIZES, FULL_JOBS),
        },
        "iozone-quick": {
            "description": (
                "a small Iozone matrix: the seven operations over "
                f"{describe_grid(QUICK_FILE_SIZES, QUICK_RECORD_SIZES)}; a few minutes for "
                "two drivers with --size 1G --repeat 3"
            ),
            "workloads": [QUICK_GROUP],
            "matrix": _matrix_info(QUICK_FILE_SIZES, QUICK_RECORD_SIZES, QUICK_JOBS),
        },
        "seeds": {
            "description": (
                "the experiments of all five seeds with their parameters, scaled to the image: "
                "tree hash (000), dd-style write/read (001), large/small file copy (002), "
                "iozone-quick (003), compile, web serving, 8 KiB O_DIRECT random read, chmod "
                "of a directory (004)"
            ),
            "workloads": list(SEEDS_WORKLOADS),
        },
    }


def groups() -> dict[str, list[str]]:
    """Names a suite may list that stand for many generated workload ids."""
    return {QUICK_GROUP: [j.id for j in QUICK_JOBS]}
