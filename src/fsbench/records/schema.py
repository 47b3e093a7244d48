"""The records of a run: what results.json holds and the SQLite store mirrors.

Measurement produces these records; reporting only reads them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fsbench.records.notecodes import Note, legacy, words

# JSON format history:
# 1 - fsbench 0.1: run, environment, subjects, results with per-sample probe records.
# 2 - fields that were attached as extras are declared: CPU.per_kop_ms, Result.workload_id,
#     Result.variant, Result.work_per_sample, Environment.cpu_caches, .notes, .interrupted_by,
#     .report_error (version 1 files carried them as extras and still load the same).
# 2 - environment.noise_floor: the same raw fio job repeated (MiB/s of each run, CV).
# 2 - VM runs: Environment.vms (guest kernel, kvm/emulated, VM CPUs and memory,
#     boot time), Subject.kernel (the guest kernel a subject ran on), result flag "emulated".
# 2 - environment.wakeup_us (same-CPU and cross-CPU wake-up cost); results' params.placement
#     (free|same|split) when --placement asks for more than free, and samples' extra.pinned.
# 2 - kernel trace probes: Sample.trace and Result.trace (FUSE requests, readahead, block,
#     writeback, wake-ups; see probes/trace.py), Environment.trace_probes.
# 2 - subjects: `integrity` (read-only checker, kernel log, digests after the workloads) and
#     `semantics` (features probed on the mount); both optional, so version 1 still loads.
# 2 - several clients through fio's client/server mode: environment.clients (each client's
#     host, port, fio version, OS and arch as fio reports them), result.clients (per-client
#     medians), sample.extra["clients"] (per-client figures of each sample), params.clients.
# 3 - Result.trace is one untimed traced run's (the last warm-up; no timed sample is traced, so
#     Sample.trace stays None), with that run's `work` and its rate `value`; version 2 files
#     (trace summed over the samples, no `value`) still load and are explained the same.
# 3 - adaptive repeats: Result.stopped (why a result got no more samples) and
#     Run.schedule (repeat mode, minimum and maximum samples, time budget and time used).
# 3 - Iozone matrix cells run in the native executor: params.engine "native" (was "fio") and
#     params.order; samples' extra gains opens, fsyncs and lat_max_us (free-form keys).
#     Later, additive: schedule.phases (the measuring time by phase); wakeup_us gains
#     same_cpu_end and cross_cpu_end (re-measured after the last sample).
#     Later, additive: fio params gain new_file (a write to a new file: seq-write/*) and
#     warmed_by ("write": seq-read/warm), so every variant's params differ from every other's.
#     Later, additive: subject_ctx_switches (app + daemon) on samples and results, and
#     subject_ctx_switches_per_gib; ctx_switches stays the whole machine's.
#     Later, additive: Result.verdict_family (the looks and comparisons the run's
#     error rate is spread over: fsbench.stats.verdict), schedule.verdict and schedule.orders (the
#     seeded subject order of every round).
#     Later, additive: Run.definitions, the user's own workloads, enough to run
#     them again from results.json alone: a fio job file (its text, included files, the ${ENV}
#     values it used, each section's options as written, effective and as fio reported them,
#     its phase) or a command (command, prepare, setup, cleanup, the --input tree's digest,
#     timeout, user, how each subject's cleanup ended). Their results carry workload
#     `fio:STEM` (variant: the phase's sections) or `command` (variant: the command's words).
#     Later, additive: Subject.transport (a FUSE subject's transport: dev-fuse, uring,
#     passthrough; the FUSE floor `passthrough_hp` names it, every other FUSE driver dev-fuse).
#     Later, additive: noise_floor gains mib_s_end and cv_end (re-measured after the last
#     sample); a move beyond both medians' intervals is one of environment.notes.
#     Later, additive: Subject.quirks (the driver's declared quirks the explanation reads).
#     Later, additive: Subject.aging (profile, seed, reference driver, cache key,
#     image and layout digests, utilization, extents per file, free-space fragmentation,
#     cost) for subjects `driver (aged:PROFILE)`.
#     Later, additive: Result.latency (fio results: median IOPS and p50/p99/p99.9
#     completion latency in µs over the samples); fio params gain ioengine values libaio and
#     io_uring with iodepth (named only off psync at depth 1), randrepeat and runtime_s; fio
#     samples' extra gains lat_pct_us (fio's whole percentile list). Later: refill_buffers
#     (the diskmark suite's, as KDiskMark passes it).
#     Later, additive: Subject.unavailable (what the machine lacks for an unavailable
#     subject: kernel, binary, build, fuse); older records' kernel lacks are read from `error`.
# 4 - Result.notes: every flag and warning as data, a code and its parameters
#     (fsbench.records.notecodes.Note), which every output words and groups the same way;
#     `flags` and `warnings` keep the notes' words for readers of the JSON. Version 3 and older
#     files (sentences only) load with notes read from their sentences (notecodes.legacy).
#     Later, additive: environment.virtualization and .why_emulated (how a VM would run on
#     this host: what the command the report suggests for drivers this kernel lacks meets).
#     Later, additive: fio samples' extra gains lat_basis ("submit-to-completion": lat_us and
#     lat_pct_us are fio's total latency, lat_ns); samples without it hold fio's completion
#     latency (clat_ns), which reports name so (fsbench.stats.latency.words).
#     Later, additive: Result.center (the geometric mean every output prints, which a ratio
#     divides) and ci95 on the log scale; older results get both from their samples when a
#     command reads them (fsbench.report.model.upgrade).
# 5 - Run.verdicts: the comparisons the report shows, decided once at the end of the run
#     (fsbench.report.model.verdicts: per result its table's baseline, the ratio, its interval
#     and confidence, the outcome, the verdict's words; a latency-bound result's p99 too), so
#     show, export, report and diff render what the run decided. Version 4 and older runs
#     get them computed once when a command reads them (fsbench.report.model.upgrade).
#     Such a run is then at version 5 and says what it was: `migrated_from` (an extra
#     field, in results.json exports too), which every export names beside the version.
SCHEMA_VERSION = 5

CacheState = Literal[
    "cold-verified",
    "cold-unverified",
    "warm",
    "direct",
    "direct-not-honored",
    "n/a",
]
SubjectStatus = Literal["ok", "failed", "unavailable"]
# What a machine lacks for a driver: its file system in the kernel, the FUSE binary, fsbench's
# build of it, FUSE itself.
Unavailable = Literal["kernel", "binary", "build", "fuse"]
StopReason = Literal["repeat", "settled", "budget", "max-repeat", "planned"]
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
    # Workloads that move no bytes (metadata, compile): CPU ms per 1000 operations, by part.
    per_kop_ms: dict[str, float] | None = None


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
    ctx_switches: int = 0  # the whole machine's (/proc/stat ctxt): every process and kworker
    # The subject's own: the app's and the FUSE daemon's (all threads). None: older runs.
    subject_ctx_switches: int | None = None
    device: Device = Field(default_factory=Device)
    extra: dict[str, Any] = Field(default_factory=dict)  # fio latency percentiles, IOPS, ...
    flags: list[str] = Field(default_factory=list)
    # Kernel trace probes over the sample: schema 2 only (since 3 no timed sample is traced).
    trace: dict[str, Any] | None = None


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
    # "seq-write/fsync": what `--workloads` names; the variant alone is "fsync".
    workload_id: str | None = None
    variant: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    metric: str
    unit: str
    higher_is_better: bool = True
    status: ResultStatus = "ok"
    error: str | None = None
    samples: list[float] = Field(default_factory=list)
    sample_details: list[Sample] = Field(default_factory=list)
    # Samples of a round that moved every subject of the table alike, measured again and
    # used by no interval (fsbench.schedule.stalled); each with extra["round"], 1-based.
    set_aside: list[Sample] = Field(default_factory=list)
    # The untraced warm-up runs' values, in order (a writing workload's go on until two agree):
    # what the first touches cost, shown beside the samples that did not pay them.
    warmup_values: list[float] = Field(default_factory=list)
    # The centre every output prints and a comparison's ratio divides: the samples' geometric
    # mean (fsbench.stats.describe); `ci95` its interval on the log scale (never negative).
    # Runs stored before it get both from their samples on load.
    center: float | None = None
    median: float | None = None
    ci95: tuple[float, float] | None = None
    cv: float | None = None
    outliers: list[int] = Field(default_factory=list)
    cache: CacheState = "n/a"
    cpu: CPU = Field(default_factory=CPU)
    ctx_switches: float | None = None  # the whole machine's (Sample.ctx_switches), median
    ctx_switches_per_gib: float | None = None
    subject_ctx_switches: float | None = None  # the app's and the daemon's, median
    subject_ctx_switches_per_gib: float | None = None
    device: Device = Field(default_factory=Device)
    write_amplification: float | None = None
    read_amplification: float | None = None
    # The notes as data (fsbench.records.notecodes): what every output words and groups. `flags` and
    # `warnings` are their words (the flags' for code that tests a prefix, like baseline.py).
    notes: list[Note] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # How much work one sample was (median bytes, ops, seconds): not a param, since params are
    # the result's identity and the amount is grown to last long enough.
    work_per_sample: dict[str, float] | None = None
    # The kernel probes over the result's traced run (probes/trace.py, sampler.Sampler.warm_up).
    trace: dict[str, Any] | None = None
    clients: list[ClientFigures] | None = None  # fio client/server runs only
    # fio results: median iops and p50_us/p99_us/p99.9_us over the samples (fsbench.stats.latency).
    latency: dict[str, float] | None = None
    # Why this result got no more samples: "repeat" (the fixed --repeat N was reached),
    # "settled" (its ratio to the baseline is significant or within ±2 %; for a lone or
    # baseline result: nothing left open), "budget" (still open when the time budget ended),
    # "max-repeat" (still open at --max-repeat), "planned" (still open after the samples its
    # variance planned at the interim look), None: older runs, failed or interrupted.
    stopped: StopReason | None = None
    # The family fsbench.stats.verdict makes this result's interval for ({looks, alpha, tails,
    # subjects, band} per table, with its variance prior {d0, s0sq}; older runs {looks,
    # comparisons, alpha} over the run; None: judged as one comparison at one look).
    verdict_family: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _notes_of_older_runs(cls, data: Any) -> Any:
        # Schema 3 and older stored only sentences: each read into a note once, here.
        if isinstance(data, dict) and "notes" not in data:
            said = [*data.get("flags", []), *data.get("warnings", [])]
            data = {**data, "notes": [legacy(t) for t in said]}
        return data

    def add_note(self, note: Note) -> None:
        """A note found after aggregation (a damaged volume, an emulated VM), with its words
        among the flags."""
        if note not in self.notes:
            self.notes.append(note)
        if words(note) not in self.flags:
            self.flags.append(words(note))


# The features in the order every table shows them, with the label people know them by.
FEATURES: dict[str, str] = {
    "o_direct": "O_DIRECT honoured",
    "fallocate": "fallocate",
    "fiemap": "FIEMAP",
    "seek_hole": "SEEK_HOLE/SEEK_DATA",
    "sparse_files": "sparse files",
    "reflink": "reflink (FICLONE)",
    "copy_file_range": "copy_file_range",
    "xattr_user": "xattr user.*",
    "posix_permissions": "chmod honoured",
    "case_sensitive": "case-sensitive names",
    "name_max": "max name length",
    "max_file_size": "max file size",
}


class Feature(_Model):
    """One probed file-system feature: supported (None: unknown), a value for limits, and what
    the probe saw."""

    supported: bool | None = None
    value: int | None = None
    detail: str = ""


class Checker(_Model):
    """The format's own checker, run read-only on the unmounted image."""

    command: list[str]
    version: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    covers: str = ""  # what this checker looks at (ntfsfix -n: little)
    says: str = ""  # the checker's own words on a problem (its notable lines)
    output_tail: str = ""


