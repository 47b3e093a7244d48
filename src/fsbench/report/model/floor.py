"""The FUSE floor in an explanation: of a FUSE driver's time per request, how much any FUSE
daemon pays (the transport) and how much is the driver's own work.

The floor is libfuse's `passthrough_hp` over /dev/fuse (lab/drivers.py), measured in the same
run, same workload and placement: its requests do almost nothing but a system call on a
kernel file system, so its time per request is what the kernel's FUSE round trip costs here.
A FUSE result gains one factor naming both figures; the floor's io_uring and passthrough
variants gain the same comparison against the floor over /dev/fuse (what the transport
changes). Nothing is said when the run has no floor result or a figure was not measured.
"""

from __future__ import annotations

from fsbench.records.probes.factor import Factor, FactorInput, OpFigures
from fsbench.records.probes.fuse import fuse_ops
from fsbench.records.probes.numbers import fmt_count, fmt_pct, fmt_us
from fsbench.records.schema import Result, Run
from fsbench.report.model.keys import placement_of, workload_key
from fsbench.units import fmt_ratio, size_text

FLOOR_DRIVER = "passthrough_hp"
FLOOR_TRANSPORT = "dev-fuse"
# Ranks below the factors that explain the gap to the baseline (10+) and above those that
# only fill the sample (5+): it splits the FUSE request time those factors name.
WEIGHT = 9.5
# Mean request sizes further apart than this are not compared per request (see below).
SIZES_APART = 4.0
TRANSPORT_WORDS = {
    "dev-fuse": "over /dev/fuse",
    "uring": "over io_uring",
    "passthrough": "with passthrough",
}


def _subject(run: Run, subject_id: str):
    return next((s for s in run.subjects if s.id == subject_id), None)


def floor_result(res: Result, run: Run) -> Result | None:
    """The floor's result (over /dev/fuse) for the same workload and placement as `res`."""
    key, place = workload_key(res), placement_of(res)
    for r in run.results:
        s = _subject(run, r.subject)
        if (
            s is not None
            and s.driver == FLOOR_DRIVER
            and (s.transport or FLOOR_TRANSPORT) == FLOOR_TRANSPORT
            and r.median is not None
            and workload_key(r) == key
            and placement_of(r) == place
        ):
            return r
    return None


def _main_op(ops: dict[str, OpFigures], floor: dict[str, OpFigures]) -> str | None:
    """The opcode the subject spends most request time in, among those the floor timed too."""
    timed = [(f.seconds or 0.0, op) for op, f in ops.items() if f.mean_us is not None]
    timed = [(s, op) for s, op in timed if floor.get(op) and floor[op].mean_us is not None]
    return max(timed)[1] if timed else None


def floor_factors(inp: FactorInput) -> list[Factor]:
    """The floor's factor for a FUSE result (none for the floor over /dev/fuse itself)."""
    res, prof, run = inp.result, inp.prof, inp.run
    subject = _subject(run, res.subject)
    if subject is None or subject.kind != "fuse":
        return []
    base = floor_result(res, run)
    if base is None or base is res:
        return []
    fprof = inp.profile_of(base)
    ops, fops = fuse_ops(prof), fuse_ops(fprof)
    if ops is None or fops is None or fprof.per != prof.per:
        return []
    transport = subject.transport or FLOOR_TRANSPORT
    floor_name = f"{FLOOR_DRIVER} {TRANSPORT_WORDS[FLOOR_TRANSPORT]}"
    who = subject.driver if subject.driver != FLOOR_DRIVER else f"{subject.id}"
    io = [op for op in ("READ", "WRITE") if op in fops]
    if transport == "passthrough" and io and not any(op in ops for op in io):
        f = fops[io[0]]
        text = (
            f"with passthrough its {io[0]}s never reach the daemon (no FUSE {io[0]} requests); "
            f"the floor {floor_name} sends {fmt_count(f.count)} per {prof.per}"
            + (f", {fmt_us(f.mean_us)} each" if f.mean_us is not None else "")
        )
        brief = f"passthrough: no FUSE {io[0]} (floor {fmt_count(f.count)}/{prof.per})"
        return [Factor("fuse floor", 0.0, f"requests/{prof.per}", text, brief, weight=WEIGHT)]
    op = _main_op(ops, fops)
    if op is None:
        return []
    mine, floor = ops[op], fops[op]
    assert mine.mean_us is not None and floor.mean_us is not None
    own = mine.mean_us - floor.mean_us
    # Under io_uring the reply's length in the trace is not its payload: no sizes to compare.
    a, b = (None, None) if transport == "uring" else (mine.mean_size, floor.mean_size)
    apart = max(a, b) / min(a, b) if a and b else 1.0
    text = (
        f"of its {fmt_us(mine.mean_us)} per FUSE {op} request, the floor ({floor_name}, "
        f"this run) is {fmt_us(floor.mean_us)}"
    )
    brief = f"floor {fmt_us(floor.mean_us)} of its {fmt_us(mine.mean_us)}/{op}"
    if a and b and apart > SIZES_APART:
        # A request's time grows with its bytes (and the floor's writes come through the
        # writeback cache, several in flight): one size's cost is no floor for another's.
        text = (
            f"its FUSE {op} requests carry {size_text(a)} ({fmt_us(mine.mean_us)} "
            f"each), the floor's ({floor_name}, this run) {size_text(b)} "
            f"({fmt_us(floor.mean_us)} each): {fmt_ratio(apart)} apart in size, so no per-request "
            "floor is claimed"
        )
        brief = f"floor: {size_text(b)} {op}s, not comparable"
    elif transport != FLOOR_TRANSPORT and subject.driver == FLOOR_DRIVER:
        how = TRANSPORT_WORDS.get(transport, transport)
        text += f": {how} it is {fmt_ratio(mine.mean_us / floor.mean_us)} the floor's"
    elif own > 0:
        text += f": {fmt_us(own)} ({fmt_pct(own / mine.mean_us)}) is {who}'s own work"
        split = fprof.measured.get("libfuse") or {}
        if op in split:
            # Of the floor's own time, its daemon's work (libfuse's USDT split): the rest is
            # the round trip itself.
            text += f" (the floor's daemon itself worked {fmt_us(split[op][2])} of its time)"
    else:
        text += f": no more than the floor; {who}'s own work is not what costs"
    if a and b and 1.2 < apart <= SIZES_APART:
        text += f" (its requests {size_text(a)} on average, the floor's {size_text(b)})"
    return [
        Factor(
            "fuse floor",
            floor.mean_us,
            "µs/request",
            text,
            brief,
            baseline=mine.mean_us,
            weight=WEIGHT,
        )
    ]
