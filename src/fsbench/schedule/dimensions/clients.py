"""fio workloads driven from many client hosts at once, through fio's client/server mode.

Every client host mounts the same shared file system at the same path as this host and runs
`fio --server`; fsbench writes each `FioJob` as a job file per client (each client its own file
names, so clients never share a file) and runs `fio --client=A jobA --client=B jobB ...`. fio
reports every client (`client_stats`, one entry per host) and, with more than one, an
"All clients" aggregate: the total is the aggregate, the per-client figures go to
`Sample.extra["clients"]` and their medians to `Result.clients`.

fsbench adds no distribution layer of its own: what runs on the clients is fio's. It only
bounds every wait (a probe per client before the first sample, a whole-run timeout around each
fio invocation) and kills its own fio client process on every exit path.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import ipaddress
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fsbench.errors import Unsupported, UsageError, WorkloadFailed
from fsbench.probes import processes
from fsbench.records.schema import ClientInfo, Sample
from fsbench.schedule.dimensions.fio_clients import (
    DEFAULT_PORT,
    Client,
    merge_clients,
    parse_client_json,
    summarize_clients,
    why_failed,
)
from fsbench.workloads.base import (
    ChildResult,
    Declared,
    Measurement,
    Target,
    Workload,
    children_usage,
)
from fsbench.workloads.fio import FIO_RUNTIME_CAP_S, FioJob, fio_binary, fio_measurement

# A probe is one round trip per client; a host that does not answer in this long is down (a
# TCP connect to a silent host would otherwise wait ~2 minutes for its SYN retries).
PROBE_TIMEOUT_S = 10.0
# Each sample runs every client for this long (× --scale, at least 1 s), time-based: all
# clients over the same window, so their rates add up to the total.
CLIENT_SAMPLE_S = 2.0
# Beyond the job's own runtime cap: fio's client gives up on a silent server after a few
# 5 s command timeouts (~40 s measured here); this bounds the whole invocation above that.
CLIENT_MARGIN_S = 60.0
STOP_GRACE_S = 10.0

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def parse_clients(text: str) -> list[Client]:
    """`HOST[:PORT],...` (IPv6 as `[ADDR]:PORT`) into clients; bad input is one line."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise UsageError(f"--clients {text!r}: give HOST[:PORT],... e.g. nas1,nas2:8766")
    out: list[Client] = []
    for item in items:
        host, port_text = item, None
        if item.startswith("["):
            m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(.*))?", item)
            if not m:
                raise UsageError(f"--clients: {item!r} is not [IPV6-ADDRESS]:PORT")
            host, port_text = m.group(1), m.group(2)
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise UsageError(f"--clients: {host!r} is not an IPv6 address") from None
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        elif ":" in item:
            raise UsageError(f"--clients: write an IPv6 address as [{item}]:PORT")
        if ":" not in host and not _HOST.match(host):
            raise UsageError(f"--clients: {host!r} is not a host name or address")
        port = DEFAULT_PORT
        if port_text is not None:
            if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
                raise UsageError(f"--clients: port {port_text!r} of {host} is not 1-65535")
            port = int(port_text)
        c = Client(host, port)
        if c in out:
            raise UsageError(f"--clients: {c.name} is listed twice")
        out.append(c)
    return out


def _sweep_fits(counts: list[int], n_clients: int) -> list[int]:
    if max(counts) > n_clients:
        raise UsageError(
            f"--clients-sweep {','.join(map(str, counts))!r}: {max(counts)} clients asked, "
            f"{n_clients} given"
        )
    return counts


