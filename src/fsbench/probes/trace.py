"""Kernel trace probes: FUSE requests, readahead windows, block requests, writeback, wake-ups.

No timed sample is ever traced: a probe on every FUSE request costs that request time (measured
by bench/probe_overhead.py: ntfs-3g's write rate fell 12-18 % with the probes attached). The
last warm-up iteration of each subject and workload is the *traced run* instead (no warm-up:
no traced run, and the result says so), and the explanation is drawn from it. bpftrace is
started for that run (~1.4 s to compile here) and killed right after it, so no probe is
attached while samples are timed.

bpftrace aggregates tracepoint events in kernel maps (counts, sums, log2 histograms), so no
event is copied to user space; fsbench marks the traced run's start and end with a close() of
a magic descriptor (EBADF, harmless) that the script recognizes: the start clears the maps, the
end prints them and a line "fsbench-end SEQ". bpftrace runs its print and clear actions in the
order the events were emitted, and fsbench waits for each marker's acknowledgement line, so the
figures are exactly the events between the two markers (plus what arrives in the few
milliseconds bpftrace's user space takes to read the maps).

Probes are records (`fsbench/records/probes/`, `PROBES`): a name, the tracepoints it needs, what it
yields, its bpftrace fragment and how its maps are parsed. The script is assembled from the
probes this kernel can serve; the others are reported unavailable with the reason, and the run
goes on.

Maps are keyed so one bpftrace serves every subject: FUSE by connection (the kernel dev_t of
the mount), block by device dev_t, readahead by superblock dev_t, writeback by bdi name, the
scheduler by the woken task's comm. `SubjectKeys` picks a subject's share at sample time.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsbench.probes import usdt
from fsbench.probes.procfs import ProcFS
from fsbench.records.probes import PROBES
from fsbench.records.probes.numbers import hist_percentile
from fsbench.records.probes.numbers import percentiles as _percentiles
from fsbench.records.probes.record import Probe, SubjectKeys

# The probe records (what each collects, parses and explains) are in fsbench/records/probes/; these
# names stay here for the runner and the tests that reach them through this module.
__all__ = ["PROBES", "Probe", "SubjectKeys", "_percentiles", "hist_percentile"]

TRACEFS = Path(ProcFS().path("sys/kernel/tracing"))
# Descriptor numbers nothing can have open (above the kernel's nr_open ceiling of 2^20):
# close() on them fails with EBADF and only the marker probe notices.
MARK_BEGIN = 1_000_000_000
MARK_END = 1_100_000_000
SEQ_SPAN = 100_000_000
ATTACH_TIMEOUT_S = 30.0
MARK_TIMEOUT_S = 10.0
PROBE_NAMES = tuple(p.name for p in PROBES)
# All of them: they only run in the untimed traced run, so even sched (which fires on every
# wake-up on the machine) costs no sample anything.
DEFAULT_PROBES = PROBE_NAMES
MARKER_TRACEPOINT = "syscalls/sys_enter_close"


# -- availability ---------------------------------------------------------------------------------
# Set when fsbench mounted tracefs itself (left mounted: harmless, and the kernel's own place).
MOUNTED_NOTES: list[str] = []


def ensure_tracefs(root: Path = TRACEFS) -> str | None:
    """tracefs mounted at `root` (mounting it if absent); None, or why it is not there."""
    if (root / "events").is_dir():
        return None
    try:
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tracefs", "nodev", str(root)],
            check=True,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"tracefs is not mounted at {root} and could not be mounted ({e})"
    if not (root / "events").is_dir():
        return f"tracefs mounted at {root} has no events/ directory"
    MOUNTED_NOTES.append(f"tracefs was not mounted: fsbench mounted it at {root} (left mounted)")
    return None


def missing_tracepoints(probe: Probe, events: Path) -> list[str]:
    return [tp for tp in probe.tracepoints if not (events / tp / "format").is_file()]


def availability(
    events: Path | None = None, wanted: Iterable[str] | None = None, daemons: Iterable[str] = ()
) -> dict[str, str]:
    """Each probe's status on this machine: "ok" or why not. `wanted`: the probes asked for
    (--trace-probes); None: the default set. `daemons`: the FUSE daemon binaries of the run
    (a USDT probe needs one that carries it)."""
    if os.geteuid() != 0:
        return dict.fromkeys(PROBE_NAMES, "needs root")
    if shutil.which("bpftrace") is None:
        return dict.fromkeys(PROBE_NAMES, "bpftrace is not installed (scripts/setup.sh)")
    if events is None:
        why = ensure_tracefs()
        if why:
            return dict.fromkeys(PROBE_NAMES, why)
        events = TRACEFS / "events"
    if not (events / MARKER_TRACEPOINT / "format").is_file():
        why = f"tracepoint {MARKER_TRACEPOINT} (the sample marker) is missing on this kernel"
        return dict.fromkeys(PROBE_NAMES, why)
    out = {}
    # Probes turned off by name (comma-separated), e.g. to measure one probe's cost.
    off = {n.strip() for n in os.environ.get("FSBENCH_TRACE_OFF", "").split(",") if n.strip()}
    asked = set(DEFAULT_PROBES if wanted is None else wanted)
    for p in PROBES:
        if p.name in off:
            out[p.name] = "off (FSBENCH_TRACE_OFF)"
            continue
        if p.name not in asked:
            out[p.name] = "off (not in --trace-probes)"
            continue
        missing = missing_tracepoints(p, events)
        out[p.name] = f"tracepoint {', '.join(missing)} missing on this kernel" if missing else "ok"
        if p.usdt is not None and not missing:
            out[p.name] = usdt.usable(daemons, p.usdt)[1] or "ok"
    return out


# -- the script -----------------------------------------------------------------------------------
def build_script(probes: Iterable[Probe], marker_pid: int, daemons: Iterable[str] = ()) -> str:
    """The bpftrace program for the given probes, with the sample markers of `marker_pid`; a
    USDT probe attaches to those of `daemons` that carry it."""
    probes = list(probes)
    daemons = list(daemons)
    maps = [m for p in probes for m in p.maps]
    clear = " ".join(f"clear(@{m});" for m in maps)  # not the scratch maps: see Probe
    show = " ".join(f"print(@{m});" for m in maps)
    parts = ['BEGIN { printf("fsbench-ready\\n"); }']
    parts += [
        (
            usdt.fill(p.script, usdt.usable(daemons, p.usdt)[0], p.usdt) if p.usdt else p.script
        ).strip()
        for p in probes
    ]
    pred = f"pid == {marker_pid}"
    parts.append(
        f"tracepoint:syscalls:sys_enter_close /{pred} && args->fd >= {MARK_BEGIN} && "
        f"args->fd < {MARK_BEGIN + SEQ_SPAN}/ {{ {clear} "
        f'printf("fsbench-begin %d\\n", args->fd - {MARK_BEGIN}); }}'
    )
    parts.append(
        f"tracepoint:syscalls:sys_enter_close /{pred} && args->fd >= {MARK_END} && "
        f"args->fd < {MARK_END + SEQ_SPAN}/ {{ {show} "
        f'printf("fsbench-end %d\\n", args->fd - {MARK_END}); }}'
    )
    # Less to print at exit: bpftrace dumps every map left on SIGINT (the scratch maps' few
    # in-flight entries remain; nothing reads that dump).
    parts.append(f"END {{ {clear} }}")
    return "\n".join(parts) + "\n"


# -- reading bpftrace's JSON output ---------------------------------------------------------------
def parse_maps(lines: Iterable[str]) -> dict[str, dict[str, Any]]:
    """bpftrace `-f json` lines -> {map name without @: {key string: value}}; histograms as
    {bucket lower bound: count}."""
    maps: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("type") not in ("map", "hist", "stats"):
            continue
        for name, data in (rec.get("data") or {}).items():
            out: dict[str, Any] = {}
            if isinstance(data, dict):
                for k, v in data.items():
                    if isinstance(v, list):  # a histogram: [{min, max, count}, ...]
                        out[k] = {
                            int(b.get("min", 0) or 0): int(b["count"])
                            for b in v
                            if isinstance(b, dict) and b.get("count")
                        }
                    else:
                        out[k] = v
            maps[name.lstrip("@")] = out
    return maps


def kdev(st_dev: int) -> int:
    """A user-space dev_t as the kernel's internal one (major << 20 | minor)."""
    return (os.major(st_dev) << 20) | os.minor(st_dev)


