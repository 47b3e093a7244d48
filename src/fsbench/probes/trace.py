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

Probes are data (`PROBES`): a name, the tracepoints it needs, what it yields and its bpftrace
fragment. The script is assembled from the probes this kernel can serve; the others are
reported unavailable with the reason, and the run goes on.

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

from fsbench.probes.procfs import ProcFS

TRACEFS = Path(ProcFS().path("sys/kernel/tracing"))
# Descriptor numbers nothing can have open (above the kernel's nr_open ceiling of 2^20):
# close() on them fails with EBADF and only the marker probe notices.
MARK_BEGIN = 1_000_000_000
MARK_END = 1_100_000_000
SEQ_SPAN = 100_000_000
# FUSE headers around the payload, measured on this kernel (6.18): a 4096-byte WRITE request
# is 4176 bytes long (fuse_in_header 40 + fuse_write_in 40), a 128 KiB READ reply 131088
# (fuse_out_header 16).
FUSE_WRITE_IN_HDR = 80
FUSE_OUT_HDR = 16
FUSE_READ, FUSE_WRITE = 15, 16
# Latency is timed for 1 request in FUSE_LAT_EVERY (by its unique id, which the kernel steps by
# 2), the start time and opcode packed in one map value: a start time per request, looked up
# and deleted at its end, was most of this probe's cost at ~60k requests/s (measured with
# bench/probe_overhead.py). The histogram and the total are scaled back by FUSE_LAT_EVERY.
FUSE_LAT_EVERY = 8
ATTACH_TIMEOUT_S = 30.0
MARK_TIMEOUT_S = 10.0
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

FUSE_OPCODES = {
    1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 4: "SETATTR", 5: "READLINK", 6: "SYMLINK",
    8: "MKNOD", 9: "MKDIR", 10: "UNLINK", 11: "RMDIR", 12: "RENAME", 13: "LINK", 14: "OPEN",
    15: "READ", 16: "WRITE", 17: "STATFS", 18: "RELEASE", 20: "FSYNC", 21: "SETXATTR",
    22: "GETXATTR", 23: "LISTXATTR", 24: "REMOVEXATTR", 25: "FLUSH", 26: "INIT",
    27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR", 30: "FSYNCDIR", 31: "GETLK", 32: "SETLK",
    33: "SETLKW", 34: "ACCESS", 35: "CREATE", 36: "INTERRUPT", 37: "BMAP", 38: "DESTROY",
    39: "IOCTL", 40: "POLL", 41: "NOTIFY_REPLY", 42: "BATCH_FORGET", 43: "FALLOCATE",
    44: "READDIRPLUS", 45: "RENAME2", 46: "LSEEK", 47: "COPY_FILE_RANGE", 50: "SYNCFS",
    51: "TMPFILE", 52: "STATX",
}  # fmt: skip


@dataclass(frozen=True)
class Probe:
    """A trace probe: what it needs from the kernel, what it yields, how it is traced."""

    name: str
    tracepoints: tuple[str, ...]  # "category/event" under tracefs events/
    yields: str
    script: str  # bpftrace fragment; maps named @<name>_*
    maps: tuple[str, ...]  # printed at the end of a sample, cleared at its start
    # In-flight bookkeeping (start times by request): deleted by the events themselves, never
    # printed and never cleared from user space. bpftrace's clear() snapshots a map's keys and
    # then deletes them one by one; a key an event deleted meanwhile fails that delete, and
    # bpftrace 0.17 exits ("failed to look up elem: -2"), ending every probe of the run.
    scratch: tuple[str, ...] = ()


