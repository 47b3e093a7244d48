"""What the two probes that count requests per operation share (block: read and write at the
device; fuse: per FUSE opcode): their trace part read as `OpFigures` per unit of work, what
`diff` compares of them, and the words and the test their factors use."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import Figure, OpFigures, differs
from fsbench.records.probes.numbers import (
    as_dict,
    dominant,
    fmt_count,
    histogram,
    number,
    size_phrase,
)


def read_ops(part: dict[str, Any], amount: float) -> dict[str, OpFigures]:
    """A trace part shaped {requests, bytes, size_hist, latency_us, latency_hist_us} by opcode
    or direction (FUSE, block) as figures per unit of work."""
    out = {}
    for op, n in as_dict(part.get("requests")).items():
        count = number(n)
        if not count:
            continue
        nbytes = number(as_dict(part.get("bytes")).get(op))
        lat = as_dict(as_dict(part.get("latency_us")).get(op))
        total = number(lat.get("total"))
        out[op] = OpFigures(
            count=count / amount,
            size_hist={
                k: v / amount for k, v in histogram(as_dict(part.get("size_hist")).get(op)).items()
            },
            mean_size=nbytes / count if nbytes else None,
            p50_us=number(lat.get("p50")),
            p99_us=number(lat.get("p99")),
            seconds=total / 1e6 / amount if total is not None else None,
            mean_us=total / count if total is not None else None,
            latency_hist={
                k: v / amount
                for k, v in histogram(as_dict(part.get("latency_hist_us")).get(op)).items()
            },
        )
    return out


def op_figures(
    ops: dict[str, OpFigures], per: str, key: str, noun: str, latency: tuple[str, str]
) -> list[Figure]:
    """What `diff` compares of read_ops' figures: each opcode's or direction's requests per
    unit, its request size and its latency (`latency`: the OpFigures field and its words,
    e.g. ("p50_us", "latency p50")), keyed `KEY.OP.count|size|<words' last>`."""
    field_, words = latency
    out: list[Figure] = []
    for op, f in sorted(ops.items()):
        out.append((f"{key}.{op}.count", f"{noun} {op} requests per {per}", f.count, "count"))
        d = dominant(f.size_hist)
        size = f.mean_size or (d[0] if d else None)
        if size:
            out.append((f"{key}.{op}.size", f"{noun} {op} request size", size, "bytes"))
        lat = getattr(f, field_)
        if lat is not None:
            out.append((f"{key}.{op}.{words.split()[-1]}", f"{noun} {op} {words}", lat, "us"))
    return out


def same_ops(f: OpFigures, base: OpFigures | None, latency: str) -> bool:
    """As many requests, as large and (`latency`: the OpFigures field) as slow as the
    baseline's: not what separates them. No baseline figures: not the same."""
    return base is not None and not any(
        differs(x, y)
        for x, y in (
            (f.count, base.count),
            (f.mean_size, base.mean_size),
            (getattr(f, latency), getattr(base, latency)),
        )
        if x is not None and y is not None
    )


def with_size(text: str, brief: str, f: OpFigures) -> tuple[str, str, int | None]:
    """A factor's sentence and brief with the requests' size ("…, 128 KiB each", "… × 128
    KiB"), and the dominant size bucket (None: none dominates)."""
    size, dom = size_phrase(f.size_hist, f.mean_size)
    if size:
        text += f", {size}"
        brief += f" × {size.replace(' each', '')}"
    return text, brief, dom


def base_words(base: OpFigures, base_name: str) -> str:
    """The baseline's requests beside this subject's: " (ext4: 12, 128 KiB)"."""
    size, _ = size_phrase(base.size_hist, base.mean_size)
    return f" ({base_name}: {fmt_count(base.count)}" + (
        f", {size.replace(' each', '')})" if size else ")"
    )
