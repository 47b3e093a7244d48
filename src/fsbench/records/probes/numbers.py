"""Reading probe data (numbers from another version are read, not trusted), log2 histograms,
and the words the explanation writes numbers in."""

from __future__ import annotations

import math
from typing import Any

from fsbench.units import size_text

# A histogram bucket holding this share of the events is "the" size ("4 KiB each").
DOMINANT = 0.9


def as_dict(v: Any) -> dict[str, Any]:
    """v when it is a dict, else an empty one."""
    return v if isinstance(v, dict) else {}


def number(v: Any) -> float | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def histogram(h: Any) -> dict[int, float]:
    """{"4096": 262144} -> {4096: 262144.0}, dropping what is not a number."""
    out: dict[int, float] = {}
    if isinstance(h, dict):
        for k, v in h.items():
            try:
                key = int(k)
            except (TypeError, ValueError):
                continue
            n = number(v)
            if n is not None and n > 0:
                out[key] = out.get(key, 0.0) + n
    return out


def dominant(h: dict[int, float]) -> tuple[int, float] | None:
    """The bucket holding the most events and its share of them."""
    total = sum(h.values())
    if not total:
        return None
    k = max(h, key=lambda b: (h[b], -b))
    return k, h[k] / total


def hist_median(h: dict[int, float]) -> int | None:
    total = sum(h.values())
    if not total:
        return None
    seen = 0.0
    for k in sorted(h):
        seen += h[k]
        if seen >= total / 2:
            return k
    return None


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


def hist_add(dst: dict[str, dict[str, int]], k: str, h: dict[int, int]) -> None:
    """Adds a parsed histogram into dst[k] with the bucket bounds as strings (JSON keys)."""
    b = dst.setdefault(k, {})
    for lo, n in h.items():
        b[str(lo)] = b.get(str(lo), 0) + n


def percentiles(part: dict[str, Any]) -> None:
    """latency_us[OP].p50/p99 from latency_hist_us[OP] (log2 buckets, interpolated)."""
    lat = part.setdefault("latency_us", {})
    for name, h in part.get("latency_hist_us", {}).items():
        hh = {int(k): float(v) for k, v in h.items()}
        entry = lat.setdefault(name, {})
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            v = hist_percentile(hh, q)
            if v is not None:
                entry[label] = round(v, 2)


# -- words ----------------------------------------------------------------------------------------
def fmt_count(n: float) -> str:
    return f"{n:,.0f}" if n >= 10 else f"{n:.2g}"


def fmt_short(n: float) -> str:
    """1.1 M, 250 k, 980: for the terminal's short lines."""
    if n >= 1e6:
        return f"{n / 1e6:.2g} M"
    if n >= 1e4:
        return f"{n / 1e3:.0f} k"
    return fmt_count(n)


def fmt_time(seconds: float) -> str:
    """36 µs, 4.1 ms, 9.4 s."""
    a = abs(seconds)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{seconds * 1e6:.2g} µs" if a * 1e6 < 10 else f"{seconds * 1e6:.0f} µs"
    if a < 1:
        return f"{seconds * 1e3:.2g} ms" if a * 1e3 < 10 else f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2g} s" if a < 10 else f"{seconds:.0f} s"


def fmt_us(us: float) -> str:
    return fmt_time(us / 1e6)


def fmt_pct(x: float) -> str:
    return f"{x * 100:.0f} %" if x * 100 >= 1 else f"{x * 100:.1g} %"


def size_phrase(h: dict[int, float], mean: float | None) -> tuple[str, int | None]:
    """('4 KiB each' | 'mostly 4 KiB (60 % of them)', the dominant bucket when it dominates).
    'of them': a share of the requests, never to be read as the share of time other factors
    give in parentheses."""
    d = dominant(h)
    if d is not None and d[1] >= DOMINANT:
        size = mean if mean is not None and d[0] <= mean < 2 * d[0] else d[0]
        return f"{size_text(size)} each", d[0]
    if d is not None:
        avg = f", average {size_text(mean)}" if mean else ""
        return f"mostly {size_text(d[0])} ({fmt_pct(d[1])} of them){avg}", None
    if mean:
        return f"{size_text(mean)} on average", None
    return "", None