def apply_clients(
    workloads: list[Workload],
    clients: list[Client] | None,
    sweep: list[int] | None,
    scale: float = 1.0,
) -> list[Workload]:
    """Each fio workload once per client count; any other workload is refused (one line).
    `clients` and `sweep` come parsed from fsbench.cli.options (`--clients`, `--clients-sweep`)."""
    if clients is None:
        if sweep is not None:
            raise UsageError("--clients-sweep needs --clients HOST[:PORT],...")
        return workloads
    counts = _sweep_fits(sweep, len(clients)) if sweep else [len(clients)]
    forms = [fio_form(w) for w in workloads]
    pairs = zip(workloads, forms, strict=True)
    refused = list(dict.fromkeys(w.name for w, f in pairs if f is None))
    if refused:
        raise UsageError(
            f"--clients runs only fio workloads; {', '.join(refused)} "
            f"{'has' if len(refused) == 1 else 'have'} no multi-client form "
            "(drop it or run without --clients)"
        )
    group = ClientGroup(tuple(clients))
    return [ClientsJob(f, group, n, scale) for f in forms if f is not None for n in counts]


def fio_form(w: Workload) -> FioJob | None:
    """The workload as a fio job: itself, or its declared fio form (the Iozone cells, which
    run natively otherwise); None: it has none."""
    if isinstance(w, FioJob):
        return w
    form = w.fio_job
    return form() if callable(form) else None


# -- the clients' probe ------------------------------------------------------------------------
_PROBE = re.compile(
    r"hostname=(?P<hostname>[^,]*), be=\d+, (?P<bits>\d+)-bit, os=(?P<os>[^,]*), "
    r"arch=(?P<arch>[^,]*), fio=(?P<fio>[^,\s]*)"
)


def parse_probe(stdout: str) -> dict[str, str] | None:
    """What a fio server says of itself when a client connects (fio prints it, normal output)."""
    m = _PROBE.search(stdout)
    return m.groupdict() if m else None


@dataclass
class ClientGroup:
    """The clients of one run, probed once (before the first sample) and shared by its jobs."""

    clients: tuple[Client, ...]
    info: dict[Client, ClientInfo] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, workdir: str) -> list[ClientInfo]:
        """Probe every client at once (each bounded); a bad one is recorded with why."""
        with self.lock:
            if not self.info:
                self.info = probe_clients(list(self.clients), workdir)
        return [self.info[c] for c in self.clients]

    def problem(self, clients: tuple[Client, ...]) -> str | None:
        bad = [f"client {c.name}: {self.info[c].error}" for c in clients if self.info[c].error]
        return "; ".join(bad) if bad else None


def probe_clients(clients: list[Client], workdir: str) -> dict[Client, ClientInfo]:
    """Connect to every server with an empty job: fio answers with its version, OS and arch."""
    local = fio_version()
    os.makedirs(workdir, exist_ok=True)
    empty = os.path.join(workdir, "probe.fio")
    with open(empty, "w") as f:
        f.write("[global]\n")
    procs: dict[Client, subprocess.Popen[str]] = {}
    try:
        for c in clients:
            procs[c] = _spawn([fio_binary(), c.fio_arg, empty])
        return _probe_answers(procs, local)
    except BaseException:  # an interrupt: no probe stays behind
        for proc in procs.values():
            if proc.poll() is None:
                _kill(proc)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(empty)


def _probe_answers(
    procs: dict[Client, subprocess.Popen[str]], local: str | None
) -> dict[Client, ClientInfo]:
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    out: dict[Client, ClientInfo] = {}
    for c, proc in procs.items():
        info = ClientInfo(host=c.host, port=c.port)
        try:
            stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc)
            info.error = f"no answer within {PROBE_TIMEOUT_S:.0f} s"
            out[c] = info
            continue
        found = parse_probe(stdout)
        if found is None:
            info.error = _why_not(stderr or stdout, c) or "fio server did not answer"
        else:
            info.hostname, info.os, info.arch = found["hostname"], found["os"], found["arch"]
            info.fio_version = found["fio"]
            if local and info.fio_version != local:
                info.error = (
                    f"fio version mismatch: the client runs {info.fio_version}, this host {local}"
                )
        out[c] = info
    return out


