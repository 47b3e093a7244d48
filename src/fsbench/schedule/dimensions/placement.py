"""Where the application and the FUSE daemon run: CPU placement as a controlled, recorded
parameter.

Every FUSE request wakes the daemon and then the application again. When the two run on
different CPUs each of those wake-ups crosses CPUs, which on some machines (virtual ones above
all) costs many times a same-CPU wake-up (probes/wakeup.py measures both). Left alone the
scheduler decides (`free`, what users meet); `same` and `split` take the decision away, so its
effect is measured rather than suffered:

    free   nothing pinned
    same   the application and the FUSE daemon (every thread) on one CPU
    split  the application on one CPU, the daemon on another

"The application" is the thread that runs the workload: fio and its job processes, make,
nginx and wrk, and fsbench's native worker threads are all started from it during the timed
run and inherit its CPU mask. The runner pins right before the timed run (after any remount,
whose daemon is new) and restores every mask right after it, so nothing started in between
(preparation, remounts and the daemons they start) inherits a pin. Kernel threads (the loop
worker, kworkers, jbd2) are never pinned; a kernel driver's result says so in its flags.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.probes.processes import allowed_cpus
from fsbench.probes.procfs import ProcFS, ProcParseError
from fsbench.records.choices import by_name, parse_choices
from fsbench.records.notecodes import Note
from fsbench.workloads.base import Measurement, Target, Workload


@dataclass(frozen=True)
class Placement:
    name: str
    description: str
    min_cpus: int = 1
    pins: bool = True


PLACEMENTS: dict[str, Placement] = by_name(
    Placement(
        "free",
        "nothing pinned: the scheduler places the application and the daemon (what users meet)",
        pins=False,
    ),
    Placement("same", "the application and the FUSE daemon (every thread) on one CPU"),
    Placement("split", "the application on one CPU, the FUSE daemon on another", min_cpus=2),
)
# A run without --placement pins (not a result of its own: titles and params stay as they
# were): left free, a daemon's samples split in two groups by the CPU it ran on. `same` is
# where the scheduler's wake-affine choice mostly puts them, the cheap wake-up, and exists on
# every machine; the kernel threads keep the other CPUs (docs/internals.md#measurements).
DEFAULT = "same"
FREE = "free"
# A result's flag when only part of the placement could be made (kernel drivers: no daemon).
PARTIAL_FLAG = "placement-partial"


def default_placement(cpus: Sequence[int] | None = None) -> str:
    """The default where the machine allows it (split needs two CPUs), else same."""
    have = len(cpus) if cpus is not None else len(allowed_cpus())
    return DEFAULT if have >= PLACEMENTS[DEFAULT].min_cpus else "same"


def parse_placements(text: str | None, cpus: Sequence[int] | None = None) -> list[str]:
    """`--placement free,same,split` -> the names in the order given; bad input is a UsageError."""
    if text is None:
        return [default_placement(cpus)]
    names = parse_choices("--placement", text, PLACEMENTS, "placement", "free,same")
    have = len(cpus) if cpus is not None else len(allowed_cpus())
    for n in names:
        need = PLACEMENTS[n].min_cpus
        if have < need:
            raise UsageError(
                f"--placement {n}: needs {need} CPUs, fsbench may use {have} here; use free or same"
            )
    return names


# -- placement as a dimension of the schedule -----------------------------------------------------
class Placed:
    """A workload under one placement: a result of its own (id `NAME/VARIANT@PLACEMENT`,
    params["placement"]); everything else is the wrapped workload's. Wrapping keeps the runner's
    interleaving: placements of one workload follow each other like its variants do."""

    def __init__(self, inner: Workload, placement: str, closes: bool = True) -> None:
        self.inner = inner
        self.placement = placement
        self._closes = closes  # one wrapper per workload gives it its clean-up

    @property
    def id(self) -> str:
        return f"{self.inner.id}@{self.placement}"

    def params(self, target: Target) -> dict[str, Any]:
        return {**self.inner.params(target), "placement": self.placement}

    def prepare(self, target: Target) -> None:
        self.inner.prepare(target)

    def run(self, target: Target) -> Measurement:
        return self.inner.run(target)

    def close(self) -> None:
        close = self.inner.close
        if self._closes and callable(close):
            close()

    def __getattr__(self, name: str) -> Any:
        # Only reached for what Placed does not define: name, unit, cache, fileset, warmup, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def with_placements(workloads: list[Workload], placements: Sequence[str]) -> list[Workload]:
    """Each workload once per placement, placements of a workload side by side. The default
    (free alone) leaves the workloads, and their results' params, as they always were."""
    if list(placements) == [default_placement()]:
        return list(workloads)
    out: list[Workload] = []
    for wl in workloads:
        for i, p in enumerate(placements):
            out.append(Placed(wl, p, closes=i == 0))  # type: ignore[arg-type]
    return out


def placement_of(wl: Workload) -> str:
    """The workload's placement: its own (--placement), else the run's default."""
    return str(wl.placement or default_placement())


