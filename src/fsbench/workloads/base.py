"""What every workload plug-in provides, and what it is given to run on."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from fsbench.errors import WorkloadFailed


@dataclass(frozen=True)
class AgedTree:
    """The files an aging left on an aged image (aging/recipe.py), as recorded when it was made.

    On an aged subject they are on the volume under `root`; on a fresh subject of the same
    format (`mirror`) the workloads write the same paths and sizes under `root` first, so aged
    and fresh read the same files and their ratio is the layout's (workloads/agedtree.py)."""

    profile: str  # the aging profile the tree is from
    root: str  # absolute: the aged tree on the volume, or where the fresh copy goes
    mirror: bool  # a fresh subject: the files are written fresh before they are read
    files: tuple[tuple[str, int, str], ...]  # (path below the root, size, XXH3-128), walk order
    dirs: tuple[str, ...] = ()  # every directory below the root ("/"-separated)


@dataclass
class Target:
    """Where a workload runs: a lab subject's mount, or a user's directory. What can be done
    to the subject itself (mount, make cold, tear down) is the runner's to ask of it
    (schedule/mounted.py), never the workload's."""

    subject_id: str
    workdir: str
    kind: str  # kernel | fuse | directory | fake
    size: int  # bytes the workload may use
    block_device: str | None = None
    daemon_pid: int | None = None
    fs: str = ""
    capabilities: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0  # --scale: multiplies macro workloads' default amounts (file counts)
    mountpoint: str | None = None  # the file system's root (workdir lives below it)
    read_only: bool = False  # an existing volume mounted read-only: read what is there
    existing_file: str | None = None  # read-only: the (largest) file fio jobs read
    aged_tree: AgedTree | None = None  # the aging's files (aged) or their fresh copy's plan


@dataclass(frozen=True)
class Usage:
    """CPU time and context switches as getrusage counts them; `after - before` is what the
    work between two readings cost (a Measurement's app_* fields)."""

    user_s: float = 0.0
    sys_s: float = 0.0
    ctx: int = 0

    @classmethod
    def now(cls, who: int = resource.RUSAGE_SELF) -> Usage:
        """This process's (the native loops run in it), its reaped children's
        (RUSAGE_CHILDREN) or this thread's (RUSAGE_THREAD)."""
        ru = resource.getrusage(who)
        return cls(ru.ru_utime, ru.ru_stime, ru.ru_nvcsw + ru.ru_nivcsw)

    def __sub__(self, before: Usage) -> Usage:
        return Usage(self.user_s - before.user_s, self.sys_s - before.sys_s, self.ctx - before.ctx)


class Timed:
    """The timed part of a run, as `with Timed() as t:` around it: its wall seconds (`lap()`
    the seconds so far, to time a phase inside it) and this process's CPU across it (`used`),
    what a Measurement takes."""

    def __enter__(self) -> Timed:
        self._before = Usage.now()
        self._start = time.perf_counter()
        return self

    def lap(self) -> float:
        return time.perf_counter() - self._start

    def __exit__(self, *_exc: object) -> None:
        self.seconds = time.perf_counter() - self._start
        self.used = Usage.now() - self._before


@dataclass
class Measurement:
    """What one timed run of a workload returns; probes are taken around it by the runner."""

    value: float
    seconds: float
    bytes: int = 0
    ops: int = 0
    app_user_s: float = 0.0
    app_sys_s: float = 0.0
    app_ctx: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    @classmethod
    def rate(
        cls, amount: float, seconds: float, what: str, used: Usage, **rest: Any
    ) -> Measurement:
        """`amount` per second of the timed `seconds` (per_second's rule: 0 s fails, with
        `what` ran), the app's cost `used` across it; `rest`: the other fields."""
        return cls(
            value=per_second(amount, seconds, what),
            seconds=seconds,
            app_user_s=used.user_s,
            app_sys_s=used.sys_s,
            app_ctx=used.ctx,
            **rest,
        )

    @classmethod
    def elapsed(cls, seconds: float, used: Usage, **rest: Any) -> Measurement:
        """The run's own time as its figure (a build, a user's command: lower is better), the
        app's cost `used` across it; `rest`: the other fields."""
        return cls(
            value=seconds,
            seconds=seconds,
            app_user_s=used.user_s,
            app_sys_s=used.sys_s,
            app_ctx=used.ctx,
            **rest,
        )


# How a sample's iterations merge a figure of Measurement.extra, by name in a workload's
# merge_extra: amounts add up, rates are recomputed over the whole sample (its ops, or its
# CPU, over its seconds), distributions are summarized across iterations (the median of the
# per-iteration percentiles: exact percentiles would need the histograms).
MERGE_RULES = ("sum", "max", "mean", "median", "rate:ops", "rate:cpu")
# The I/O figures fio gives and the native loops shaped like it (iozone cells, read loops).
IO_EXTRAS = {"iops": "rate:ops", "lat_us": "median", "lat_mean_us": "mean", "lat_max_us": "max"}


