"""The `writeback` probe: dirty throttling (balance_dirty_pages) and the flusher's writes."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, Profile, share_text, time_factor
from fsbench.records.probes.numbers import fmt_count, fmt_time, number
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows

# A `wrote` outside 1..2^32 pages is an integrity sync's LONG_MAX bookkeeping, not pages:
# summed, it wrapped to -9.2e18 in a real capture.
SCRIPT = """
tracepoint:writeback:balance_dirty_pages {
  @writeback_bdp[args->bdi] = count();
  if (args->pause > 0) { @writeback_pause[args->bdi] = sum(args->pause); }
}
tracepoint:writeback:writeback_single_inode /args->wrote > 0 && args->wrote < 0x100000000/ {
  @writeback_pages[args->name] = sum(args->wrote);
}
"""


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any]:
    wb = {"balance_dirty_pages": 0, "pause_ms": 0.0, "pages_written": 0}
    for m, field_ in (
        ("writeback_bdp", "balance_dirty_pages"),
        ("writeback_pause", "pause_ms"),
        ("writeback_pages", "pages_written"),
    ):
        for (bdi,), n in rows(maps, m):
            if bdi in keys.bdis:
                wb[field_] += n
    wb["pause_ms"] = float(wb["pause_ms"])
    return wb


def read(part: dict[str, Any] | None, prof: Profile) -> tuple[float, float, float | None] | None:
    """(pauses, pause seconds, pages written back) per unit of work."""
    if part is None:
        return None
    pages = number(part.get("pages_written"))
    return (
        (number(part.get("balance_dirty_pages")) or 0.0) / prof.amount,
        (number(part.get("pause_ms")) or 0.0) / 1e3 / prof.amount,
        pages / prof.amount if pages is not None else None,
    )


def figures(wb: tuple[float, float, float | None], per: str) -> list[Figure]:
    return [("writeback.pauses", f"dirty throttling per {per}", wb[0], "n")] if wb else []


def factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    wb = prof.measured.get("writeback")
    if not wb:
        return []
    pauses, pause_s, pages = wb
    if not pauses and not pause_s:
        return []
    text = (
        f"dirty throttling: {fmt_count(pauses)} balance_dirty_pages pauses per {prof.per}, "
        f"{fmt_time(pause_s)} per {prof.per}"
    ) + share_text(pause_s, prof)
    if pages is not None:
        text += f"; {fmt_count(pages)} pages written back per {prof.per}"
    base_s = None
    bwb = base.measured.get("writeback") if base is not None else None
    if bwb is not None:
        base_s = bwb[1]
        text += f" ({base_name}: " + (
            f"{fmt_time(base_s)} throttled)" if base_s else "not throttled)"
        )
    brief = f"throttled {fmt_time(pause_s)}/{prof.per}"
    unit = f"s/{prof.per}"
    return [
        time_factor("writeback", pause_s, unit, text, brief, pause_s, base_s, prof, inp.gap, base_s)
    ]


PROBE = Probe.of_module(
    __name__,
    "writeback",
    ("writeback/balance_dirty_pages", "writeback/writeback_single_inode"),
    "dirty throttling: balance_dirty_pages calls and their pause; pages the flusher "
    "wrote back (writeback_single_inode; an fsync's own writes are not among them)",
    SCRIPT,
    ("writeback_bdp", "writeback_pause", "writeback_pages"),
)