def asked(wl: Workload) -> bool:
    """Whether the placement was asked for (a result of its own), not the run's default."""
    return wl.placement is not None


def default_note(workloads: Sequence[Workload], cpus: Sequence[int] | None = None) -> str | None:
    """The run's note on what the default pinned (None: every workload has its own)."""
    if all(asked(w) for w in workloads):
        return None
    cpus = list(cpus) if cpus is not None else allowed_cpus()
    p = default_placement(cpus)
    where = (
        f"the application on CPU {cpus[0]}, a FUSE daemon on CPU {cpus[1]}"
        if p == "split"
        else f"the application and a FUSE daemon on CPU {cpus[0]}"
    )
    return (
        f"placement: {where} during every timed run ({p}; kernel threads unpinned), so where "
        "the scheduler puts a daemon does not split a subject's samples; --placement free "
        "leaves it to the scheduler"
    )


# -- pinning --------------------------------------------------------------------------------------
@dataclass
class Pinned:
    """The masks a placement changed, to be put back, and what it did and did not pin."""

    placement: str
    app_cpu: int
    daemon_cpu: int | None
    daemon_pid: int | None = None
    saved: dict[int, set[int]] = field(default_factory=dict)  # tid -> mask before pinning
    daemon_mask: set[int] | None = None  # the daemon's main thread's mask before pinning
    daemon_threads: int = 0
    flags: list[str] = field(default_factory=list)
    # The live /proc: thread ids name real threads (a test's canned tree must never be used).
    procfs: ProcFS = field(default_factory=ProcFS)
    watch: Watch | None = None  # under free: nothing pinned, where things ran watched

    def record(self) -> dict[str, Any]:
        """What the sample records about where things ran."""
        if self.watch is not None:
            return {"placement": self.placement, **self.watch.stop()}
        out: dict[str, Any] = {"placement": self.placement, "app_cpu": self.app_cpu}
        if self.daemon_cpu is not None:
            out["daemon_cpu"] = self.daemon_cpu
            out["daemon_threads"] = self.daemon_threads
        return out

    def restore(self) -> None:
        """Every mask back as it was. Daemon threads born while pinned (libfuse starts workers
        on demand; they inherit the pin) get the daemon's own mask back too."""
        if self.watch is not None:
            self.watch.stop()
        if self.daemon_pid is not None and self.daemon_mask is not None:
            for tid in self.procfs.tids(self.daemon_pid):
                self.saved.setdefault(tid, self.daemon_mask)
        for tid, mask in self.saved.items():
            # A thread that is gone (a daemon that exited) has nothing to put back.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)
        self.saved.clear()


def _set(tid: int, cpu: int, saved: dict[int, set[int]]) -> bool:
    """Pin one thread, remembering its mask first; False when the thread is gone."""
    try:
        before = os.sched_getaffinity(tid)
        os.sched_setaffinity(tid, {cpu})
    except ProcessLookupError:
        return False
    saved.setdefault(tid, before)
    return True


def _pin_daemon(pid: int, cpu: int, pinned: Pinned) -> None:
    seen: set[int] = set()
    # Threads started while the list is read inherit from a thread that may not be pinned
    # yet: read the list again until it holds nothing new.
    for _ in range(5):
        new = [t for t in pinned.procfs.tids(pid) if t not in seen]
        if not new:
            break
        for tid in new:
            seen.add(tid)
            if tid == pid:
                try:
                    pinned.daemon_mask = os.sched_getaffinity(pid)
                except ProcessLookupError:
                    return
            if _set(tid, cpu, pinned.saved):
                pinned.daemon_threads += 1


def pin(
    placement: str, target: Target, cpus: Sequence[int] | None = None, quiet: bool = False
) -> Pinned | None:
    """Pin the calling thread (the application) and the target's FUSE daemon for `placement`;
    None for `free`. Must be undone with `Pinned.restore` from the same thread. `quiet`: the
    run's default, said once in the run's notes, not in every result's flags."""
    p = PLACEMENTS.get(placement)
    if placement == FREE and target.kind == "fuse" and target.daemon_pid is not None:
        return Pinned(FREE, -1, None, watch=Watch(target.daemon_pid).start())
    if p is None or not p.pins:
        return None
    cpus = list(cpus) if cpus is not None else allowed_cpus()
    app_cpu = cpus[0]
    daemon_cpu = cpus[1 % len(cpus)] if placement == "split" else app_cpu
    has_daemon = target.kind == "fuse" and target.daemon_pid is not None
    pinned = Pinned(
        placement,
        app_cpu,
        daemon_cpu if has_daemon else None,
        target.daemon_pid if has_daemon else None,
    )
    try:
        _set(threading.get_native_id(), app_cpu, pinned.saved)
        if has_daemon:
            assert target.daemon_pid is not None
            _pin_daemon(target.daemon_pid, daemon_cpu, pinned)
    except OSError as e:
        pinned.restore()
        raise WorkloadFailed(f"--placement {placement}: could not pin: {e.strerror or e}") from e
    if quiet and target.kind != "fuse":
        return pinned  # nothing to pin but the app, as the run's note says
    if placement == "split" and len(cpus) < 2:
        pinned.flags.append(f"{PARTIAL_FLAG}: only one CPU allowed, split ran as same")
    if target.kind == "kernel":
        pinned.flags.append(
            f"{PARTIAL_FLAG}: a kernel driver has no daemon; only the application was pinned "
            f"(CPU {app_cpu}), not the kernel threads that serve it (loop, kworker, journal)"
        )
    elif not has_daemon:
        what = "no FUSE daemon known for this target"
        if target.kind == "fuse":
            what = "the FUSE daemon was not found"
        pinned.flags.append(
            f"{PARTIAL_FLAG}: {what}; only the application was pinned (CPU {app_cpu})"
        )
    elif has_daemon and not pinned.daemon_threads:
        pinned.flags.append(f"{PARTIAL_FLAG}: the FUSE daemon had exited; nothing but the app")
    return pinned