# On every result of a subject whose volume came back damaged: shown, never ranked.
INTEGRITY_FAILED_FLAG = "integrity-failed"


class Integrity(_Model):
    """Whether the volume came back undamaged after the workloads: `failed` when the checker,
    a kernel log line or a digest says damage; the speed figures are then not ranked."""

    status: Literal["ok", "failed", "not-checked"] = "not-checked"
    problems: list[str] = Field(default_factory=list)  # first the checker's own words
    checker: Checker | None = None
    kernel_log: list[str] = Field(default_factory=list)  # warnings/errors naming the device
    digest_files: int = 0
    digest_bytes: int = 0
    digest_failures: list[str] = Field(default_factory=list)  # "path: why"
    not_checked: list[str] = Field(default_factory=list)  # parts skipped, and why
    seconds: float = 0.0  # what the checks added to the run


class Quirk(_Model):
    """A driver's known behaviour that explains one of its FUSE figures. Declared with the
    driver (`lab/drivers.py`), recorded with each subject, and read by the explanation, which
    so knows no driver by name: on a FUSE `op` whose requests are mostly `request_size` bytes
    (any size: None), on an image smaller than `image_below` (any: None), it adds `says`
    ("{image}" is the image's size) to the factor, and `brief` to its short form."""

    op: str  # a FUSE opcode: "WRITE", "READ", ...
    request_size: int | None = None
    image_below: int | None = None
    says: str
    brief: str


