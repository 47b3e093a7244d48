"""The environment's wake-up cost: what waking a thread blocked in read() costs on one CPU and
across two, measured at the start of every run and by `fsbench doctor`.

FUSE pays a wake-up twice per request (the daemon, then the application). When a cross-CPU
wake-up costs many times a same-CPU one (virtual machines: an inter-processor interrupt is an
exit to the hypervisor), where the scheduler happens to put the daemon and the application
moves FUSE results by multiples; `--placement` measures that, this probe says whether to
expect it. The ping-pong runs in C (`native/wakeup.c`): Python would time itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from fsbench.probes.processes import allowed_cpus
from fsbench.records.schema import WakeupCost
from fsbench.units import fmt_ratio

# Per pair of CPUs: at most this long (both pairs together stay well under 0.3 s) ...
BUDGET_S = 0.1
# ... in batches of this many round trips (the clock is read once per batch).
TRIPS = 100
MAX_BATCHES = 200
METHOD = "pipe ping-pong between two pinned threads; median of batch means, half a round trip"


class WakeupUnavailable(Exception):
    """The probe could not run here (native module missing, CPUs not pinnable)."""


def _one_way_us(cpu_a: int, cpu_b: int, budget_s: float) -> float:
    from fsbench._wakeup import pingpong

    batches = pingpong(cpu_a, cpu_b, trips=TRIPS, max_batches=MAX_BATCHES, budget_s=budget_s)
    if not batches:
        raise WakeupUnavailable("the ping-pong measured nothing")
    # The median batch: one preempted batch (another process took the CPU) does not count.
    return round(float(statistics.median(batches)), 3)


def measure(cpus: Sequence[int] | None = None, budget_s: float = BUDGET_S) -> WakeupCost:
    """Same-CPU and cross-CPU wake-up cost in µs on the first (two) CPUs this process may use."""
    use = list(cpus) if cpus is not None else allowed_cpus()
    if not use:
        raise WakeupUnavailable("no CPU to run on")
    try:
        same = _one_way_us(use[0], use[0], budget_s)
        cross = _one_way_us(use[0], use[1], budget_s) if len(use) > 1 else None
    except ImportError as e:
        raise WakeupUnavailable(f"native module not built ({e}); reinstall fsbench") from e
    except OSError as e:
        raise WakeupUnavailable(f"could not pin the probe's threads: {e.strerror or e}") from e
    return WakeupCost(same_cpu=same, cross_cpu=cross, cpus=use[:2], method=METHOD)


def is_costly(w: WakeupCost | None) -> bool:
    return w is not None and w.costly


def verdict(w: WakeupCost) -> str:
    """One sentence on what the two costs mean for FUSE results here."""
    if w.cross_cpu is None:
        return f"one CPU only: a wake-up costs {w.same_cpu:.1f} µs; nothing crosses CPUs here"
    ratio = w.cross_cpu / w.same_cpu if w.same_cpu > 0 else float("inf")
    head = (
        f"a wake-up costs {w.same_cpu:.1f} µs on one CPU and {w.cross_cpu:.1f} µs across CPUs "
        f"({fmt_ratio(ratio)})"
    )
    if is_costly(w):
        return (
            f"{head}: costly here; FUSE results depend on whether the daemon and the "
            f"application share a CPU (measure it with --placement free,same)"
        )
    return f"{head}: cheap here; CPU placement should matter little"
