"""What changed with age: a driver's aged result against its fresh one, figure by
figure, from the explanation's profiles of the two (`explain.profile`): device requests (how
many per GiB, how large), FUSE requests, CPU per GiB, context switches, readahead, and the
extents per file of the files read where the workload measured them (workloads/agedtree.py).

Only figures both results measured and that differ by the explanation's threshold
(`SAME_WITHIN`) are said, in the order the issue asks about them: device, FUSE, CPU, extents,
then the rest; nothing is said that this run did not measure. Reads finished `Run` records only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from fsbench.records.probes.factor import differs
from fsbench.records.schema import Result, Run
from fsbench.report.model.explain import fmt_figure, profile
from fsbench.units import fmt_ratio

__all__ = ["AgeChange", "age_changes", "change_text", "why_line"]

# Figure keys by the order they are said in (a prefix each); within one, the largest change
# first. Latencies and throttling stay in the explanation proper: they follow from the rest.
ORDER: tuple[str, ...] = (
    "block.read.count",
    "block.read.size",
    "block.write.count",
    "block.write.size",
    "fuse.READ.count",
    "fuse.WRITE.count",
    "fuse.READ.size",
    "fuse.WRITE.size",
    "fuse.",  # the other FUSE opcodes' counts (LOOKUP, GETATTR, ...)
    "cpu.total",
    "cpu.",
    "extents",
    "ctx",
    "readahead.window",
)
SKIP_SUFFIXES = (".latency", ".p50", ".p99")
MAX_SAID = 4  # figures in the terminal's line; the records keep all of them


@dataclass
class AgeChange:
    """One figure of a driver's fresh and aged results of one workload."""

    key: str
    label: str
    fresh: float
    aged: float
    how: str  # count | bytes | us | s | n | ratio

    @property
    def ratio(self) -> float | None:
        return self.aged / self.fresh if self.fresh > 0 and self.aged > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def _figures(res: Result, run: Run) -> tuple[str, dict[str, tuple[str, float, str]]]:
    p = profile(res, run)
    out = {k: (label, v, how) for k, label, v, how in p.figures()}
    cpu = [v for k, (_, v, _) in out.items() if k.startswith("cpu.")]
    if len(cpu) > 1:
        out["cpu.total"] = (f"CPU per {p.per}", sum(cpu), "s")
    ext = _extents(res)
    if ext is not None:
        out["extents"] = ("extents per file read", ext, "n")
    return p.per, out


def _extents(res: Result) -> float | None:
    for s in reversed(res.sample_details):
        v = s.extra.get("extents_per_file")
        if isinstance(v, int | float):
            return float(v)
    return None


def _rank(key: str) -> int:
    return next((i for i, p in enumerate(ORDER) if key.startswith(p)), len(ORDER))


def age_changes(fresh: Result, aged: Result, run: Run) -> list[AgeChange]:
    """The figures that moved between `fresh` and `aged` (same driver and workload), in the
    order they are said."""
    per_f, ff = _figures(fresh, run)
    per_a, fa = _figures(aged, run)
    if per_f != per_a:
        return []
    out = []
    for key, (label, vf, how) in ff.items():
        if key not in fa or key.endswith(SKIP_SUFFIXES) or key.startswith("writeback"):
            continue
        va = fa[key][1]
        if vf == va == 0 or not differs(vf, va):
            continue
        out.append(AgeChange(key, label, vf, va, how))

    def size(c: AgeChange) -> float:
        r = c.ratio
        return -abs(math.log(r)) if r else 0.0

    out.sort(key=lambda c: (_rank(c.key), size(c)))
    # CPU: the total, and of its parts only the one that moved most (the rest is in the record).
    parts = [c for c in out if c.key.startswith("cpu.") and c.key != "cpu.total"]
    return [c for c in out if c not in parts[1:]]


def change_text(c: AgeChange) -> str:
    """'device read requests per GiB 13,789 → 48,552 (3.52×)'."""
    text = f"{c.label} {fmt_figure(c.fresh, c.how)} → {fmt_figure(c.aged, c.how)}"
    return f"{text} ({fmt_ratio(c.ratio)})" if c.ratio is not None else text


def why_line(base: str, changes: list[AgeChange]) -> str | None:
    """A driver's line under the aged/fresh ratios: fresh → aged, the first MAX_SAID figures."""
    if not changes:
        return None
    said = "; ".join(change_text(c) for c in changes[:MAX_SAID])
    more = f" (+{len(changes) - MAX_SAID} more)" if len(changes) > MAX_SAID else ""
    return f"  {base}, fresh → aged: {said}{more}"
