"""The explanation at depth: how many I/Os were really in flight against the queue
depth the workload asked for. A FUSE subject's depth is its daemon's: FUSE READ/WRITE requests
in flight together in the traced run (their summed latency over the run's time, as the fuse
probe's "≈ 1.5 in flight"); a kernel subject's is its device's: requests in flight while the
device was busy, over the timed samples (the device counters' time_in_queue / io_ticks). A
QD32 run that reaches depth 1 is the finding: the driver serialises what the application
queued."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, OpFigures, Profile

# Below this share of the depth asked, the depth is "lost" and the factor ranks first.
LOST_BELOW = 0.5


def asked(result: Any) -> int:
    """The I/Os the workload keeps in flight: fio's iodepth × numjobs (1 for psync)."""
    p = result.params
    return int(p.get("iodepth", 1) or 1) * int(p.get("numjobs", 1) or 1)


def _in_flight(ops: dict[str, OpFigures] | None, names: tuple[str, ...], prof: Profile):
    """(what, in flight) of the busiest of `names`: its summed latency / the run's time."""
    if not ops or not prof.seconds:
        return None
    best = None
    for name in names:
        f = ops.get(name)
        if f is None or f.seconds is None:
            continue
        depth = f.seconds / prof.seconds
        if best is None or depth > best[1]:
            best = (name, depth)
    return best


def device_depth(result: Any) -> float | None:
    """Requests in flight at the device while it was busy, over the timed samples (the device
    counter probe's time_in_queue / io_ticks, "block.queue_ms" / "block.busy_ms")."""
    queue = sum(float(s.extra.get("block.queue_ms", 0)) for s in result.sample_details)
    busy = sum(float(s.extra.get("block.busy_ms", 0)) for s in result.sample_details)
    return queue / busy if busy > 0 else None


def reached(prof: Profile) -> tuple[str, float] | None:
    """("FUSE READ requests at the daemon" | "device requests", in flight) or None."""
    if prof.kind == "fuse":
        got = _in_flight(prof.measured.get("fuse"), ("READ", "WRITE"), prof)
        return (f"FUSE {got[0]} requests at the daemon", got[1]) if got else None
    depth = device_depth(prof.result)
    return ("requests at the device while busy", depth) if depth is not None else None


def factors(inp: FactorInput) -> list[Factor]:
    want = asked(inp.result)
    if want <= 1:
        return []  # depth 1 reaches depth 1: nothing to say
    got = reached(inp.prof)
    if got is None:
        return []
    what, depth = got
    base = reached(inp.base) if inp.base is not None else None
    lost = depth < LOST_BELOW * want
    sentence = (
        f"queue depth {want} asked, ≈ {depth:.1f} {what} in flight"
        + (" — the depth is lost on the way down" if lost else "")
        + (f" ({inp.base_name}: ≈ {base[1]:.1f} {base[0]})" if base else "")
    )
    brief = f"QD{want} → ≈ {depth:.1f} in flight" + (
        f" ({inp.base_name} {base[1]:.1f})" if base else ""
    )
    return [
        Factor(
            "queue depth",
            depth,
            "in flight",
            sentence,
            brief,
            baseline=base[1] if base else None,
            # A lost depth explains a QD run more than any per-request cost does.
            weight=20.0 if lost else 1.0,
        )
    ]
