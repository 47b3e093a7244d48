"""The `libfuse` probe: a FUSE request's time split by libfuse 3.18's USDT probe
`request_process` into waiting for the daemon and the daemon's work with its reply, for the
daemons fsbench built with libfuse's probes (passthrough_hp, fuse2fs-3.18).

    send (queued) ── waiting for the daemon ──> request_process ── its work ──> end (replied)

(waiting: the wake-up, the daemon's read of /dev/fuse, the copy in; the kernel's send and end
are fuse_request_send and fuse_request_end)

The reply is not split off: libfuse's `request_reply` fires after the write that ends the
request, and not at all for a reply spliced from a pipe. 1 request in SPLIT_EVERY is timed (by
its unique id, as the fuse probe does); the daemon's probe gives the id's low 32 bits, so
requests are keyed by those (one FUSE connection is traced at a time). libfuse 3.18.3's
io_uring path fires no `request_process`: over io_uring nothing is split, and the explanation
says so. The attach points come from the run's daemons (`Probe.usdt`, probes/usdt.py); with no
daemon carrying the probe it is unavailable with the reason.
"""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, Profile
from fsbench.records.probes.fuse import FUSE_OPCODES, fuse_ops
from fsbench.records.probes.numbers import as_dict, fmt_pct, fmt_us, number
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows

NAME = "libfuse"
USDT = ("libfuse", "request_process")
SPLIT_EVERY = 8
# How probes/usdt.py says that no daemon of the run carries the probe: not a result's loss.
NO_DAEMON = "no daemon built with libfuse's USDT probes in this run"
IO_URING = (
    "the daemon's share is not measured over io_uring (libfuse 3.18's io_uring path fires no "
    "request_process probe)"
)
WEIGHT = 9.4  # just below the floor's factor (9.5): it splits the same request time

# `{usdt}`: the attach points, `usdt:PATH:libfuse:request_process` per daemon (probes/usdt.py).
SCRIPT = f"""
tracepoint:fuse:fuse_request_send /((args->unique >> 1) & {SPLIT_EVERY - 1}) == 0/ {{
  @libfuse_s[args->unique & 0xffffffff] = nsecs * 64 + args->opcode;
}}
{{usdt}} {{
  $u = (uint64)arg1;
  if (@libfuse_s[$u]) {{ @libfuse_p[$u] = nsecs; }}
}}
tracepoint:fuse:fuse_request_end /((args->unique >> 1) & {SPLIT_EVERY - 1}) == 0/ {{
  $k = args->unique & 0xffffffff;
  $v = @libfuse_s[$k];
  $p = @libfuse_p[$k];
  if ($v && $p) {{
    $op = $v % 64;
    @libfuse_n[args->connection, $op] = count();
    @libfuse_wait[args->connection, $op] = sum($p - $v / 64);
    @libfuse_work[args->connection, $op] = sum(nsecs - $p);
  }}
  delete(@libfuse_s[$k]);
  delete(@libfuse_p[$k]);
}}
"""


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any] | None:
    """{requests: {OP: n}, wait_us: {OP: total}, work_us: {OP: total}}, scaled back from the
    timed requests (each total over the same requests: their means are the timed ones')."""
    if keys.fuse_connection is None:
        return None
    conn = str(keys.fuse_connection)
    out: dict[str, Any] = {"requests": {}, "wait_us": {}, "work_us": {}}
    for part, m, scale in (("requests", "n", 1.0), ("wait_us", "wait", 1e-3),
                           ("work_us", "work", 1e-3)):  # fmt: skip
        for (c, code), v in rows(maps, f"libfuse_{m}"):
            if c != conn or not code.isdigit():
                continue
            op = FUSE_OPCODES.get(int(code), f"OP{code}")
            value = float(v) * SPLIT_EVERY * scale
            out[part][op] = out[part].get(op, 0) + (int(value) if part == "requests" else value)
    out["sampled"] = f"1 request in {SPLIT_EVERY}, scaled"
    return out


Split = dict[str, tuple[float, float, float]]


def read(part: dict[str, Any] | None, prof: Profile) -> Split | None:
    """{OP: (requests per unit of work, µs waiting for the daemon, µs of its work)}."""
    if part is None:
        # No daemon of the run carried the probe, or this is no FUSE daemon: say nothing.
        if prof.kind != "fuse" or any(NO_DAEMON in u for u in prof.unavailable):
            prof.unavailable[:] = [u for u in prof.unavailable if not u.startswith(f"{NAME}: ")]
        return None
    if prof.kind != "fuse":
        return None
    out = {}
    for op, n in as_dict(part.get("requests")).items():
        count = number(n)
        wait = number(as_dict(part.get("wait_us")).get(op))
        work = number(as_dict(part.get("work_us")).get(op))
        if count and wait is not None and work is not None:
            out[op] = (count / prof.amount, wait / count, work / count)
    if not out and prof.transport == "uring" and fuse_ops(prof):
        prof.unavailable.append(f"{NAME}: {IO_URING}")
    return out


def figures(split: Split, _per: str) -> list[Figure]:
    out: list[Figure] = []
    for op, (_, wait, work) in sorted(split.items()):
        out.append((f"libfuse.{op}.wait", f"FUSE {op} wait for the daemon", wait, "us"))
        out.append((f"libfuse.{op}.work", f"FUSE {op} daemon's work", work, "us"))
    return out


def factors(inp: FactorInput) -> list[Factor]:
    """The split of the result's main FUSE request (the most request time): of its time from
    queued to ended, how long it waited for the daemon and how long the daemon worked on it."""
    prof = inp.prof
    split = prof.measured.get(NAME)
    if not split:
        return []
    ops = fuse_ops(prof) or {}

    def request_time(o: str) -> float:  # the fuse probe's when it timed it, else the split's
        f = ops.get(o)
        n, wait, work = split[o]
        return f.seconds if f is not None and f.seconds is not None else n * (wait + work) / 1e6

    op = max(split, key=request_time)
    _, wait, work = split[op]
    total = wait + work
    if total <= 0:
        return []
    text = (
        f"of its {fmt_us(total)} per FUSE {op} request (queued to ended), the daemon worked "
        f"{fmt_us(work)} ({fmt_pct(work / total)}, with its reply) and the request waited "
        f"{fmt_us(wait)} for the daemon to take it (libfuse's USDT probe request_process)"
    )
    brief = f"daemon worked {fmt_us(work)} of {fmt_us(total)}/{op}, waited {fmt_us(wait)}"
    return [Factor("daemon split", work, "µs/request", text, brief, baseline=total, weight=WEIGHT)]


PROBE = Probe.of_module(
    __name__,
    NAME,
    ("fuse/fuse_request_send", "fuse/fuse_request_end"),
    "FUSE request time split by libfuse 3.18's USDT probe request_process: waiting for the "
    "daemon (queued -> the daemon starts it), the daemon's work with its reply (-> the kernel "
    "ends it); daemons fsbench built (passthrough_hp, fuse2fs-3.18), /dev/fuse only",
    SCRIPT,
    ("libfuse_n", "libfuse_wait", "libfuse_work"),
    scratch=("libfuse_s", "libfuse_p"),
    usdt=USDT,
)