PROBES: tuple[Probe, ...] = (
    Probe(
        "fuse",
        ("fuse/fuse_request_send", "fuse/fuse_request_end"),
        "FUSE requests per opcode, payload bytes and size distribution (READ, WRITE), "
        "request latency send->end (log2 histogram, p50/p99, total)",
        f"""
tracepoint:fuse:fuse_request_send {{
  $u = args->unique;  // read once into a variable: bpftrace 0.17 fails the verifier otherwise
  @fuse_n[args->connection, args->opcode] = count();
  if (args->opcode == {FUSE_WRITE} && args->len >= {FUSE_WRITE_IN_HDR}) {{
    @fuse_size[args->connection, args->opcode] = hist(args->len - {FUSE_WRITE_IN_HDR});
    @fuse_bytes[args->connection, args->opcode] = sum(args->len - {FUSE_WRITE_IN_HDR});
  }}
  if (args->opcode == {FUSE_READ}) {{ @fuse_rd[args->connection, $u] = 1; }}
  if ((($u >> 1) & {FUSE_LAT_EVERY - 1}) == 0) {{
    @fuse_t[args->connection, $u] = nsecs * 64 + args->opcode;
  }}
}}
tracepoint:fuse:fuse_request_end /((args->unique >> 1) & {FUSE_LAT_EVERY - 1}) == 0/ {{
  $v = @fuse_t[args->connection, args->unique];
  if ($v) {{
    $op = $v % 64;
    $ns = nsecs - $v / 64;
    @fuse_lat[args->connection, $op] = hist($ns / 1000);
    @fuse_latsum[args->connection, $op] = sum($ns);
    delete(@fuse_t[args->connection, args->unique]);
  }}
}}
tracepoint:fuse:fuse_request_end /@fuse_rd[args->connection, args->unique]/ {{
  if (args->len >= {FUSE_OUT_HDR}) {{
    @fuse_size[args->connection, {FUSE_READ}] = hist(args->len - {FUSE_OUT_HDR});
    @fuse_bytes[args->connection, {FUSE_READ}] = sum(args->len - {FUSE_OUT_HDR});
  }}
  delete(@fuse_rd[args->connection, args->unique]);
}}
""",
        ("fuse_n", "fuse_size", "fuse_bytes", "fuse_lat", "fuse_latsum"),
        ("fuse_t", "fuse_rd"),
    ),
    Probe(
        "readahead",
        ("readahead/page_cache_ra_order", "readahead/page_cache_ra_unbounded"),
        "readahead windows the kernel chose (bytes, log2 histogram) and their count",
        # ra_order traces the window of a large-folio mapping; others fall back to
        # ra_unbounded, which traces how many pages it is asked to read.
        f"""
tracepoint:readahead:page_cache_ra_order {{
  @readahead_win[args->s_dev] = hist(args->size * {PAGE});
}}
tracepoint:readahead:page_cache_ra_unbounded {{
  @readahead_win[args->s_dev] = hist(args->nr_to_read * {PAGE});
}}
""",
        ("readahead_win",),
    ),
    Probe(
        "block",
        ("block/block_rq_issue", "block/block_rq_complete"),
        "block requests at the device (read/write), size distribution, issue->complete latency",
        """
tracepoint:block:block_rq_issue /strncmp(args->rwbs, "R", 1) == 0/ {
  @block_size[args->dev, "read"] = hist(args->bytes);
  @block_t[args->dev, args->sector] = nsecs;
}
tracepoint:block:block_rq_issue /strncmp(args->rwbs, "W", 1) == 0/ {
  @block_size[args->dev, "write"] = hist(args->bytes);
  @block_t[args->dev, args->sector] = nsecs;
}
tracepoint:block:block_rq_complete /@block_t[args->dev, args->sector]/ {
  $us = (nsecs - @block_t[args->dev, args->sector]) / 1000;
  if (strncmp(args->rwbs, "R", 1) == 0) { @block_lat[args->dev, "read"] = hist($us); }
  else { @block_lat[args->dev, "write"] = hist($us); }
  delete(@block_t[args->dev, args->sector]);
}
""",
        ("block_size", "block_lat"),
        ("block_t",),
    ),
    Probe(
        "writeback",
        ("writeback/balance_dirty_pages", "writeback/writeback_single_inode"),
        "dirty throttling: balance_dirty_pages calls and their pause; pages the flusher "
        "wrote back (writeback_single_inode; an fsync's own writes are not among them)",
        # A `wrote` outside 1..2^32 pages is an integrity sync's LONG_MAX bookkeeping, not
        # pages: summed, it wrapped to -9.2e18 in a real capture.
        """
tracepoint:writeback:balance_dirty_pages {
  @writeback_bdp[args->bdi] = count();
  if (args->pause > 0) { @writeback_pause[args->bdi] = sum(args->pause); }
}
tracepoint:writeback:writeback_single_inode /args->wrote > 0 && args->wrote < 0x100000000/ {
  @writeback_pages[args->name] = sum(args->wrote);
}
""",
        ("writeback_bdp", "writeback_pause", "writeback_pages"),
    ),
    Probe(
        "sched",
        ("sched/sched_waking", "sched/sched_wakeup", "sched/sched_migrate_task"),
        "wake-ups of the application's and the driver daemon's tasks, how many were to "
        "another CPU than the waker's, migrations",
        # The waker's CPU is known at sched_waking only: sched_wakeup may run on the target CPU
        # (wake lists), which would hide a cross-CPU wake-up (measured: half of them).
        """
tracepoint:sched:sched_waking {
  @sched_waker[args->pid] = cpu + 1;
}
tracepoint:sched:sched_wakeup {
  @sched_wake[args->comm] = count();
  $w = @sched_waker[args->pid];
  if ($w && (uint64)args->target_cpu + 1 != $w) { @sched_cross[args->comm] = count(); }
  delete(@sched_waker[args->pid]);
}
tracepoint:sched:sched_migrate_task {
  @sched_mig[str(args->comm)] = count();
}
""",
        ("sched_wake", "sched_cross", "sched_mig"),
        ("sched_waker",),
    ),
)
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


