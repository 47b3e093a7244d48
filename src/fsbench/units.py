"""How fsbench writes sizes, ratios and values, for every renderer and record: one module, so
the terminal, the HTML report, diff, export and the workloads' own labels never disagree."""

from __future__ import annotations

import math

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
_UNITS = ((TiB, "TiB", "t"), (GiB, "GiB", "g"), (MiB, "MiB", "m"), (KiB, "KiB", "k"))


def size_text(n: float) -> str:
    """64 KiB, 1 MiB, 1.5 GiB: binary units, a decimal only when it says something."""
    for unit, suffix, _ in _UNITS:
        if abs(n) >= unit:
            v = n / unit
            return f"{v:.0f} {suffix}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {suffix}"
    return f"{n:.0f} B"


def size_tag(n: int) -> str:
    """64 KiB -> '64k', 1 MiB -> '1m', 2 GiB -> '2g' (what variants and file names use)."""
    for unit, _, tag in _UNITS:
        if n >= unit and n % unit == 0:
            return f"{n // unit}{tag}"
    return str(n)


def fmt_ratio(r: float | None) -> str:
    """0.05×, 0.61×, 1.2×, 12×: two significant digits, as a reader compares them."""
    if r is None or not math.isfinite(r):
        return "–"
    if r >= 10:
        return f"{r:.0f}×"
    if r >= 1:
        return f"{r:.1f}×"
    return f"{r:.2g}×"


def fmt_value(v: float | None, digits: int | None = None) -> str:
    """A measured value: thousands separated from 100 up; below, `digits` decimals (or three
    significant digits when not given)."""
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if digits is not None:
        return f"{v:.{digits}f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def fmt_halfwidth(median: float | None, ci95: tuple[float, float] | None) -> str:
    """The 95 % interval as ± per cent of the median ('' when there is none)."""
    if median is None or ci95 is None or not median:
        return ""
    half = max(median - ci95[0], ci95[1] - median) / abs(median) * 100
    return f"±{half:.0f}%"
