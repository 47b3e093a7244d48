"""The `block` probe: requests at the block device (read/write), their sizes and latency."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import (
    Factor,
    FactorInput,
    OpFigures,
    Profile,
    ratio_weight,
    share_text,
    time_factor,
)
from fsbench.records.probes.numbers import (
    fmt_count,
    fmt_us,
    hist_add,
    percentiles,
)
from fsbench.records.probes.ops import base_words, op_figures, read_ops, same_ops, with_size
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows

SCRIPT = """
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
"""


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any]:
    blk: dict[str, Any] = {"requests": {}, "size_hist": {}, "latency_hist_us": {}}
    for (dev, rw), h in rows(maps, "block_size"):
        if int(dev) in keys.block_devs:
            hist_add(blk["size_hist"], rw, h)
    for (dev, rw), h in rows(maps, "block_lat"):
        if int(dev) in keys.block_devs:
            hist_add(blk["latency_hist_us"], rw, h)
    blk["requests"] = {rw: sum(blk["size_hist"].get(rw, {}).values()) for rw in ("read", "write")}
    blk["latency_us"] = {}
    percentiles(blk)
    return blk


def read(part: dict[str, Any] | None, prof: Profile) -> dict[str, OpFigures] | None:
    return None if part is None else read_ops(part, prof.amount)


def figures(block: dict[str, OpFigures], per: str) -> list[Figure]:
    return op_figures(block, per, "block", "device", ("p50_us", "latency p50"))


def _factor(inp: FactorInput, d: str, f: OpFigures, bf: OpFigures | None) -> Factor:
    prof = inp.prof
    text = f"{fmt_count(f.count)} device {d} requests per {prof.per}"
    brief = f"dev {d} {fmt_count(f.count)}/{prof.per}"
    text, brief, _ = with_size(text, brief, f)
    if f.p50_us is not None:
        text += f", {fmt_us(f.p50_us)} median latency"
        if f.p99_us is not None:
            text += f" (p99 {fmt_us(f.p99_us)})"
        brief += f" p50 {fmt_us(f.p50_us)}"
    if bf is not None:
        text += base_words(bf, inp.base_name)
    if f.seconds is not None:
        text += share_text(f.seconds, prof)
        return time_factor(
            f"block {d}",
            f.count,
            f"requests/{prof.per}",
            text,
            brief,
            f.seconds,
            bf.seconds if bf is not None else None,
            prof,
            inp.gap,
            bf.count if bf else None,
        )
    return Factor(
        f"block {d}",
        f.count,
        f"requests/{prof.per}",
        text,
        brief,
        bf.count if bf else None,
        weight=ratio_weight(f.mean_size, bf.mean_size if bf else None)
        + ratio_weight(f.count, bf.count if bf else None),
    )


def factors(inp: FactorInput) -> list[Factor]:
    base = inp.base
    mine = inp.prof.measured.get("block") or {}
    theirs = base.measured.get("block") if base is not None else None
    out = []
    for d, f in mine.items():
        bf = theirs.get(d) if theirs is not None else None
        if same_ops(f, bf, "p50_us"):
            continue  # the device sees what it sees for the baseline
        out.append(_factor(inp, d, f, bf))
    return out


PROBE = Probe.of_module(
    __name__,
    "block",
    ("block/block_rq_issue", "block/block_rq_complete"),
    "block requests at the device (read/write), size distribution, issue->complete latency",
    SCRIPT,
    ("block_size", "block_lat"),
    scratch=("block_t",),
)
