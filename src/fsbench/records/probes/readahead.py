"""The `readahead` probe: the readahead (prefetch) windows the kernel chose. The smallest
probe, and the example in docs/ARCHITECTURE.md."""

from __future__ import annotations

import os
from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, Profile, differs, ratio_weight
from fsbench.records.probes.numbers import (
    DOMINANT,
    dominant,
    fmt_count,
    hist_add,
    hist_median,
    histogram,
    number,
)
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows
from fsbench.units import size_text

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# ra_order traces the window of a large-folio mapping; others fall back to ra_unbounded, which
# traces how many pages it is asked to read.
SCRIPT = f"""
tracepoint:readahead:page_cache_ra_order {{
  @readahead_win[args->s_dev] = hist(args->size * {PAGE});
}}
tracepoint:readahead:page_cache_ra_unbounded {{
  @readahead_win[args->s_dev] = hist(args->nr_to_read * {PAGE});
}}
"""


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any]:
    windows: dict[str, dict[str, int]] = {}
    for (dev,), h in rows(maps, "readahead_win"):
        if int(dev) in keys.sb_devs or int(dev) in keys.block_devs:
            hist_add(windows, "w", h)
    w = windows.get("w", {})
    return {"windows": w, "count": sum(w.values())}


def read(part: dict[str, Any] | None, prof: Profile) -> tuple[float, dict[int, float]] | None:
    """(windows per unit of work, window histogram per unit)."""
    if part is None:
        return None
    windows = histogram(part.get("windows"))
    count = number(part.get("count")) or sum(windows.values())
    return count / prof.amount, {k: v / prof.amount for k, v in windows.items()}


def figures(ra: tuple[float, dict[int, float]], _per: str) -> list[Figure]:
    m = hist_median(ra[1])
    return [("readahead.window", "readahead window", m, "bytes")] if m else []


def factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    ra = prof.measured.get("readahead")
    if not ra or not ra[0]:
        return []
    count, windows = ra
    window = hist_median(windows)
    if window is None:
        return []
    bra = base.measured.get("readahead") if base is not None else None
    bwin = hist_median(bra[1]) if bra else None
    if bwin is not None and not differs(window, bwin):
        return []
    d = dominant(windows)
    how = "" if d and d[1] >= DOMINANT else "mostly "
    text = (
        f"readahead (prefetch) windows {how}{size_text(window)} ({fmt_count(count)} per {prof.per})"
    )
    if bwin is not None:
        text += f" ({base_name}: {size_text(bwin)})"
    brief = f"readahead {size_text(window)}" + (f" ({base_name} {size_text(bwin)})" if bwin else "")
    b = float(bwin) if bwin else None
    weight = ratio_weight(window, bwin)
    return [Factor("readahead", float(window), "bytes", text, brief, b, weight=weight)]


PROBE = Probe.of_module(
    __name__,
    "readahead",
    ("readahead/page_cache_ra_order", "readahead/page_cache_ra_unbounded"),
    "readahead windows the kernel chose (bytes, log2 histogram) and their count",
    SCRIPT,
    ("readahead_win",),
)