def fio_version() -> str | None:
    try:
        res = subprocess.run(
            [fio_binary(), "--version"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


def _why_not(text: str, c: Client) -> str | None:
    lines = [ln.strip().removeprefix("fio: ") for ln in text.splitlines() if ln.strip()]
    return "; ".join(dict.fromkeys(lines))[:300] if lines else None


# -- the fio client process, bounded and never left behind -------------------------------------
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Even a SIGKILLed fsbench takes its fio client along: nothing of ours stays behind.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _spawn(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: killed as a whole
        preexec_fn=_die_with_parent,
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    """SIGINT first: fio's client then tells every server to quit its jobs (measured here:
    gone within 0.1 s), so no job keeps writing on a client host; SIGKILL if it will not."""
    processes.stop_child(proc, signal.SIGINT, STOP_GRACE_S)


def run_fio_client(argv: list[str], timeout: float) -> ChildResult:
    """The fio client with its CPU (RUSAGE_CHILDREN delta), killed on timeout or interrupt."""
    before = children_usage()
    t0 = time.perf_counter()
    proc = _spawn(argv)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise WorkloadFailed(f"fio client stopped: no result within {timeout:.0f} s") from None
    except BaseException:  # an interrupt: take the client down before unwinding
        _kill(proc)
        raise
    used = children_usage() - before
    seconds = time.perf_counter() - t0
    return ChildResult(proc.returncode, out, err, seconds, used.user_s, used.sys_s, used.ctx)


# -- job files ---------------------------------------------------------------------------------
def job_section(argv: list[str], name: str, timed: bool = False) -> str:
    """fio's command-line options (as FioJob builds them) as one job file section; a timed
    section leaves out the runtime cap (the caller sets the sample's runtime)."""
    lines = [f"[{name}]"]
    skip = ("--output-format", "--name=", *(("--runtime=",) if timed else ()))
    for a in argv[1:]:
        if not a.startswith("--") or a.startswith(skip):
            continue
        lines.append(a[2:] if "=" in a else f"{a[2:]}=1")
    return "\n".join(lines) + "\n"


# -- the workload --------------------------------------------------------------------------------
def _of_job(attr: str) -> Any:
    """A read-only attribute that is the wrapped FioJob's."""
    return property(lambda self: getattr(self.job, attr), doc=f"the job's {attr}")


@dataclass(frozen=True, eq=False)
class ClientsJob(Declared):
    """One FioJob run from the first `count` clients at once, `numjobs` jobs on each."""

    job: FioJob
    group: ClientGroup
    count: int
    scale: float = 1.0  # --scale: stretches the time each sample runs
    cache: str = "none"  # the runner cannot drop caches on other hosts: nothing to prepare
    tools: tuple[str, ...] = ("fio",)
    read_only_ok: bool = False
    # One fio client round trip costs ~1.5 s of set-up here, so a sample is one time-based
    # run of `sample_s` on every client, never a train of short iterations.
    min_sample_s: float = 0.0

    @property
    def merge_extra(self) -> dict[str, Any]:
        return {**self.job.merge_extra, "clients": merge_clients}

    @staticmethod
    def summarize_samples(samples: list[Sample]) -> dict[str, Any]:
        return {"clients": summarize_clients(samples)}

    # What the clients run measures and touches is its job's.
    name = _of_job("name")
    metric = _of_job("metric")
    unit = _of_job("unit")
    higher_is_better = _of_job("higher_is_better")
    is_write = _of_job("is_write")
    fileset = _of_job("fileset")

    @property
    def description(self) -> str:
        return f"{self.job.description}; from {self.count} client host(s) at once"

    @property
    def id(self) -> str:
        return f"{self.job.id}-c{self.count}"

    @property
    def clients(self) -> tuple[Client, ...]:
        return self.group.clients[: self.count]

    def params(self, target: Target) -> dict[str, Any]:
        return {
            **self.job.params(target),
            "clients": self.count,
            "seconds_per_sample": self.sample_s,  # time-based on every client
            "io_per_sample": None,
            # Caches live on the client hosts, out of the runner's reach.
            "cache": "n/a",
        }

    def _jobname(self, i: int) -> str:
        return f"{self.job.fileset}.c{i}"

    def _files(self, target: Target) -> list[list[str]]:
        """Per client job, the files already there. A fio server prefixes the names it makes
        with its own address ("10.0.0.2.seq.c0.0.0"), hence the pattern."""
        return [
            glob.glob(os.path.join(glob.escape(target.workdir), f"*{self._jobname(i)}.{j}.0"))
            for i in range(len(self.clients))
            for j in range(self.job.numjobs)
        ]

    @property
    def sample_s(self) -> float:
        return max(1.0, CLIENT_SAMPLE_S * self.scale)

    def _invoke(self, target: Target, what: str, timed: bool = False, **kw: Any) -> ChildResult:
        """One fio client run over this job's clients, each with its own job file."""
        argv = [fio_binary(), "--output-format=json"]
        extra = f"time_based=1\nruntime={self.sample_s:g}\n" if timed else ""
        for i, c in enumerate(self.clients):
            path = os.path.join(target.workdir, f"client-{self.id.replace('/', '_')}-{i}.fio")
            with open(path, "w") as f:
                f.write(job_section(self.job.argv(target, **kw), self._jobname(i), timed) + extra)
            argv += [c.fio_arg, path]
        res = run_fio_client(argv, timeout=FIO_RUNTIME_CAP_S + CLIENT_MARGIN_S)
        if res.returncode != 0 and not timed:
            why = why_failed(res.stdout, res.stderr, list(self.clients))
            raise WorkloadFailed(f"{what} {self.id} on the clients: {why}")
        return res

    def prepare(self, target: Target) -> None:
        """The clients lay out (or warm) their own files: what a client has cached is its own."""
        if self.job.unsupported:
            raise Unsupported(self.job.unsupported)
        self.group.check(target.workdir)
        bad = self.group.problem(self.clients)
        if bad:
            raise WorkloadFailed(bad)
        os.makedirs(target.workdir, exist_ok=True)
        files = self._files(target)
        if self.job.fresh_file:
            for f in (f for per_job in files for f in per_job):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)
            return
        size = self.job.each_file_size(target)
        if self.job.cache == "warm" and self.job.warm_by == "write":
            self._invoke(target, "writing", rw="write", end_fsync=True, direct=False, whole=True)
            return
        if not all(any(_size(f) >= size for f in per_job) for per_job in files):
            self._invoke(
                target, "laying out files for", rw="write", end_fsync=True, direct=False, whole=True
            )
        if self.job.cache == "warm":
            self._invoke(target, "warming", rw="read", direct=False, whole=True)

    def run(self, target: Target) -> Measurement:
        res = self._invoke(target, "run", timed=True)
        clients = list(self.clients)
        out = parse_client_json(
            res.stdout, res.stderr, "write" if self.job.is_write else "read", clients
        )
        if res.returncode != 0:
            why = why_failed(res.stdout, res.stderr, clients)
            raise WorkloadFailed(f"fio client mode failed: {why or 'exit ' + str(res.returncode)}")
        total = out["total"]
        flags = []
        if self.job.cache in ("cold", "direct", "warm"):
            flags.append(
                f"cannot-drop-caches: remote clients (the job asks {self.job.cache}; "
                "caches on the client hosts are as they are)"
            )
        # The "All clients" figures as fio_measurement takes a job's (its rate: their bytes
        # over the longest runtime); a run timed at 0 s fails as a job's does.
        figures = ("bytes", "seconds", "ios", "iops", "lat_us", "lat_mean_us")
        m = fio_measurement(
            {
                **{k: total[k] for k in figures},
                "fio_version": out["fio_version"],
                "clients": out["clients"],
            },
            res,
        )
        m.flags = flags
        return m


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def check_clients(workloads: list[Workload], workdir: str) -> list[ClientInfo]:
    """Probe the run's clients (if any) once; their answers go into the environment."""
    for w in workloads:
        if isinstance(w, ClientsJob):
            return w.group.check(workdir)
    return []
