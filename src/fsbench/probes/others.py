"""What else ran on the machine during a run: the CPU other programs took.

A busy machine widens every interval and can move a subject that ran while it was busiest;
the noise floor, measured before and after, misses a load that came and went in between. So
the run reads every process's CPU time at its start and its end and counts what neither
fsbench nor its run's processes used: not fsbench and its children (fio, mkfs, the
workloads), not a process whose command line names the run (its FUSE daemons mount under
the run's directory), not a kernel thread (the loop devices' and file systems' own work).
The runner reads again between samples (at most every TICK_S), so a program that ran for a
while and ended before the run did is counted up to its last reading; one that came and went
between two readings is not seen.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

# Other programs are named when they took this many CPUs on average (a spinning process: 1).
BUSY_CPUS = 0.25
TICK_S = 5.0  # between samples, at most this often: one reading of every process costs ~30 ms
KTHREADD = 2


@dataclass
class OthersWatch:
    """CPU seconds of every other process at the run's start (Others.start) and the time."""

    run_id: str
    at: float = field(default_factory=time.monotonic)
    cpu: dict[tuple[int, float], tuple[str, float]] = field(default_factory=dict)
    # The latest reading of each process seen since (tick): one that ended before the run did
    # is counted up to its last reading.
    last: dict[tuple[int, float], tuple[str, float]] = field(default_factory=dict)
    _ticked: float = 0.0

    @classmethod
    def start(cls, run_id: str) -> OthersWatch:
        w = cls(run_id)
        w.cpu = w._read()
        return w

    def _ours(self) -> set[int]:
        me = psutil.Process()
        try:
            return {me.pid} | {c.pid for c in me.children(recursive=True)}
        except psutil.Error:
            return {me.pid}

    def _read(self) -> dict[tuple[int, float], tuple[str, float]]:
        """(pid, start time) -> (name, CPU seconds) of every process not the run's own."""
        ours, out = self._ours(), {}
        for p in psutil.process_iter(
            ["pid", "ppid", "name", "cmdline", "create_time", "cpu_times"]
        ):
            info = p.info
            if info["pid"] in ours or info["pid"] == KTHREADD or info["ppid"] == KTHREADD:
                continue
            if self.run_id in " ".join(info.get("cmdline") or []):
                continue  # a FUSE daemon of this run (its mount point names the run)
            t = info.get("cpu_times")
            if t is None:
                continue
            out[(info["pid"], info["create_time"])] = (info["name"] or "?", t.user + t.system)
        return out

    def tick(self, every: float = TICK_S) -> None:
        """Between samples (never inside a timed run): read again, at most every ``every``
        seconds, so a program that ends before the run does is still counted."""
        now = time.monotonic()
        if now - self._ticked >= every:
            self._ticked = now
            self.last.update(self._read())

    def used(self) -> dict[str, float]:
        """CPU seconds other programs took since the start, by program name."""
        out: dict[str, float] = {}
        self.last.update(self._read())
        for key, (name, cpu) in self.last.items():
            before = self.cpu.get(key, (name, 0.0))[1]
            if cpu > before:
                out[name] = out.get(name, 0.0) + cpu - before
        return out

    def note(self) -> str | None:
        """The run's note when other programs took BUSY_CPUS or more on average: how much of
        the machine, and the busiest of them; None on a quiet machine."""
        wall = time.monotonic() - self.at
        if wall <= 0:
            return None
        used = self.used()
        total = sum(used.values()) / wall
        if total < BUSY_CPUS:
            return None
        top = [kv for kv in sorted(used.items(), key=lambda kv: -kv[1])[:3] if kv[1] >= 0.01 * wall]
        names = ", ".join(f"{n} {s / wall * 100:.0f} %" for n, s in top)
        return (
            f"the machine was busy: other programs used {total:.1f} of its {os.cpu_count()} "
            f"CPUs on average during the run ({names} of a CPU): every interval is wider for "
            "it, and a subject measured while it was busiest may look slower"
        )