def subject_keys(
    mountpoint: str | None,
    block_device: str | None,
    fuse: bool,
    app_comms: Iterable[str],
    daemon_pid: int | None,
) -> SubjectKeys:
    """The keys of a subject as it is mounted now (a FUSE remount has a new connection)."""
    keys = SubjectKeys()
    bdis: list[str] = []
    if mountpoint:
        with contextlib.suppress(OSError):
            st = os.stat(mountpoint).st_dev
            keys.sb_devs = (kdev(st),)
            if fuse:
                keys.fuse_connection = kdev(st)
            mm = f"{os.major(st)}:{os.minor(st)}"
            bdis += [mm, f"{mm}-fuseblk"]
    if block_device:
        with contextlib.suppress(OSError, ValueError):
            major, minor = ProcFS().block_dev(block_device)
            keys.block_devs = ((major << 20) | minor,)
            bdis.append(f"{int(major)}:{int(minor)}")
    keys.bdis = tuple(dict.fromkeys(bdis))
    comms = {"app": tuple(app_comms)}
    if daemon_pid:
        comms["driver"] = daemon_comms(daemon_pid)
    keys.comms = comms
    return keys


def daemon_comms(pid: int, fs: ProcFS | None = None) -> tuple[str, ...]:
    """The names a daemon's threads carry: its own, its threads' now, and the ones libfuse 3
    gives the threads it starts later (a remounted daemon's workers do not exist yet when the
    keys are taken): `fuse_worker` (multi-threaded loop), `fuse-ring-N` (io_uring queues)."""
    fs = fs or ProcFS()
    names: list[str] = []
    with contextlib.suppress(OSError):
        names.append(fs.read(f"proc/{pid}/comm").strip())
        for tid in fs.tids(pid):
            with contextlib.suppress(OSError):
                names.append(fs.read(f"proc/{pid}/task/{tid}/comm").strip())
    if not names:
        return ()
    names += ["fuse_worker", *(f"fuse-ring-{q}" for q in range(os.cpu_count() or 1))]
    return tuple(dict.fromkeys(names))


