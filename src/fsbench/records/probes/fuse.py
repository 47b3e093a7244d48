"""The `fuse` probe: FUSE requests per opcode (fuse_request_send/end), their payload sizes and
latency, and what they say in an explanation (the driver's declared quirks included)."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import (
    Factor,
    FactorInput,
    OpFigures,
    Profile,
    share_text,
    time_factor,
)
from fsbench.records.probes.numbers import (
    fmt_count,
    fmt_pct,
    fmt_time,
    fmt_us,
    hist_add,
    percentiles,
)
from fsbench.records.probes.ops import base_words, op_figures, read_ops, same_ops, with_size
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows
from fsbench.records.schema import Environment, Quirk
from fsbench.units import size_text

# FUSE headers around the payload, measured on this kernel (6.18): a 4096-byte WRITE request
# is 4176 bytes long (fuse_in_header 40 + fuse_write_in 40), a 128 KiB READ reply 131088
# (fuse_out_header 16).
FUSE_WRITE_IN_HDR = 80
FUSE_OUT_HDR = 16
FUSE_READ, FUSE_WRITE = 15, 16
# Latency is timed for 1 request in FUSE_LAT_EVERY (by its unique id, which the kernel steps by
# 2), the start time and opcode packed in one map value: a start time per request was most of
# this probe's cost (bench/probe_overhead.py). The histogram and the total are scaled back per
# opcode by its requests over its timed ones (@fuse_latn), not by FUSE_LAT_EVERY: an opcode is
# not timed 1 in 8 when opcodes alternate (docs/internals.md#measurements).
FUSE_LAT_EVERY = 8
# FUSE requests whose summed latency exceeds the traced run by this factor were in flight
# together: reported as concurrency, never as a share above 100 %.
OVERLAPPING = 1.05

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

SCRIPT = f"""
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
    @fuse_latn[args->connection, $op] = count();
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
"""


def _op(code: str) -> str:
    return FUSE_OPCODES.get(int(code), f"OP{code}")


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any] | None:
    if keys.fuse_connection is None:
        return None  # not a FUSE mount: no part at all
    conn = str(keys.fuse_connection)
    fz: dict[str, Any] = {
        "requests": {},
        "bytes": {},
        "size_hist": {},
        "latency_hist_us": {},
        "latency_us": {},
    }
    for (c, code), n in rows(maps, "fuse_n"):
        if c == conn:
            fz["requests"][_op(code)] = fz["requests"].get(_op(code), 0) + int(n)
    for (c, code), n in rows(maps, "fuse_bytes"):
        if c == conn:
            fz["bytes"][_op(code)] = int(n)
    for (c, code), h in rows(maps, "fuse_size"):
        if c == conn:
            hist_add(fz["size_hist"], _op(code), h)
    timed = {code: int(n) for (c, code), n in rows(maps, "fuse_latn") if c == conn}

    def scale(code: str) -> float:
        """Requests of the opcode per timed one (FUSE_LAT_EVERY for older captures)."""
        n, t = fz["requests"].get(_op(code), 0), timed.get(code)
        return n / t if t and n else FUSE_LAT_EVERY

    for (c, code), h in rows(maps, "fuse_lat"):
        if c == conn:
            scaled = {b: n * scale(code) for b, n in h.items()}
            hist_add(fz["latency_hist_us"], _op(code), scaled)
    for (c, code), ns in rows(maps, "fuse_latsum"):
        if c == conn:
            total = int(ns) * scale(code) / 1000
            fz["latency_us"].setdefault(_op(code), {})["total"] = total
    fz["latency_sampled"] = f"1 request in {FUSE_LAT_EVERY}, scaled per opcode"
    percentiles(fz)
    return fz


def read(part: dict[str, Any] | None, prof: Profile) -> dict[str, OpFigures] | None:
    if part is None:
        # A kernel driver sends no FUSE requests: measured as none, whatever the probe did.
        return {} if prof.kind == "kernel" else None
    ops = read_ops(part, prof.amount)
    read_op = ops.get("READ")
    # Over io_uring the trace's reply length is not the payload (64 bytes for a 256 KiB READ
    # here: the reply's data is in the ring, not counted), so READ sizes are unknown there, not
    # the header's size.
    sized = read_op is not None and (read_op.size_hist or read_op.mean_size is not None)
    if prof.transport == "uring" and read_op is not None and sized:
        read_op.size_hist, read_op.mean_size = {}, None
        prof.unavailable.append(
            "FUSE READ sizes: not measured over io_uring (the reply is in the ring)"
        )
    return ops


def fuse_ops(prof: Profile | None) -> dict[str, OpFigures] | None:
    """A profile's FUSE requests by opcode (None: not measured)."""
    return None if prof is None else prof.measured.get("fuse")


def figures(ops: dict[str, OpFigures], per: str) -> list[Figure]:
    return op_figures(ops, per, "fuse", "FUSE", ("mean_us", "latency"))


# -- the explanation ------------------------------------------------------------------------------
def quirk_shows(q: Quirk, op: str, f: OpFigures, dom: int | None, env: Environment) -> bool:
    """Whether the driver's declared quirk explains this FUSE op's figures on this image."""
    if q.op != op:
        return False
    if q.request_size is not None:
        only = dom is None and not f.size_hist and f.mean_size == q.request_size
        if dom != q.request_size and not only:
            return False
    return q.image_below is None or (env.image_size is not None and env.image_size < q.image_below)


