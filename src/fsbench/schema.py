"""The records of a run: what results.json holds and the SQLite store mirrors.

Measurement produces these records; reporting only reads them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# JSON format history:
# 1 - fsbench 0.1: run, environment, subjects, results with per-sample probe records.
# 2 - several clients through fio's client/server mode: environment.clients (each client's
#     host, port, fio version, OS and arch as fio reports them), result.clients (per-client
#     medians), sample.extra["clients"] (per-client figures of each sample), params.clients.
SCHEMA_VERSION = 2

CacheState = Literal[
    "cold-verified",
    "cold-unverified",
    "warm",
    "direct",
    "direct-not-honored",
    "n/a",
]
SubjectStatus = Literal["ok", "failed", "unavailable"]
ResultStatus = Literal["ok", "failed", "unsupported"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class CPU(_Model):
    """CPU seconds spent during one sample (or the median over samples), by part."""

    app_user_s: float = 0.0  # the benchmark process (fio or fsbench's worker)
    app_sys_s: float = 0.0
    driver_s: float = 0.0  # the FUSE daemon, all threads (0 for kernel drivers)
    kernel_threads_s: float = 0.0  # loop, kworker, jbd2, xfs/btrfs workers
    system_busy_s: float = 0.0  # whole machine, from /proc/stat
    system_iowait_s: float = 0.0
    per_gib_s: float | None = None  # (app + driver + kernel threads) per GiB moved
    per_gib: dict[str, float] = Field(default_factory=dict)  # the same, by part


class Device(_Model):
    read_bytes: int = 0
    write_bytes: int = 0
    read_ios: int = 0
    write_ios: int = 0


class Sample(_Model):
    """One measured repetition: the value and the probes that explain it."""

    value: float
    seconds: float
    bytes: int = 0  # bytes the workload moved in this sample (the amount of work)
    ops: int = 0
    cache: CacheState = "n/a"
    cpu: CPU = Field(default_factory=CPU)
    ctx_switches: int = 0
    device: Device = Field(default_factory=Device)
    extra: dict[str, Any] = Field(default_factory=dict)  # fio latency percentiles, IOPS, ...
    flags: list[str] = Field(default_factory=list)


class ClientFigures(_Model):
    """One client host's share of a multi-client result: medians over the samples."""

    client: str  # "host:port" as given to --clients
    samples: int = 0
    mib_s: float = 0.0  # the client's bytes over its own runtime
    iops: float = 0.0
    bytes: int = 0
    lat_us: dict[str, float] = Field(default_factory=dict)  # p50, p99, p99.9 (completion)
    usr_cpu: float = 0.0  # as fio reports it: percent of one CPU over the jobs' runtime
    sys_cpu: float = 0.0
    cpu_s: float = 0.0  # (usr + sys) CPU seconds on the client host


class Result(_Model):
    subject: str
    workload: str
    params: dict[str, Any] = Field(default_factory=dict)
    metric: str
    unit: str
    higher_is_better: bool = True
    status: ResultStatus = "ok"
    error: str | None = None
    samples: list[float] = Field(default_factory=list)
    sample_details: list[Sample] = Field(default_factory=list)
    median: float | None = None
    ci95: tuple[float, float] | None = None
    cv: float | None = None
    outliers: list[int] = Field(default_factory=list)
    cache: CacheState = "n/a"
    cpu: CPU = Field(default_factory=CPU)
    ctx_switches: float | None = None
    ctx_switches_per_gib: float | None = None
    device: Device = Field(default_factory=Device)
    write_amplification: float | None = None
    read_amplification: float | None = None
    flags: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    clients: list[ClientFigures] | None = None  # fio client/server runs only


class Subject(_Model):
    id: str  # "driver[:mount-options]" as the user wrote it
    driver: str
    fs: str
    kind: Literal["kernel", "fuse", "directory", "fake"]
    mount_options: str = ""
    effective_mount_options: str | None = None  # as /proc/self/mountinfo shows them
    driver_version: str | None = None
    mkfs_command: list[str] | None = None
    status: SubjectStatus = "ok"
    error: str | None = None


class ClientInfo(_Model):
    """A fio server the run drove, as it answered fsbench's probe before the first sample."""

    host: str
    port: int
    hostname: str | None = None  # the server's own name for itself
    fio_version: str | None = None
    os: str | None = None  # fio reports the OS and architecture, not the kernel release
    arch: str | None = None
    error: str | None = None  # unreachable, version mismatch: its samples fail


class Environment(_Model):
    kernel: str = ""
    cpu_model: str = ""
    cpus: int = 0
    memory_bytes: int = 0
    fio_version: str | None = None
    tools: dict[str, str | None] = Field(default_factory=dict)
    sysctl: dict[str, str] = Field(default_factory=dict)
    backing: str = ""
    backing_note: str | None = None
    image_size: int | None = None
    hostname: str = ""
    python: str = ""
    fsbench_version: str = ""
    clients: list[ClientInfo] = Field(default_factory=list)


class Run(_Model):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    started: str
    finished: str | None = None
    status: Literal["running", "complete", "incomplete"] = "running"
    command: list[str] = Field(default_factory=list)
    environment: Environment = Field(default_factory=Environment)
    subjects: list[Subject] = Field(default_factory=list)
    results: list[Result] = Field(default_factory=list)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)