class Aging(_Model):
    """How a subject's aged image was made (aging/recipe.py) and what aging did to it."""

    profile: str
    seed: int
    key: str  # the cache entry: format, mkfs, profile, seed, size, driver, tool versions
    reference_driver: str  # the one driver that aged the image every subject gets a copy of
    reference_driver_version: str | None = None
    mount_options: str = ""
    image_digest: str = ""  # XXH3-128 of the aged image, checked on every reuse
    layout_digest: str = ""  # XXH3-128 of every file's size and physical extents
    reused: bool = False  # copied from the cache (True) or aged in this run
    aging_seconds: float = 0.0  # the aging workload's time when the image was made
    setup_seconds: float = 0.0  # this run's cost: the checked copy, or aging and probes
    utilization: float = 0.0  # used share of the volume after aging (statvfs)
    workload: dict[str, Any] = Field(default_factory=dict)  # ops, bytes written, files, dirs
    files: dict[str, Any] = Field(default_factory=dict)  # extents per file
    free_space: dict[str, Any] = Field(default_factory=dict)  # free extents and their sizes
    note: str | None = None


class Subject(_Model):
    id: str  # "driver[:mount-options]" as the user wrote it
    driver: str
    fs: str
    kind: Literal["kernel", "fuse", "directory", "fake"]
    mount_options: str = ""
    effective_mount_options: str | None = None  # as /proc/self/mountinfo shows them
    # Who served the mount, from the kernel's lists (mount type, module loaded): proof that
    # `ntfs` was the kernel's driver and not ntfs-3g's mount.ntfs.
    served_by: str | None = None
    # The pristine image's sha256 when one image was made for every guest of a run over
    # several kernels (identical bytes: vm/images.py); None: the lab formatted its own.
    image_sha256: str | None = None
    driver_version: str | None = None
    mkfs_command: list[str] | None = None
    status: SubjectStatus = "ok"
    error: str | None = None
    # Unavailable: what this machine lacks (drivers.Availability.lacks), for the renderers to
    # group on; `error` says it in words.
    unavailable: Unavailable | None = None
    kernel: str | None = None  # the guest kernel's name (src/fsbench/vm); None: the host's
    # Unavailable here: a kernel fsbench knows (vm/kernels.py) that has the driver, so a report
    # can print the `--kernel NAME` command that measures it.
    available_in: str | None = None
    # FUSE subjects: how the daemon gets its requests (dev-fuse, uring, passthrough).
    transport: str | None = None
    integrity: Integrity | None = None
    semantics: dict[str, Feature] | None = None
    quirks: list[Quirk] = Field(default_factory=list)  # the driver's, as it declares them

    aging: Aging | None = None  # an aged image's record; None: a fresh image

    @model_validator(mode="before")
    @classmethod
    def _lacks_of_older_records(cls, data: Any) -> Any:
        """Records written before `unavailable` existed said a kernel's lack only in words."""
        if (
            isinstance(data, dict)
            and data.get("status") == "unavailable"
            and data.get("unavailable") is None
            and data.get("kind") == "kernel"
            and str(data.get("error") or "").startswith("this kernel")
        ):
            return {**data, "unavailable": "kernel"}
        return data


