"""Probes: cumulative counters from /proc and /sys, snapshotted around each sample.

`ProcFS` is the only reader of /proc and /sys; `take_snapshot` and `diff` run the /proc probe
records (`records/probes/` COUNTERS) to turn two readings into the CPU, context-switch, device and
memory figures a Sample records.
"""

from __future__ import annotations

from fsbench.probes.procfs import (
    KTHREADD_PID,
    MEMINFO_KEYS,
    SECTOR_BYTES,
    BlockStat,
    KThread,
    PidStat,
    ProcessCPU,
    ProcFS,
    ProcParseError,
    SystemCPU,
    SystemStat,
    ThreadCPU,
    kthread_patterns_for,
    parse_block_stat,
    parse_meminfo,
    parse_pid_stat,
    parse_proc_stat,
    parse_status_ctxt,
)
from fsbench.probes.sample import ProbeDelta, ProbeSpec, Snapshot, diff, take_snapshot
from fsbench.records.probes.kthreads import kthread_group

__all__ = [
    "KTHREADD_PID",
    "MEMINFO_KEYS",
    "SECTOR_BYTES",
    "BlockStat",
    "KThread",
    "PidStat",
    "ProbeDelta",
    "ProbeSpec",
    "ProcFS",
    "ProcParseError",
    "ProcessCPU",
    "Snapshot",
    "SystemCPU",
    "SystemStat",
    "ThreadCPU",
    "diff",
    "kthread_group",
    "kthread_patterns_for",
    "parse_block_stat",
    "parse_meminfo",
    "parse_pid_stat",
    "parse_proc_stat",
    "parse_status_ctxt",
    "take_snapshot",
]
