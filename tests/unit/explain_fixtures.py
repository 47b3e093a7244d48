"""Synthetic runs with kernel-probe data in the schema's shape (Result.trace), for the explanation,
its renderers and diff. Numbers are parameters so a test can change one and watch the words."""

from __future__ import annotations

import copy
from typing import Any

from fsbench.lab.drivers import DRIVERS, Driver
from fsbench.records.schema import CPU, Environment, Result, Run, Sample, Subject
from fsbench.stats.describe import summarize

KiB, MiB, GiB = 1024, 1024**2, 1024**3
PARAMS = {"engine": "fio", "variant": "fsync", "rw": "write", "block_size": "1M", "numjobs": 1}


def fuse_trace(
    requests: int = 262144,
    size: int = 4096,
    latency_total_us: float = 9.4e6,
    seconds: float = 10.0,
    nbytes: int = GiB,
    cross: int = 250000,
    probes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A FUSE driver's Result.trace for one GiB written: `requests` WRITEs of `size` bytes."""
    t: dict[str, Any] = {
        "probes": {
            "fuse": "ok",
            "readahead": "ok",
            "block": "ok",
            "writeback": "ok",
            "sched": "ok",
        },
        "fuse": {
            "requests": {"WRITE": requests, "GETATTR": 2},
            "bytes": {"WRITE": requests * size},
            "size_hist": {"WRITE": {str(size): requests}},
            "latency_hist_us": {"WRITE": {"32": requests}},
            "latency_us": {"WRITE": {"p50": 30.0, "p99": 61.0, "total": latency_total_us}},
        },
        "readahead": {"windows": {}, "count": 0},
        "block": {
            "requests": {"read": 0, "write": 2048},
            "size_hist": {"write": {"524288": 2048}},
            "latency_us": {"write": {"p50": 80.0, "p99": 300.0}},
        },
        "writeback": {"balance_dirty_pages": 15, "pause_ms": 120.0, "pages_written": 262144},
        "sched": {
            "wakeups": {"app": 300000, "driver": 300000},
            "cross_cpu": {"app": cross, "driver": cross},
            "migrations": {"app": 10, "driver": 12},
        },
        "work": {"bytes": nbytes, "ops": 0, "seconds": seconds},
    }
    for name, status in (probes or {}).items():
        t["probes"][name] = status
        if status != "ok":
            t.pop(name, None)
    return t


def kernel_trace(seconds: float = 1.0, window: int = 131072) -> dict[str, Any]:
    """A kernel driver's Result.trace: no FUSE part; larger device requests."""
    return {
        "probes": {
            "fuse": "ok",
            "readahead": "ok",
            "block": "ok",
            "writeback": "ok",
            "sched": "ok",
        },
        "readahead": {"windows": {str(window): 12}, "count": 12},
        "block": {
            "requests": {"read": 0, "write": 1024},
            "size_hist": {"write": {"1048576": 1024}},
            "latency_us": {"write": {"p50": 150.0, "p99": 400.0}},
        },
        "writeback": {"balance_dirty_pages": 0, "pause_ms": 0.0, "pages_written": 262144},
        "sched": {
            "wakeups": {"app": 3000, "driver": 0},
            "cross_cpu": {"app": 1000, "driver": 0},
            "migrations": {"app": 1, "driver": 0},
        },
        "work": {"bytes": GiB, "ops": 0, "seconds": seconds},
    }


def result(
    subject: str,
    samples: list[float],
    trace: dict[str, Any] | None,
    placement: str | None = None,
    cpu: dict[str, float] | None = None,
    ctx: float | None = None,
) -> Result:
    s = summarize(samples)
    params = dict(PARAMS)
    if placement is not None:
        params["placement"] = placement
    cpu = cpu or {"app": 0.4, "driver": 0.0, "kernel_threads": 0.1}
    r = Result(
        subject=subject,
        workload="seq-write",
        params=params,
        metric="throughput",
        unit="MiB/s",
        samples=list(samples),
        median=s.median,
        ci95=s.ci95,
        cv=s.cv,
        sample_details=[
            Sample(value=v, seconds=1024 / v / len(samples), bytes=GiB // len(samples))
            for v in samples
        ],
        cpu=CPU(per_gib_s=sum(cpu.values()), per_gib=cpu),
        subject_ctx_switches_per_gib=ctx,
        write_amplification=1.01,
    )
    if trace is not None:
        r.trace = copy.deepcopy(trace)
    return r


def run(
    results: list[Result],
    image_size: int = GiB,
    wakeup_us: dict[str, float] | None = None,
    subjects: tuple[str, ...] = ("ext4", "ntfs-3g"),
    run_id: str = "20260101-000000-aaaa",
    drivers: dict[str, Driver] | None = None,
) -> Run:
    """A run of `subjects`; each records its driver's quirks as the pipeline does, from
    lab.drivers.DRIVERS or from `drivers` (a test's own driver records)."""
    known = {**DRIVERS, **(drivers or {})}
    kinds = {"ext4": ("ext4", "kernel", "ext4"), "xfs": ("xfs", "kernel", "xfs")}
    env = Environment(kernel="6.18.0", cpus=2, backing="ram", image_size=image_size)
    if wakeup_us is not None:
        setattr(env, "wakeup_us", wakeup_us)  # noqa: B010
    subs = []
    for sid in subjects:
        driver, kind, fs = kinds.get(sid.split(":")[0], (sid.split(":")[0], "fuse", "ntfs"))
        quirks = list(known[driver].quirks) if driver in known else []
        subs.append(Subject(id=sid, driver=driver, fs=fs, kind=kind, quirks=quirks))  # type: ignore[arg-type]
    return Run(
        run_id=run_id,
        started="2026-01-01T00:00:00",
        status="complete",
        environment=env,
        subjects=subs,
        results=results,
    )


def ntfs_vs_ext4(**fuse_kw: Any) -> Run:
    """ext4 at ~1000 MiB/s, ntfs-3g at ~100 MiB/s writing a GiB on a 1 GiB image."""
    return run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), ctx=5000.0),
            result(
                "ntfs-3g",
                [100.0, 101.0, 99.0],
                fuse_trace(**fuse_kw),
                cpu={"app": 0.5, "driver": 3.1, "kernel_threads": 0.2},
                ctx=1.1e6,
            ),
        ]
    )
