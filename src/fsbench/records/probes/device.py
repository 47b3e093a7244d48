"""/sys probe of the subject's block device: bytes and requests read and written, and the
time it had I/O in flight, from /sys/block/DEV/stat (a partition's under /sys/class/block).
The runner sets the bytes against the workload's for the amplification factor and the proof
of a cache state."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes import depth
from fsbench.records.probes.costs import amplification_factors
from fsbench.records.probes.counter import Counted, CounterProbe, ProbeSpec, ProcReader
from fsbench.records.schema import Device


def _collect(procfs: ProcReader, spec: ProbeSpec) -> Any:
    if not spec.block_device:
        return None
    try:
        return procfs.block_stat(spec.block_device)
    except FileNotFoundError:
        return None


def _delta(before: Any, after: Any, _seconds: float, spec: ProbeSpec) -> Counted:
    """Two `BlockStat` readings (None: the device did not exist)."""
    name = spec.block_device
    if name is None:
        return Counted()
    if before is None or after is None:
        return Counted(flags=[f"device-missing:{name}"])
    if after.read_sectors < before.read_sectors or after.write_sectors < before.write_sectors:
        # The device was detached and re-attached: counters restarted from zero.
        return Counted(flags=[f"device-counters-reset:{name}"])
    device = Device(
        read_bytes=after.read_bytes - before.read_bytes,
        write_bytes=after.write_bytes - before.write_bytes,
        read_ios=after.read_ios - before.read_ios,
        write_ios=after.write_ios - before.write_ios,
    )
    busy = after.io_ticks - before.io_ticks
    # Little's law over the busy time: time_in_queue / io_ticks is the mean number of requests
    # in flight while the device had any (iostat's aqu-sz is it over the wall time instead).
    queue = {"queue_ms": after.time_in_queue - before.time_in_queue, "busy_ms": busy}
    return Counted({"device": device, "device_busy_ms": busy}, figures=queue)


PROBE = CounterProbe(
    "block",
    "/sys/block/DEV/stat (or /sys/class/block/DEV/stat) of spec.block_device",
    collect=_collect,
    delta=_delta,
    # The depth reached is the device's (or, through FUSE, the daemon's) figure.
    factors=(amplification_factors, depth.factors),
)