def _timing(f: OpFigures, prof: Profile) -> tuple[str, str, float | None]:
    """The words on an opcode's request time, and how many were in flight together (None: not
    overlapping). Requests in flight together (readahead sends several READs at once): their
    summed latency outlasts the run, so it is concurrency, not a share of the run's time."""
    overlap = (
        f.seconds / prof.seconds
        if f.seconds is not None and prof.seconds and f.seconds > OVERLAPPING * prof.seconds
        else None
    )
    if f.mean_us is not None and f.seconds is not None and overlap is not None:
        text = (
            f"; {fmt_us(f.mean_us)} per request = {fmt_time(f.seconds)} of request time per "
            f"{prof.per} in a traced run of {fmt_time(prof.seconds or 0)}: ≈ {overlap:.1f} in "
            "flight at a time, so no share of the run's time is theirs alone"
        )
        return text, f", {fmt_us(f.mean_us)}, ≈ {overlap:.1f} in flight", overlap
    if f.mean_us is not None and f.seconds is not None:
        text = f"; {fmt_us(f.mean_us)} per request = {fmt_time(f.seconds)} per {prof.per}"
        text += share_text(f.seconds, prof)
        brief = f", {fmt_us(f.mean_us)} = {fmt_time(f.seconds)}/{prof.per}"
        if prof.seconds:
            brief += f" ({fmt_pct(f.seconds / prof.seconds)})"
        return text, brief, None
    if f.p50_us is not None:
        return f"; {fmt_us(f.p50_us)} median latency", "", None
    return "", "", None


def _op_factor(inp: FactorInput, op: str, f: OpFigures) -> Factor:
    prof, base, base_name, env = inp.prof, inp.base, inp.base_name, inp.env
    text = f"{fmt_count(f.count)} FUSE {op} requests per {prof.per}"
    brief = f"{fmt_count(f.count)} FUSE {op}/{prof.per}"
    text, brief, dom = with_size(text, brief, f)
    for q in prof.quirks:
        if quirk_shows(q, op, f, dom, env):
            text += f" ({q.says.format(image=size_text(env.image_size or 0))})"
            brief += f" ({q.brief})"
    more_text, more_brief, overlap = _timing(f, prof)
    text, brief = text + more_text, brief + more_brief
    base_ops = fuse_ops(base)
    bf = base_ops.get(op) if base_ops is not None else None
    base_seconds = None
    if base is not None and base_ops is not None:
        base_seconds = bf.seconds if bf is not None else 0.0
        if bf is not None:
            text += base_words(bf, base_name)
        elif base.kind == "kernel":
            text += f" ({base_name} is in the kernel: no FUSE requests)"
        else:
            text += f" ({base_name}: none)"
    factor = time_factor(
        f"fuse {op}",
        f.count,
        f"requests/{prof.per}",
        text,
        brief,
        None if overlap is not None else f.seconds,
        None if overlap is not None else base_seconds,
        prof,
        inp.gap,
        bf.count if bf is not None else (0.0 if base_seconds == 0.0 else None),
    )
    if overlap is not None:
        factor.weight = 6.0  # ranks as a factor that fills the run, which it does
    return factor


def _not_sent(inp: FactorInput, op: str, bf: OpFigures) -> Factor:
    """The baseline spends time in FUSE requests this subject never sends."""
    prof, base_name = inp.prof, inp.base_name
    why = " (in the kernel)" if prof.kind == "kernel" else ""
    assert bf.seconds is not None
    text = (
        f"no FUSE {op} requests{why}; {base_name} sends {fmt_count(bf.count)} per "
        f"{prof.per} = {fmt_time(bf.seconds)} per {prof.per}"
    )
    brief = f"no FUSE {op} ({base_name}: {fmt_time(bf.seconds)}/{prof.per})"
    return time_factor(
        f"fuse {op}",
        0.0,
        f"requests/{prof.per}",
        text,
        brief,
        0.0,
        bf.seconds,
        prof,
        inp.gap,
        bf.count,
    )


def factors(inp: FactorInput) -> list[Factor]:
    prof = inp.prof
    ops = fuse_ops(prof) or {}
    total = sum(f.count for f in ops.values())
    base_ops = fuse_ops(inp.base)
    out = []
    for op, f in ops.items():
        if total and f.count / total < 0.01 and (f.seconds or 0) < 0.01 * (prof.seconds or 1):
            continue  # a handful of GETATTRs beside 262,144 WRITEs says nothing
        if same_ops(f, (base_ops or {}).get(op), "mean_us"):
            continue
        out.append(_op_factor(inp, op, f))
    base_total = sum(bf.count for bf in (base_ops or {}).values())
    if fuse_ops(prof) is not None and inp.base is not None:
        for op, bf in (base_ops or {}).items():
            if op in ops or bf.count < 0.01 * base_total or bf.seconds is None:
                continue
            out.append(_not_sent(inp, op, bf))
    return out


PROBE = Probe.of_module(
    __name__,
    "fuse",
    ("fuse/fuse_request_send", "fuse/fuse_request_end"),
    "FUSE requests per opcode, payload bytes and size distribution (READ, WRITE), "
    "request latency send->end (log2 histogram, p50/p99, total)",
    SCRIPT,
    ("fuse_n", "fuse_size", "fuse_bytes", "fuse_lat", "fuse_latsum", "fuse_latn"),
    scratch=("fuse_t", "fuse_rd"),
)
