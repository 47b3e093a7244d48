"""The Iozone-style matrix (docs/iozone.md): seven operations over file sizes × record sizes.

Each cell is one `IozoneJob` with the matrix coordinates as fields, so a result carries
`workload="iozone"` and `params` with `op`, `file_size` and `record_size`. A cell's I/O runs in
fsbench's own native executor (`fsbench._iocell`, src/fsbench/native/iocell.c), the way Iozone
itself does it: no process per cell, pread/pwrite of one record per system call, the clock
read around the I/O only (opens, creates, fsyncs and closes of the files included), the GIL
released. `--numjobs N` runs N threads, each on its own files, released together. Under
`--clients` a cell runs through fio's client/server mode instead, as the `FioJob` its
`fio_job()` composes (stride-read has no fio form there: see `fio_job`).

What each operation does:
- write:       new files (deleted before the sample), sequential, fsync when each file is
               closed (Iozone -e: the rate is what reached the device, not the page cache)
- rewrite:     the same, over existing files
- read:        sequential, cold (sync, drop_caches, FUSE remount; verified by the runner)
- reread:      sequential, of a file just read (warm): the same file read again and again,
               as Iozone's reread does, so a file that fits a CPU cache shows it (the knee)
- rand-read:   every record of each file once, in random order, cold
- rand-write:  every record of each file once, in random order, over existing files, fsync
- stride-read: every record of each file once, in a strided order (records 0, S, 2S, ...,
               then 1, S+1, ...: S = 8 records), cold

The random order is one seeded permutation, the same for every subject and sample. A 64 KiB
file is written in microseconds, so a sample works on several files of the cell's size
(`files` in params) until it moves at least `sample_bytes`; reread reads its one file that
many times instead (`passes`). Samples' extras: `iops`, `lat_us` (p50, p99, p99.9 of the
per-record times: one clock read after each record), `lat_mean_us`, `lat_max_us`, and the
`opens` and `fsyncs` the sample made.

Cells that do not fit the image budget (Target.size) are reported as unsupported by `prepare`,
since the image size is known only at run time; `matrix_jobs(..., budget=)` cuts them up front
for callers that know it.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.units import size_tag, size_text
from fsbench.workloads.base import IO_EXTRAS, Declared, Measurement, Target
from fsbench.workloads.fio import FIO_RUNTIME_CAP_S, FioJob, with_numjobs
from fsbench.workloads.seqloop import cell_measurement, checked_cell

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

# Iozone's own quick range (`iozone -a -n 64k -g 16m`, what bench/matrix_vs_iozone.py
# measures against) in ×4 steps. A 64 MiB row took 60 % of the I/O of the default two-driver
# run (ntfs-3g writing 64 MiB files at 3 samples each), for a knee the 16 MiB row shows already.
QUICK_FILE_SIZES: tuple[int, ...] = (64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB)
QUICK_RECORD_SIZES: tuple[int, ...] = (8 * KiB, 128 * KiB, 2 * MiB)

# Strided read visits records 0, S, 2S, … then 1, S+1, …: S records apart.
STRIDE_RECORDS = 8
# Work per sample: at least this many bytes. The executor's clock resolves nanoseconds, so
# this is not a timer's limit (fio's whole milliseconds needed 32 MiB, 256 MiB for rereads)
# but a floor against one-file noise: a 64 KiB cell works through 128 files, a 16 MiB one
# through its one file, as Iozone does; the runner's repeats give the interval.
SAMPLE_BYTES = 8 * MiB
REREAD_SAMPLE_BYTES = SAMPLE_BYTES
# Laying out and warming files (untimed) goes in records this large.
LAYOUT_RECORD = MiB
MAX_FILES = 1024  # per sample: 64 KiB × 1024 = 64 MiB; more files only add open/close cost
FILESET_PREFIX = "iozone-"


@dataclass(frozen=True)
class OpSpec:
    rw: str  # fio's rw= for the same access (params, and the --clients form)
    cache: str  # what the runner prepares: cold | warm | none
    fsync: bool  # fsync each file on close (timed)
    fresh: bool  # delete the files first: a new file each time
    what: str  # for descriptions
    order: str = "seq"  # the record order: seq | random | stride

    @property
    def write(self) -> bool:
        return "write" in self.rw


OP_SPECS: dict[str, OpSpec] = {
    "write": OpSpec("write", "none", True, True, "sequential write of new files"),
    "rewrite": OpSpec("write", "none", True, False, "sequential overwrite of existing files"),
    "read": OpSpec("read", "cold", False, False, "sequential read, cold cache"),
    "reread": OpSpec("read", "warm", False, False, "sequential read of a file just read"),
    "rand-read": OpSpec("randread", "cold", False, False, "random read, cold cache", "random"),
    "rand-write": OpSpec("randwrite", "none", True, False, "random overwrite", "random"),
    "stride-read": OpSpec(
        "read",
        "cold",
        False,
        False,
        f"strided read ({STRIDE_RECORDS} records apart), cold",
        "stride",
    ),
}


human_size = size_text  # one size formatter for everything (fsbench.units)


def valid_cell(op: str, file_size: int, record_size: int) -> bool:
    """Record ≤ file; a strided read needs at least two strides, or it is just sequential."""
    if record_size > file_size:
        return False
    return not (op == "stride-read" and file_size // record_size < 2 * STRIDE_RECORDS)


def _native() -> Any:
    from fsbench import _iocell  # built by setup.py

    return _iocell


# A bound on one cell's I/O, so a pathologically slow driver cannot stall the whole run.
CELL_TIMEOUT_S = 3 * FIO_RUNTIME_CAP_S


@dataclass(frozen=True)
class IozoneJob(Declared):
    """One matrix cell: `op` on files of `file_size` in records of `record_size`."""

    merge_extra: ClassVar[dict[str, Any]] = IO_EXTRAS

    name: str
    variant: str = field()
    description: str
    op: str
    file_size: int
    record_size: int
    fileset: str  # the files' name prefix: cells of one file size share their files
    sample_bytes: int = SAMPLE_BYTES
    numjobs: int = 1
    # Hundreds of cells: no floor per sample (each cell already works through several files).
    min_sample_s: float = 0.0
    # Cells follow one another over the same files and pages: the matrix warms itself.
    warmup: int = 0
    # The matrix lays out and deletes its own files: never on a --read-only volume.
    read_only_ok: bool = False

    def with_numjobs(self, numjobs: int) -> IozoneJob:
        """The workload contract's hook: this cell on `numjobs` threads."""
        return with_numjobs(self, numjobs)

    @property
    def spec(self) -> OpSpec:
        return OP_SPECS[self.op]

    @property
    def cache(self) -> str:
        return self.spec.cache

    @property
    def is_write(self) -> bool:
        return self.spec.write

    # -- geometry ------------------------------------------------------------------------
    @property
    def fsize(self) -> int:
        return self.file_size

    def files_for(self, target: Target | None) -> int:
        """Files of the cell's size per job and sample: as many as make `sample_bytes`,
        bounded by MAX_FILES and by what the image budget holds. reread: always one."""
        if self.op == "reread":
            return 1
        want = math.ceil(self.sample_bytes / self.fsize)
        fits = MAX_FILES if target is None else target.size // (self.fsize * self.numjobs)
        return max(1, min(want, MAX_FILES, fits))

    def passes(self) -> int:
        """How often a sample reads each file: reread repeats its one file, as Iozone does."""
        if self.op != "reread":
            return 1
        return max(1, math.ceil(self.sample_bytes / self.fsize))

    def per_job_size(self, target: Target) -> int:
        return self.fsize * self.files_for(target)

    def params(self, target: Target) -> dict[str, Any]:
        spec = self.spec
        p: dict[str, Any] = {
            "engine": "native",
            "variant": self.variant,
            "op": self.op,
            "file_size": self.fsize,
            "record_size": self.record_size,
            "rw": spec.rw,
            "order": spec.order,
            "block_size": size_tag(self.record_size),
            "files": self.files_for(target),
            "passes": self.passes(),
            "numjobs": self.numjobs,
            "direct": False,
            "fsync": "close" if spec.fsync else "none",
            "cache": spec.cache,
            "ioengine": "psync",  # pread/pwrite, one record per call, as fio's psync
        }
        if self.op == "stride-read":
            p["stride_records"] = STRIDE_RECORDS
        return p

    # -- files -----------------------------------------------------------------------------
    def job_files(self, target: Target) -> list[list[str]]:
        """Each job's files, named NAME.JOB.FILE as fio names them."""
        n = self.files_for(target)
        return [
            [os.path.join(target.workdir, f"{self.fileset}.{j}.{f}") for f in range(n)]
            for j in range(self.numjobs)
        ]

    def _files(self, target: Target) -> list[str]:
        return [f for job in self.job_files(target) for f in job]

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

    # -- the I/O ---------------------------------------------------------------------------
    def _io(
        self,
        target: Target,
        write: bool,
        order: str,
        record_size: int,
        passes: int = 1,
        fsync: bool = False,
        create: bool = False,
    ) -> dict[str, Any]:
        r: dict[str, Any] = _native().run(
            self.job_files(target),
            write,
            order,
            self.fsize,
            record_size,
            passes=passes,
            fsync=fsync,
            create=create,
            stride=STRIDE_RECORDS,
            timeout_s=CELL_TIMEOUT_S,
        )
        return checked_cell(r, self.id)

    def prepare(self, target: Target) -> None:
        """Untimed: files removed for a new-file write, laid out for everything else."""
        self.check_fits(target)
        os.makedirs(target.workdir, exist_ok=True)
        self._drop_other_filesets(target)
        files = self._files(target)
        if self.spec.fresh:
            for f in files:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)
            # Commit the deletions now, or the first timed fsync pays for them.
            _syncfs(target.workdir)
            return
        big = min(LAYOUT_RECORD, self.fsize)
        if not all(os.path.exists(f) and os.path.getsize(f) >= self.fsize for f in files):
            try:
                self._io(target, True, "seq", big, fsync=True, create=True)
            except WorkloadFailed as e:
                raise WorkloadFailed(f"laying out files for {self.id}: {e}") from None
        if self.cache == "warm":
            # Read once so the measured reread finds the file cached (verified by the runner).
            try:
                self._io(target, False, "seq", big)
            except WorkloadFailed as e:
                raise WorkloadFailed(f"warming {self.id}: {e}") from None

    def run(self, target: Target) -> Measurement:
        spec = self.spec
        return cell_measurement(
            lambda: self._io(
                target,
                spec.write,
                spec.order,
                self.record_size,
                passes=self.passes(),
                fsync=spec.fsync,
                create=spec.fresh,
            ),
            self.id,
            keep=("opens", "fsyncs"),
        )

    # -- fio's client/server mode ----------------------------------------------------------
    def fio_job(self) -> FioJob:
        """The same cell as a fio job, for `--clients` (fio's client/server mode runs it on
        the client hosts). Strided reads replay a record order from a local log there, which
        fio's client mode cannot take: that form is unsupported, said so per cell."""
        spec = self.spec
        return FioJob(
            name=self.name,
            variant=self.variant,
            description=self.description,
            rw=spec.rw,
            bs=size_tag(self.record_size),
            numjobs=self.numjobs,
            cache=spec.cache,
            fileset=self.fileset,
            fresh_file=spec.fresh,
            file_size=self.fsize,
            nrfiles=self.files_for(None),
            fsync_on_close=spec.fsync,
            unsupported=(
                "stride-read has no form in fio's client mode (its record order is replayed "
                "from a log on this host)"
                if self.op == "stride-read"
                else None
            ),
        )


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
        fileset=f"{FILESET_PREFIX}{size_tag(file_size)}",
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
                "--size 6G for all)"
            ),
            "takes": (
                f"not measured; {len(FULL_JOBS)} cells against iozone-quick's "
                f"{len(QUICK_JOBS)}, with files up to 2 GiB: expect hours for two drivers"
            ),
            "workloads": ["iozone"],
            "matrix": _matrix_info(FULL_FILE_SIZES, FULL_RECORD_SIZES, FULL_JOBS),
        },
        "iozone-quick": {
            "description": (
                "a small Iozone matrix: the seven operations over "
                f"{describe_grid(QUICK_FILE_SIZES, QUICK_RECORD_SIZES)}"
            ),
            "takes": (
                "ext4 + ntfs-3g at defaults (--size 1G, --repeat auto): 2 min 55 s wall, "
                "161 s of it measuring; 134 of 144 results settled, 10 stopped at "
                "--max-repeat (measured 2026-11-23, 2-CPU VM, Linux 6.18, RAM images; "
                "ntfs-3g's times swing by a quarter between runs there)"
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
            "takes": "not measured",
            "workloads": list(SEEDS_WORKLOADS),
        },
    }


def groups() -> dict[str, list[str]]:
    """Names a suite may list that stand for many generated workload ids."""
    return {QUICK_GROUP: [j.id for j in QUICK_JOBS]}
