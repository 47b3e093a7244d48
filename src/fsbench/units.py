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
    """The one ratio format of every table, report, diff and plot: 0.053×, 0.82×, 1.16×,
    12.3×, 123× (three significant digits, two decimals from 0.1 to 10)."""
    if r is None or not math.isfinite(r):
        return "–"
    # Decide the form on the value as printed: 9.996 is "10.0×", not "10.00×"; but round the
    # value itself once (0.28528 rounded twice, to 0.285 and then 2 decimals, printed 0.28×
    # beside centres of 1,997 and 570).
    shown = float(f"{r:.3g}") if r >= 0.1 else float(f"{r:.2g}")
    if shown >= 100:
        return f"{r:.0f}×"
    if shown >= 10:
        return f"{r:.1f}×"
    if shown >= 0.1:
        return f"{r:.2f}×"
    return f"{r:.2g}×"


def fmt_bound(x: float, upper: bool, band: float = 0.02) -> str:
    """An interval bound rounded outward (down for the lower, up for the upper), with as many
    digits as it takes not to cross 1 or the equivalence band (±2 % unless --equivalence): the
    printed interval then contains the computed one and says the same as its mark (1.004 prints
    1.004, never 1.00 beside ▲)."""
    thresholds = (1.0, 1.0 - band, 1.0 + band)
    if not math.isfinite(x):
        return "∞" if x > 0 else "–"
    if x >= 1e6 or 0 < x < 1e-4:
        # Far from every threshold: two significant digits and a power of ten, rounded outward
        # (a bound of 1e30 at two samples is no figure to print digit by digit).
        e = math.floor(math.log10(x))
        m = x / 10.0**e
        m = (math.ceil(m * 10 - 1e-9) if upper else math.floor(m * 10 + 1e-9)) / 10
        if m >= 10:
            m, e = m / 10, e + 1
        return f"{m:g}e{e}"
    for digits in range(2, 8):
        scale = 10.0**digits
        if abs(x) >= 10:
            scale = 10.0 ** max(0, digits - int(math.log10(abs(x))))
        elif 0 < abs(x) < 0.1:
            scale = 10.0 ** (digits - 1 - math.floor(math.log10(abs(x))))
        y = (math.ceil(x * scale - 1e-9) if upper else math.floor(x * scale + 1e-9)) / scale
        if not any((x < t) != (y < t) or (x > t) != (y > t) for t in thresholds):
            break
    text = f"{y:.{max(0, round(math.log10(scale)))}f}"
    return text


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


def fmt_halfwidth(centre: float | None, ci95: tuple[float, float] | None) -> str:
    """The 95 % interval in per cent of the centre ('' when there is none): '±4%' while
    its two sides are alike, '−38 +62%' once a log-scale interval is visibly asymmetric (a
    '±111%' would promise a negative rate)."""
    if centre is None or ci95 is None or not centre:
        return ""
    below = (centre - ci95[0]) / abs(centre) * 100
    above = (ci95[1] - centre) / abs(centre) * 100
    if max(below, above) < 10 or round(below) == round(above):
        return f"±{max(below, above):.0f}%"
    return f"−{below:.0f} +{above:.0f}%"