Virtualization = Literal["kvm", "emulated"]


class VM(_Model):
    """One throw-away VM a run booted: which kernel, how it was virtualized, how big."""

    kernel: str  # the name given: "debian-6.12", "path:/x/bzImage"
    release: str = ""  # uname -r in the guest
    source: str = ""  # the package and version, or the image path
    packages: dict[str, str] = Field(default_factory=dict)  # Debian: each package -> version
    sha256: str | None = None
    virtualization: Virtualization = "emulated"
    why_emulated: str | None = None
    cpus: int = 0
    memory_bytes: int = 0
    boot_seconds: float | None = None
    subjects: list[str] = Field(default_factory=list)
    # Subjects fsbench added as the anchor between kernels (the same FUSE daemon on each).
    anchors: list[str] = Field(default_factory=list)
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None


# A cross-CPU wake-up this many times a same-CPU one is costly: FUSE pays it on every request.
COSTLY_WAKEUP_RATIO = 2.0


class WakeupCost(_Model):
    """What waking a thread blocked in read() costs here, in µs: half a pipe round trip between
    two threads pinned to one CPU (same_cpu) and to two different CPUs (cross_cpu; None on a
    machine with one CPU). FUSE pays one per direction of every request."""

    same_cpu: float
    cross_cpu: float | None = None
    cpus: list[int] = Field(default_factory=list)  # the CPUs the two threads were pinned to
    method: str = ""
    # The same two, measured again after the last sample (None: not re-measured). On a VM the
    # cross-CPU figure swings 10× between hours; two points say whether it held during the run.
    same_cpu_end: float | None = None
    cross_cpu_end: float | None = None

    @property
    def costly(self) -> bool:
        """A cross-CPU wake-up at least COSTLY_WAKEUP_RATIO times a same-CPU one."""
        cross = self.cross_cpu
        return (
            cross is not None and self.same_cpu > 0 and cross >= COSTLY_WAKEUP_RATIO * self.same_cpu
        )


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
    cpu_caches: dict[str, int] = Field(default_factory=dict)  # bytes per level (L1d, L2, ...)
    notes: list[str] = Field(default_factory=list)  # what about this machine moves results
    interrupted_by: str | None = None  # SIGINT / SIGTERM: the run is incomplete
    report_error: str | None = None  # report.html could not be written: why
    # The machine's own spread: {"job", "runs", "mib_s": [...], "cv"} at the start, and
    # "mib_s_end", "cv_end" re-measured after the last sample (env.remeasure_noise_floor).
    noise_floor: dict[str, Any] | None = None
    vms: list[VM] = Field(default_factory=list)
    wakeup_us: WakeupCost | None = None  # measured at the start of the run
    # Each kernel trace probe's status in this run: "ok", or why it was unavailable/off.
    trace_probes: dict[str, str] = Field(default_factory=dict)
    clients: list[ClientInfo] = Field(default_factory=list)
    # How a VM would run here (kvm or emulated, and why): the suggested `--kernel` command's
    # caveat. None: older runs.
    virtualization: Virtualization | None = None
    why_emulated: str | None = None