def to_trace(
    maps: dict[str, dict[str, Any]],
    keys: SubjectKeys,
    status: dict[str, str],
    work: dict[str, float],
    probes: Iterable[Probe] | None = None,
) -> dict[str, Any]:
    """One subject's share of a sample's maps, in the shape report/model/explain.py reads: each
    available probe's record (of `probes`, the catalogue by default) parses its own part."""
    trace: dict[str, Any] = {"probes": dict(status)}
    for probe in PROBES if probes is None else probes:
        if status.get(probe.name) == "ok":
            part = probe.parse(maps, keys)
            if part is not None:
                trace[probe.name] = part
    trace["work"] = dict(work)
    return trace


def untraced(status: dict[str, str], why: str) -> dict[str, Any]:
    """A result's trace when its traced run did not happen: each available probe says why."""
    return {"probes": {k: (why if v == "ok" else v) for k, v in status.items()}}


# -- the running tracer ---------------------------------------------------------------------------
class TraceError(Exception):
    pass


@dataclass
class Tracer:
    """bpftrace for one traced run at a time. `launch` starts it and records it (via
    `on_started`) without waiting, `ready` waits until its probes are attached (`start`: both);
    `begin`/`end` bracket the traced run; `kill` kills it without waiting and `reap` waits until
    it is gone (`stop`: both), so nothing stays attached while samples are timed (`release`
    stops it after a crash: the state record has its pid and start time). The halves let the
    compile (~1.2 s here) overlap the warm-up pass's first steps and the exit (~1 s: the
    probes' detach) the first timed sample's preparation. After a failure every probe is
    marked unavailable with the reason, and later launches do nothing."""

    status: dict[str, str]
    on_started: Callable[[int], None] = lambda _pid: None
    daemons: tuple[str, ...] = ()  # FUSE daemon binaries a USDT probe attaches to
    on_stopped: Callable[[int], None] = lambda _pid: None
    attach_timeout: float = ATTACH_TIMEOUT_S
    mark_timeout: float = MARK_TIMEOUT_S
    proc: subprocess.Popen[str] | None = None
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _seq: int = 0
    _errors: list[str] = field(default_factory=list)
    _ready: bool = False
    _dying: subprocess.Popen[str] | None = None  # killed, not yet reaped

    @property
    def active(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def wanted(self) -> bool:
        """Some probe is still available: a traced run is worth its time."""
        return any(v == "ok" for v in self.status.values())

    def start(self) -> None:
        """bpftrace attached (recorded via `on_started` before it is waited for), or every
        probe marked with why not."""
        self.launch()
        self.ready()

    def launch(self) -> None:
        probes = [p for p in PROBES if self.status.get(p.name) == "ok"]
        self.reap()  # one bpftrace at a time
        if not probes or self.active:
            return
        script = build_script(probes, os.getpid(), self.daemons)
        # Each process gets its own line queue: a previous one's last lines are not ours.
        self._lines, self._errors = queue.Queue(), []
        self.proc = subprocess.Popen(
            ["bpftrace", "-f", "json", "-e", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C to fsbench does not reach it: stopped by us
        )
        self.on_started(self.proc.pid)
        # Readers drain both pipes all the time: a full pipe would stall bpftrace.
        threading.Thread(target=self._read_out, args=(self.proc, self._lines), daemon=True).start()
        threading.Thread(target=self._read_err, args=(self.proc, self._errors), daemon=True).start()
        self._ready = False

    def ready(self) -> None:
        """Wait until the launched bpftrace has attached its probes."""
        if self.proc is None or self._ready:
            return
        try:
            self._wait_for("fsbench-ready", self.attach_timeout)
            self._ready = True
        except TraceError as e:
            self.stop()
            self._unavailable(str(e))

    @staticmethod
    def _read_out(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    @staticmethod
    def _read_err(proc: subprocess.Popen[str], errors: list[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.strip()
            # bpftrace warns about RLIMIT_MEMLOCK even when the kernel accounts BPF memory
            # by cgroup and the program loads: not an error.
            if line and "RLIMIT_MEMLOCK" not in line and "WARNING" not in line:
                errors.append(line)

    def _first_error(self) -> str:
        errs = [e for e in self._errors if "ERROR" in e] or self._errors
        return errs[0] if errs else "bpftrace exited"

    def _wait_for(self, marker: str, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TraceError(f"bpftrace did not answer within {timeout:.0f} s ({marker})")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                time.sleep(0.1)  # let the stderr reader catch the reason
                raise TraceError(f"bpftrace stopped: {self._first_error()}")
            if _printf(line) == marker:
                return got
            got.append(line)

    def _unavailable(self, why: str) -> None:
        for name, st in self.status.items():
            if st == "ok":
                self.status[name] = why

    def begin(self) -> None:
        """Start a sample: clear the maps and wait until bpftrace has done so."""
        self.ready()
        if not self.active:
            return
        self._seq = (self._seq + 1) % SEQ_SPAN
        with contextlib.suppress(OSError):
            os.close(MARK_BEGIN + self._seq)
        try:
            self._wait_for(f"fsbench-begin {self._seq}", self.mark_timeout)
        except TraceError as e:
            self.stop()
            self._unavailable(str(e))

    def end(self) -> dict[str, dict[str, Any]] | None:
        """End a sample: the maps as bpftrace printed them (None when tracing failed)."""
        if not self.active:
            return None
        with contextlib.suppress(OSError):
            os.close(MARK_END + self._seq)
        try:
            lines = self._wait_for(f"fsbench-end {self._seq}", self.mark_timeout)
        except TraceError as e:
            self.stop()
            self._unavailable(str(e))
            return None
        return parse_maps(lines)

    def stop(self) -> None:
        """Kill bpftrace and wait until it is gone."""
        self.kill()
        self.reap()

    def kill(self) -> None:
        """SIGKILL bpftrace, not waiting: the maps were read at `end` (SIGINT would print them
        all again, ~1 s here, for nothing). Its probes stay attached until `reap`."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        self._dying = proc

    def reap(self) -> None:
        """Wait until a killed bpftrace is gone: its probes are detached when its descriptors
        close (~1 s here), so the next timed run has none."""
        proc, self._dying = self._dying, None
        if proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        self.on_stopped(proc.pid)


def _printf(line: str) -> str | None:
    """The text of a bpftrace printf line in JSON output, stripped."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if isinstance(rec, dict) and rec.get("type") == "printf":
        return str(rec.get("data", "")).strip()
    return None
