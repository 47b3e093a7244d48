"""Where a run's measuring time went: wall seconds by phase (the timed runs, their
preparation, cache drops, warm-up, bpftrace, probe snapshots), each second charged once.

A matrix cell's work takes milliseconds, so fsbench's own steps around it can cost more
than the cell; this is how that shows (Schedule.phases, `--verbose`, bench/)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# The phases in the order a reader meets them in one sample's life.
ORDER = ("setup", "mount", "prepare", "cache", "probes", "run", "warm-up", "bpftrace", "traced run")


@dataclass
class PhaseClock:
    """Charges wall time to the innermost phase open. A phase opened `whole` keeps the time
    of the phases opened inside it (a warm-up run's prepare and cache drop are warm-up)."""

    clock: Callable[[], float] = time.monotonic
    spent: dict[str, float] = field(default_factory=dict)
    _stack: list[tuple[str, bool]] = field(default_factory=list)
    _since: float = 0.0
    # When each phase first opened (clock time): the first timed run's start is the end of
    # everything a run pays before its first sample.
    first: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str, whole: bool = False) -> Iterator[None]:
        if any(w for _, w in self._stack):
            yield  # inside a whole phase: its time is the outer phase's
            return
        now = self.clock()
        self._charge(now)
        self.first.setdefault(name, now)
        self._stack.append((name, whole))
        try:
            yield
        finally:
            self._charge(self.clock())
            self._stack.pop()

    def _charge(self, now: float) -> None:
        if self._stack:
            name = self._stack[-1][0]
            self.spent[name] = self.spent.get(name, 0.0) + (now - self._since)
        self._since = now

    def since(self, name: str, origin: float | None) -> float | None:
        """Seconds from ``origin`` (this clock's time: the command's start) to when phase
        ``name`` first opened; None if it never did or there is no origin."""
        at = self.first.get(name)
        return None if at is None or origin is None else round(at - origin, 1)

    def report(self, total_s: float) -> dict[str, float]:
        """Seconds by phase, rounded, with the rest of total_s as "other" (the rounds' own
        bookkeeping, sync between subjects, releasing shared devices)."""
        known = {k: self.spent[k] for k in ORDER if k in self.spent}
        known |= {k: v for k, v in self.spent.items() if k not in known}
        out = {k: round(v, 2) for k, v in known.items()}
        out["other"] = round(max(0.0, total_s - sum(known.values())), 2)
        return out


def phases_line(phases: dict[str, float], total_s: float | None, label: bool = True) -> str:
    """One line, the biggest first: "run 98 s (33 %) · warm-up 61 s (20 %) · ..."."""
    total = total_s or sum(phases.values()) or 1.0
    parts = [
        f"{k} {v:.0f} s ({v / total * 100:.0f} %)"
        for k, v in sorted(phases.items(), key=lambda kv: -kv[1])
        if v >= 0.5
    ]
    return ("measuring time by phase: " if label else "") + " · ".join(parts)


def anatomy_line(
    setup: dict[str, float],
    first_sample_s: float | None,
    phases: dict[str, float],
    spent_s: float | None,
    data_s: float | None,
    samples: int,
) -> str:
    """The run's time anatomy in one line: what came before the first sample, what a sample
    cost against the data it timed, and what tracing took of the measuring time."""
    parts = []
    if first_sample_s is not None:
        steps = " · ".join(
            f"{k} {v:.0f} s" for k, v in sorted(setup.items(), key=lambda kv: -kv[1]) if v >= 0.5
        )
        warm = sum(phases.get(k, 0.0) for k in ("warm-up", "traced run", "bpftrace"))
        if warm >= 0.5:
            steps += f"{' · ' if steps else ''}warm-up and traced runs {warm:.0f} s"
        parts.append(f"first sample at {first_sample_s:.0f} s" + (f" ({steps})" if steps else ""))
    run = phases.get("run")
    if data_s is not None and run and samples:
        around = (sum(phases.values()) - sum(phases.get(k, 0.0) for k in (
            "warm-up", "traced run", "bpftrace", "setup")) - data_s) / samples  # fmt: skip
        parts.append(
            f"a sample {data_s / samples:.2f} s of data + {max(0.0, around):.2f} s around it"
        )
    traced = phases.get("traced run", 0.0) + phases.get("bpftrace", 0.0)
    if spent_s and traced:
        parts.append(f"tracing {traced:.0f} s ({traced / spent_s * 100:.0f} % of measuring)")
    return ("time anatomy: " + "; ".join(parts)) if parts else ""