class Schedule(_Model):
    """How many samples the run took and why: fixed (--repeat N) or adaptive (--repeat auto,
    the default: at least `repeat`, more only where an answer is open)."""

    adaptive: bool = False
    repeat: int = 3  # samples per result (fixed) or the minimum (adaptive)
    max_repeat: int | None = None
    # Seconds from the command's start (images, noise floor, measuring) after which no round
    # is started (until schema 3's phases: seconds of measuring).
    time_budget_s: float | None = None
    spent_s: float | None = None  # measuring time the rounds took
    # spent_s by phase (fsbench.schedule.phases.ORDER, and "other"): what the timed runs cost
    # against their preparation, cache drops, warm-up and bpftrace. Empty: older runs.
    phases: dict[str, float] = Field(default_factory=dict)
    # The time anatomy around the rounds: seconds before the first round by step (images,
    # mounts, semantics, integrity set, noise floor), the command's seconds until its first
    # timed sample began, and the timed runs' own seconds (the data time, summed over every
    # kept iteration: phases' "run" less this is what starting and stopping them cost).
    setup: dict[str, float] = Field(default_factory=dict)
    first_sample_s: float | None = None
    data_s: float | None = None
    # The verdict procedure's family ({looks, comparisons, alpha, confidence, method}).
    verdict: dict[str, Any] = Field(default_factory=dict)
    # The subjects' order in each round (randomised with order_seed, so a position effect hits
    # every subject alike instead of always the last).
    order_seed: int | None = None
    orders: list[list[str]] = Field(default_factory=list)
    # file: backing: the image file each subject used in each round (dealt out again before
    # every round, targets.Rotation, so where an image lies varies inside each interval).
    images: list[dict[str, str]] = Field(default_factory=list)


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
    schedule: Schedule | None = None  # None: older runs
    # The user's workloads (fio job files, commands), as workloads/fiofile.py and
    # workloads/command.py record them; built-ins need none (their code is their definition).
    definitions: list[dict[str, Any]] = Field(default_factory=list)
    # The comparisons the report shows, decided at the end of the run (schema 5; see above):
    # one record per result that has a baseline, `index` into `results`.
    verdicts: list[dict[str, Any]] = Field(default_factory=list)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)