class Workload(Protocol):
    """What every workload has. The first six and the three methods are its own; the rest are
    its capabilities, typed, with the values most workloads have in `Declared` (which every
    workload class inherits), so the runner and the pipeline read `wl.needs`, never a name in
    a string. This file is the whole contract a new workload is written against."""

    name: str
    description: str
    metric: str
    unit: str
    cache: str  # what the runner must do before each sample: cold | warm | direct | none
    higher_is_better: bool

    # -- capabilities (Declared has each one's usual value) --
    @property
    def id(self) -> str:
        """The result's identity, NAME/VARIANT; without a variant, the name."""
        ...

    variant: str | None  # the variant part of the id (fsync, 4k-direct, cold, ...)
    numjobs: int
    warmup: int | None  # discarded iterations before the first sample; None: the runner's
    min_sample_s: float | None  # a sample lasts at least this long; None: the runner's

    @property
    def space_group(self) -> str | None:
        """The files it keeps on the target, for the budget split (None: too few to count);
        fio jobs of one fileset share theirs."""
        ...

    is_write: bool  # it writes the target (device writes verify O_DIRECT)
    by_name: bool  # a bare NAME in --workloads includes it (False: only NAME/VARIANT, a group)
    read_only_ok: bool  # it can run on a --read-only volume (reads what is there)
    # Capabilities the mount must have, keys of Target.capabilities (posix_permissions); one the
    # mount lacks makes it unsupported there, with why (unmet_need).
    needs: tuple[str, ...]
    tools: tuple[str, ...]  # outside programs whose versions go into the environment
    # The command names of its processes, for the trace probes' wake-ups (None: fsbench's own
    # threads do the work).
    app_comms: tuple[str, ...] | None
    # A user's workload (fio job file, command): a dict that reproduces it, kept in
    # results.json's definitions; None: a built-in.
    definition: dict[str, Any] | None
    # Where the app and the FUSE daemon run: free | same | split (schedule/dimensions/
    # placement.py); None: the run's default, pinned without a result of its own.
    placement: str | None
    # Extras of its own measurements and how a sample's iterations merge them: {key: a rule of
    # MERGE_RULES, or function(values of each iteration) -> merged}; an extra it does not name
    # is the last iteration's, and the sample says so.
    merge_extra: Mapping[str, Any]
    # Optional methods; None: it has no such form.
    close: Callable[[], None] | None  # called once at the end: scratch areas outside the target
    fio_job: Callable[[], Any] | None  # the same work as a fio.FioJob, for --clients
    with_numjobs: Callable[[int], Any] | None  # the same with N parallel jobs (--numjobs)
    # The same at another queue depth, engine or job count (fio.IoParams, NAME:qd32:io_uring).
    with_io: Callable[[Any], Any] | None
    # function(samples) -> {Result field: value}, for result fields of its own (per-client
    # medians); None: none.
    summarize_samples: Callable[[list[Any]], dict[str, Any]] | None

    def params(self, target: Target) -> dict[str, Any]: ...

    def prepare(self, target: Target) -> None: ...

    def run(self, target: Target) -> Measurement: ...


class Measures(NamedTuple):
    """What a workload's result is and which way is better; a class names one by unpacking
    it (`metric, unit, higher_is_better = TIME`), so the three never disagree."""

    metric: str
    unit: str
    higher_is_better: bool


THROUGHPUT = Measures("throughput", "MiB/s", True)
OPS = Measures("ops", "ops/s", True)
TIME = Measures("time", "s", False)


class Declared:
    """The contract's declarations and capabilities at the values most workloads have: a
    workload class inherits them and states only what differs (a class attribute, or a
    dataclass field where its instances differ, as fio jobs' `cache` does). A dataclass field
    it declares without a default takes the default from here: `= field()` keeps it required.
    The id is `job_id`'s, or the name of a workload without variants."""

    metric, unit, higher_is_better = THROUGHPUT
    cache = "none"  # nothing to prepare before a sample
    numjobs = 1
    variant: str | None = None
    warmup: int | None = None
    min_sample_s: float | None = None
    is_write = False
    by_name = True
    read_only_ok = False
    needs: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    app_comms: tuple[str, ...] | None = None
    definition: dict[str, Any] | None = None
    placement: str | None = None
    merge_extra: Mapping[str, Any] = MappingProxyType({})
    close: Callable[[], None] | None = None
    fio_job: Callable[[], Any] | None = None
    with_numjobs: Callable[[int], Any] | None = None
    with_io: Callable[[Any], Any] | None = None
    summarize_samples: Callable[[list[Any]], dict[str, Any]] | None = None

    @property
    def id(self) -> str:
        name: str = self.name  # type: ignore[attr-defined]
        return name if self.variant is None else job_id(name, self.variant, self.numjobs)

    @property
    def space_group(self) -> str | None:
        fileset = getattr(self, "fileset", None)
        return f"fio:{fileset}" if fileset else self.name  # type: ignore[attr-defined]