# -- free: where things ran, and the split it makes -----------------------------------------------
PERIOD_S = 0.02  # a look every 20 ms: ~50 small /proc reads a second, beside a timed run
SPLIT_MIN = 1.15  # two groups at least this far apart (ratio of the nearest samples)


class Watch:
    """Under `free`, while the timed run lasts: every PERIOD_S, the CPUs the busy threads of the
    FUSE daemon and of the application (this process and its descendants, the watcher aside)
    ran on. Its record is the share of looks, among those that found both busy, that found
    them on one CPU: what the scheduler chose for that sample."""

    def __init__(self, daemon_pid: int, procfs: ProcFS | None = None) -> None:
        self.daemon_pid = daemon_pid
        self.procfs = procfs or ProcFS()
        self.looks = self.same = 0
        self._cpu_time: dict[int, int] = {}  # tid -> utime + stime at the last look
        self._done = threading.Event()
        self._own = 0
        self._thread = threading.Thread(target=self._loop, name="fsbench-watch", daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop looking (again: a no-op); what was seen."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        if not self.looks:
            return {"looks": 0}
        return {"looks": self.looks, "same_cpu_share": round(self.same / self.looks, 3)}

    def _loop(self) -> None:
        self._own = threading.get_native_id()
        while not self._done.wait(PERIOD_S):
            self.look()

    def look(self) -> None:
        daemon = self._busy_cpus(self.daemon_pid)
        app: set[int] = set()
        for pid in self._app_pids():
            app |= self._busy_cpus(pid)
        if daemon and app:
            self.looks += 1
            self.same += bool(daemon & app)

    def _app_pids(self) -> list[int]:
        pids, todo = [], [os.getpid()]
        while todo and len(pids) < 256:
            pid = todo.pop()
            if pid != self.daemon_pid:
                pids.append(pid)
                todo += self.procfs.children(pid)
        return pids

    def _busy_cpus(self, pid: int) -> set[int]:
        """The CPUs of `pid`'s threads that ran since the last look (or are running)."""
        cpus = set()
        for tid in self.procfs.tids(pid):
            if tid == self._own:
                continue
            try:
                st = self.procfs.task_stat(pid, tid)
            except (OSError, ProcParseError):
                continue
            t = st.utime + st.stime
            if st.state == "R" or t != self._cpu_time.get(tid, t):
                cpus.add(st.processor)
            self._cpu_time[tid] = t
        return cpus


def two_groups(values: Sequence[float]) -> tuple[list[int], list[int]] | None:
    """The indices of a slow and a fast group when the samples fall in two, at least two
    each, with a gap between them wider than either group's own range and at least SPLIT_MIN;
    None when they do not."""
    n = len(values)
    if n < 4 or min(values) <= 0:
        return None
    order = sorted(range(n), key=lambda i: values[i])
    logs = [math.log(values[i]) for i in order]
    gap, k = max((logs[j + 1] - logs[j], j) for j in range(1, n - 2))
    spread = max(logs[k] - logs[0], logs[-1] - logs[k + 1])
    if gap < math.log(SPLIT_MIN) or gap <= spread:
        return None
    return order[: k + 1], order[k + 1 :]


def split_note(
    values: Sequence[float], seen: Sequence[dict[str, Any] | None], unit: str
) -> Note | None:
    """The note on a free placement's samples that fall in two groups: each group's range and,
    where the watch saw it, how often the daemon shared the application's CPU in each."""
    groups = two_groups(values)
    if groups is None:
        return None
    params: dict[str, Any] = {"unit": unit}
    for name, ix in zip(("slow", "fast"), groups, strict=True):
        params[name] = [round(min(values[i] for i in ix), 3), round(max(values[i] for i in ix), 3)]
        params[f"n_{name}"] = len(ix)
        shares = [s["same_cpu_share"] for i in ix if (s := seen[i]) and "same_cpu_share" in s]
        if shares:
            params[f"same_cpu_{name}"] = round(sum(shares) / len(shares), 3)
    return Note(code="placement-split", params=params)