def availability(events: Path | None = None, wanted: Iterable[str] | None = None) -> dict[str, str]:
    """Each probe's status on this machine: "ok" or why not. `wanted`: the probes asked for
    (--trace-probes); None: the default set."""
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
    return out


# -- the script -----------------------------------------------------------------------------------
def build_script(probes: Iterable[Probe], marker_pid: int) -> str:
    """The bpftrace program for the given probes, with the sample markers of `marker_pid`."""
    probes = list(probes)
    maps = [m for p in probes for m in p.maps]
    clear = " ".join(f"clear(@{m});" for m in maps)  # not the scratch maps: see Probe
    show = " ".join(f"print(@{m});" for m in maps)
    parts = ['BEGIN { printf("fsbench-ready\\n"); }']
    parts += [p.script.strip() for p in probes]
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
def _key(k: str) -> list[str]:
    return k.split(",")


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


def hist_percentile(h: dict[int, float], q: float) -> float | None:
    """The q-quantile of a log2 histogram {lower bound: count}, interpolated linearly inside
    the bucket [lo, 2*lo) it falls in."""
    total = sum(h.values())
    if total <= 0:
        return None
    want, seen = q * total, 0.0
    for lo in sorted(h):
        n = h[lo]
        if seen + n >= want:
            hi = 2 * lo if lo > 0 else 1
            return lo + (hi - lo) * ((want - seen) / n if n else 0.0)
        seen += n
    return float(max(h))


@dataclass
class SubjectKeys:
    """Which map keys belong to one subject in one sample."""

    fuse_connection: int | None = None  # kernel dev_t of the FUSE mount (st_dev)
    block_devs: tuple[int, ...] = ()  # kernel dev_t of the subject's block device(s)
    sb_devs: tuple[int, ...] = ()  # superblock dev_t (st_dev of the mount point)
    bdis: tuple[str, ...] = ()  # backing_dev_info names ("7:3", "0:54", "7:3-fuseblk")
    comms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # role -> task comms


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


def _hist_add(dst: dict[str, dict[str, int]], k: str, h: dict[int, int]) -> None:
    b = dst.setdefault(k, {})
    for lo, n in h.items():
        b[str(lo)] = b.get(str(lo), 0) + n