def job_id(name: str, variant: str, numjobs: int) -> str:
    """A job's identity in results ("seq-write/fsync", "rand-read/4k-direct-j4"): one rule for
    fio jobs and Iozone cells, whose ids must agree when a cell composes a fio job."""
    base = f"{name}/{variant}"
    return base if numjobs == 1 else f"{base}-j{numjobs}"


def per_second(amount: float, seconds: float, what: str) -> float:
    """A rate from a timed run. A run the clock timed at 0 s has no rate: it fails with the
    reason, never reads as 0 (as fio.fio_measurement does for fio's phases)."""
    if seconds <= 0:
        raise WorkloadFailed(f"{what} timed at {seconds} s: no rate to report")
    return amount / seconds


# The share of an image the workloads' files may take: room for metadata, journals and the
# file systems that keep a reserve (btrfs, ext4's 5 %), identical for every subject (the lab's
# targets size their files by it; --diskmark-size is held to it).
FILE_FRACTION = 0.4

# What each capability a workload may need is, in words (unmet_need's reason).
NEED_WORDS = {"posix_permissions": "POSIX permissions (chmod)"}


def unmet_need(wl: Workload, target: Target) -> str | None:
    """Why the target cannot run this workload, from its `needs` declaration: a capability the
    mount's probes (or, unprobed, its driver's record) say it lacks. None: nothing missing."""
    for need in wl.needs:
        if target.capabilities.get(need) is not False:
            continue  # present, or unknown: the workload finds out itself
        words = NEED_WORDS.get(need, need)
        probed = target.capabilities.get(f"{need}_detail")
        if probed:
            return f"needs {words}, which this mount does not honour (probed: {probed})"
        return f"needs {words}: {target.fs or 'this file system'} has none (driver capability)"
    return None


@dataclass
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    user_s: float
    sys_s: float
    ctx: int

    @property
    def used(self) -> Usage:
        return Usage(self.user_s, self.sys_s, self.ctx)


# The runner's check on the subject while a child runs (e.g. "the FUSE daemon is stopped"):
# a workload's child that can never finish is stopped at once instead of at its timeout.
_watchdog: ContextVar[Callable[[], str | None] | None] = ContextVar("watchdog", default=None)


@contextmanager
def watched(check: Callable[[], str | None] | None) -> Iterator[None]:
    token = _watchdog.set(check)
    try:
        yield
    finally:
        _watchdog.reset(token)


def run_child(argv: list[str], cwd: str | None = None, timeout: float = 3600) -> ChildResult:
    """Run a measured child; bounded by `timeout` and by the runner's watchdog."""
    t0 = time.perf_counter()
    check = _watchdog.get()
    with subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        deadline = t0 + timeout
        while True:
            try:
                out, err = proc.communicate(timeout=1.0 if check else timeout)
                break
            except subprocess.TimeoutExpired:
                broken = check() if check else None
                if broken or time.perf_counter() > deadline:
                    proc.kill()
                    proc.communicate()
                    why = broken or f"did not finish within {timeout:.0f} s"
                    raise WorkloadFailed(f"{os.path.basename(argv[0])} stopped: {why}") from None
    seconds = time.perf_counter() - t0
    return ChildResult(proc.returncode, out, err, seconds, 0.0, 0.0, 0)


def children_usage() -> Usage:
    return Usage.now(resource.RUSAGE_CHILDREN)


def measured_child(argv: list[str], cwd: str | None = None, timeout: float = 3600) -> ChildResult:
    """run_child with its CPU and context switches: the RUSAGE_CHILDREN delta across it.

    fsbench runs one measured child at a time, so the delta is exactly that child's tree.
    """
    before = children_usage()
    res = run_child(argv, cwd=cwd, timeout=timeout)
    used = children_usage() - before
    res.user_s, res.sys_s, res.ctx = used.user_s, used.sys_s, used.ctx
    return res


def fill_file(path: str, size: int, fsync: bool = False) -> None:
    """Random bytes (no file system can compress or deduplicate them), written once in 1 MiB
    writes; `fsync`: on the device before it returns."""
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
