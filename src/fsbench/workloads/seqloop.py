"""seq-read/cold and seq-write as dd does them: a native read() or write() loop (dd, cp, cat).

Its fio job (fio.py) keeps everything but the timed run: the files, their layout and sizes,
the cache state, the fsync, the id and the form fio's client mode runs. Why a loop of its own
rather than fio's psync job: docs/figures.md (the peers) and bench/peers.py. The reads: no fio
process contends for the CPUs a RAM-backed cold read is bound by. The writes: a 1 s sample of
a fast subject is several passes over its file, and each fio process costs ~0.25 s of its own
start and stop around them (fio 3.33 here) -- the budget's rounds went to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from fsbench.errors import WorkloadFailed
from fsbench.workloads.base import IO_EXTRAS, Measurement, Target, Timed

MiB = 1024 * 1024
KiB = 1024
# A bound on one read, so a pathologically slow driver cannot stall the run (a fio job's too).
READ_TIMEOUT_S = 180

# What the reader or writer is, in its params: a loop of read() or write() calls as dd makes.
READ_LOOP = "read() loop"
WRITE_LOOP = "write() loop"


@dataclass(frozen=True)
class SeqLoop:
    """A sequential read or write as dd, cp and cat do it: read() or write() of `bs` records at
    the file position, one thread per job, timed in C (fsbench._iocell) from the open to the
    close (the fsync its fio job asks for included), with no process started inside a sample.

    Everything but the timed run is its fio job's (`fio`): the files, their layout and sizes,
    the cache state, a new file or an overwrite, the id, the clients' form. fio's own psync
    jobs measure the same on a quiet machine (docs/figures.md); the native loop has no fio
    parent process, helper thread or job process, nor their ~0.25 s start per pass."""

    merge_extra: ClassVar[dict[str, Any]] = IO_EXTRAS

    fio: Any  # a fio.FioJob (fio.py imports this module: typed loosely, no cycle)
    # The reader is fsbench's own thread, not a process named fio (the trace's wake-ups).
    app_comms = None

    def __getattr__(self, name: str) -> Any:
        # Only reached for what SeqLoop does not define: id, name, cache, fileset, numjobs...
        if name == "fio":
            raise AttributeError(name)
        return getattr(self.fio, name)

    def with_numjobs(self, numjobs: int) -> SeqLoop:
        return replace(self, fio=self.fio.with_numjobs(numjobs))

    def with_io(self, mods: Any) -> Any:
        """Jobs alone keep the read() loop; a queue depth or an engine is fio's to run."""
        if mods.iodepth is None and mods.ioengine is None:
            return self.with_numjobs(mods.numjobs) if mods.numjobs else self
        return self.fio.with_io(mods)

    def fio_job(self) -> Any:
        """fio's client/server mode (--clients) runs the job as fio, with fio's reader."""
        return self.fio

    def _native(self, target: Target) -> bool:
        # An existing file on a read-only volume need not be whole records: fio reads it.
        return not target.read_only

    def params(self, target: Target) -> dict[str, Any]:
        p = self.fio.params(target)
        role = "writer" if self.fio.is_write else "reader"
        if not self._native(target):
            return {**p, role: "fio psync"}
        loop = WRITE_LOOP if self.fio.is_write else READ_LOOP
        return {**p, "engine": "native", "ioengine": "sync", role: loop}

    def prepare(self, target: Target) -> None:
        self.fio.prepare(target)

    def run(self, target: Target) -> Measurement:
        if not self._native(target):
            return self.fio.run(target)
        from fsbench import _iocell  # built by setup.py

        job, size, rec = self.fio, self.fio.per_job_size(target), parse_bs(self.fio.bs)
        files = [[f] for f in job._files(target)]
        write = bool(job.is_write)
        return cell_measurement(
            lambda: _iocell.run(
                files,
                write,
                "seq",
                size // rec * rec,
                rec,
                # A write's fsync is inside the timed run, as fio's end_fsync and dd's
                # conv=fsync have it; a new file is created (prepare removed the old one).
                fsync=bool(write and job.end_fsync),
                create=write,
                timeout_s=READ_TIMEOUT_S,
                syscall="write" if write else "read",
            ),
            job.id,
            # How many files the writes synced: the fsync the variant names was made.
            keep=("fsyncs",) if write else (),
        )


def parse_bs(bs: str) -> int:
    """fio's block size text ("1M", "4k", "8192") in bytes."""
    units = {"k": KiB, "m": MiB, "g": 1024 * MiB}
    text = bs.strip().lower()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def checked_cell(r: dict[str, Any], what: str) -> dict[str, Any]:
    """One run's figures of the native `_iocell`, or the failed call, its file and errno."""
    if r["errno"]:
        where = os.path.basename(r["path"]) if r["path"] else what
        raise WorkloadFailed(f"{r['func']} {where}: {os.strerror(r['errno'])}")
    return r


def cell_measurement(
    call: Callable[[], dict[str, Any]], what: str, keep: tuple[str, ...] = ()
) -> Measurement:
    """One timed run of the native `_iocell` (`call`) as a `Measurement`, with this process's
    CPU across it; `keep`: figures of the cell's own kept in its extra. No I/O timed is a
    failure, never a zero rate."""
    with Timed() as timed:
        r = call()
    checked_cell(r, what)
    seconds = r["ns"] / 1e9
    if seconds <= 0 or r["bytes"] <= 0:
        raise WorkloadFailed(f"{what}: no I/O timed ({r['bytes']} B in {r['ns']} ns)")
    return Measurement.rate(
        r["bytes"] / MiB,
        seconds,
        what,
        timed.used,
        bytes=r["bytes"],
        ops=r["ops"],
        extra={
            "iops": r["ops"] / seconds,
            "lat_us": {
                k: r[f"{n}_ns"] / 1e3
                for k, n in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999"))
            },
            "lat_mean_us": r["mean_ns"] / 1e3,
            "lat_max_us": r["max_ns"] / 1e3,
            **{k: r[k] for k in keep},
        },
    )