def to_trace(
    maps: dict[str, dict[str, Any]],
    keys: SubjectKeys,
    status: dict[str, str],
    work: dict[str, float],
) -> dict[str, Any]:
    """One subject's share of a sample's maps, in the shape report/explain.py reads."""
    trace: dict[str, Any] = {"probes": dict(status)}

    def ok(name: str) -> bool:
        return status.get(name) == "ok"

    def rows(m: str) -> Iterable[tuple[list[str], Any]]:
        for k, v in (maps.get(m) or {}).items():
            yield _key(k), v

    if ok("fuse") and keys.fuse_connection is not None:
        conn = str(keys.fuse_connection)
        fz: dict[str, Any] = {
            "requests": {},
            "bytes": {},
            "size_hist": {},
            "latency_hist_us": {},
            "latency_us": {},
        }

        def op(code: str) -> str:
            return FUSE_OPCODES.get(int(code), f"OP{code}")

        for (c, code), n in rows("fuse_n"):
            if c == conn:
                fz["requests"][op(code)] = fz["requests"].get(op(code), 0) + int(n)
        for (c, code), n in rows("fuse_bytes"):
            if c == conn:
                fz["bytes"][op(code)] = int(n)
        for (c, code), h in rows("fuse_size"):
            if c == conn:
                _hist_add(fz["size_hist"], op(code), h)
        for (c, code), h in rows("fuse_lat"):
            if c == conn:
                scaled = {b: n * FUSE_LAT_EVERY for b, n in h.items()}
                _hist_add(fz["latency_hist_us"], op(code), scaled)
        for (c, code), ns in rows("fuse_latsum"):
            if c == conn:
                total = int(ns) * FUSE_LAT_EVERY / 1000
                fz["latency_us"].setdefault(op(code), {})["total"] = total
        fz["latency_sampled"] = f"1 request in {FUSE_LAT_EVERY}, scaled"
        _percentiles(fz)
        trace["fuse"] = fz
    if ok("readahead"):
        windows: dict[str, dict[str, int]] = {}
        for (dev,), h in rows("readahead_win"):
            if int(dev) in keys.sb_devs or int(dev) in keys.block_devs:
                _hist_add(windows, "w", h)
        w = windows.get("w", {})
        trace["readahead"] = {"windows": w, "count": sum(w.values())}
    if ok("block"):
        blk: dict[str, Any] = {"requests": {}, "size_hist": {}, "latency_hist_us": {}}
        for (dev, rw), h in rows("block_size"):
            if int(dev) in keys.block_devs:
                _hist_add(blk["size_hist"], rw, h)
        for (dev, rw), h in rows("block_lat"):
            if int(dev) in keys.block_devs:
                _hist_add(blk["latency_hist_us"], rw, h)
        blk["requests"] = {
            rw: sum(blk["size_hist"].get(rw, {}).values()) for rw in ("read", "write")
        }
        blk["latency_us"] = {}
        _percentiles(blk)
        trace["block"] = blk
    if ok("writeback"):
        wb = {"balance_dirty_pages": 0, "pause_ms": 0.0, "pages_written": 0}
        for m, field_ in (
            ("writeback_bdp", "balance_dirty_pages"),
            ("writeback_pause", "pause_ms"),
            ("writeback_pages", "pages_written"),
        ):
            for (bdi,), n in rows(m):
                if bdi in keys.bdis:
                    wb[field_] += n
        wb["pause_ms"] = float(wb["pause_ms"])
        trace["writeback"] = wb
    if ok("sched"):
        sc: dict[str, dict[str, int]] = {"wakeups": {}, "cross_cpu": {}, "migrations": {}}
        for m, part in (("sched_wake", "wakeups"), ("sched_cross", "cross_cpu"),
                        ("sched_mig", "migrations")):  # fmt: skip
            got = {k[0]: int(v) for k, v in rows(m)}
            for role, comms in keys.comms.items():
                sc[part][role] = sum(got.get(c, 0) for c in comms)
        trace["sched"] = sc
    trace["work"] = dict(work)
    return trace


def untraced(status: dict[str, str], why: str) -> dict[str, Any]:
    """A result's trace when its traced run did not happen: each available probe says why."""
    return {"probes": {k: (why if v == "ok" else v) for k, v in status.items()}}


def _percentiles(part: dict[str, Any]) -> None:
    """latency_us[OP].p50/p99 from latency_hist_us[OP] (log2 buckets, interpolated)."""
    lat = part.setdefault("latency_us", {})
    for name, h in part.get("latency_hist_us", {}).items():
        hh = {int(k): float(v) for k, v in h.items()}
        entry = lat.setdefault(name, {})
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            v = hist_percentile(hh, q)
            if v is not None:
                entry[label] = round(v, 2)


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
        script = build_script(probes, os.getpid())
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
