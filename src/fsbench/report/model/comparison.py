"""One comparison as every output shows it, and the one place the report asks for a verdict.

`verdict_of(base, res)` calls the verdict procedure's public entry point
(`fsbench.verdict.judge`, at the family and priors the run recorded on the results), once per
pair of sample sets; `Comparison` is that verdict as a reader sees it, decided here once: the
ratio, its interval, the outcome for the metric's direction (better, worse, same, open, none),
the verdict's words, and the cell text '1.16× 1.08–1.24 ▲' that every renderer prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fsbench.report.style import glyph
from fsbench.stats.verdict import Family, Verdict, judge, verdict
from fsbench.units import fmt_bound, fmt_ratio

_MEMO: dict[tuple[Any, ...], Verdict] = {}
_MEMO_MAX = 8192


def _key(res: Any) -> tuple[Any, ...]:
    fam = getattr(res, "verdict_family", None)
    return (tuple(res.samples), json.dumps(fam, sort_keys=True) if fam else "")


def verdict_of(base: Any, res: Any) -> Verdict:
    """The verdict of ``res`` against ``base`` (fsbench.verdict.judge), computed once per pair
    of sample sets and families: a report asks for the same pair from several places."""
    key = (*_key(base), *_key(res))
    got = _MEMO.get(key)
    if got is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        got = _MEMO[key] = judge(base, res)
    return got


def samples_verdict(a: Any, b: Any, family: Family) -> Verdict:
    """The verdict on two sample sets of different runs (`diff`): the procedure itself, at the
    family the diff spreads its error rate over, with no run's priors (they are per run)."""
    return verdict(a, b, family)


def rates_verdict(start: Any, end: Any) -> Verdict | None:
    """Raw rates measured again against themselves (the machine's noise floor at the run's
    end against its start): one two-sided comparison of the procedure, no priors; None
    without two rates a side."""
    if len(start) < 2 or len(end) < 2:
        return None
    return verdict(start, end, Family())


def outcome_of(v: Verdict, higher_is_better: bool) -> str:
    """better | worse | same | open | none: the verdict's mark for this metric's direction."""
    b = v.better(higher_is_better)
    if b is not None:
        return "better" if b else "worse"
    return v.mark if v.mark in ("same", "open") else "none"


def confidence_text(confidence: float) -> str:
    """An interval's confidence in per cent with the digits that keep it below 100 ('99.989'):
    a 100 % interval would promise what no interval can."""
    import math

    miss = (1.0 - confidence) * 100
    if miss <= 0:
        return "100"
    digits = max(0, 1 - math.floor(math.log10(miss)))
    return f"{100 - miss:.{digits}f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Comparison:
    """A verdict as the reader sees it (the subject against its reference)."""

    ratio: float | None
    interval: tuple[float, float] | None
    confidence: float
    outcome: str  # better | worse | same | open | none (style.OUTCOMES)
    words: str  # the verdict's words: 'not separated: within ×0.80–1.25'
    band: float

    @classmethod
    def of(cls, v: Verdict, higher_is_better: bool) -> Comparison:
        return cls(
            v.ratio, v.interval, v.confidence, outcome_of(v, higher_is_better), v.words(), v.band
        )

    @property
    def decided(self) -> bool:
        """A difference was decided (▲ or ▼): only such a comparison has reasons to give."""
        return self.outcome in ("better", "worse")

    @property
    def ratio_text(self) -> str:
        return fmt_ratio(self.ratio) if self.ratio is not None else "–"

    @property
    def interval_text(self) -> str:
        """'1.08–1.24': the interval's bounds rounded outward (units.fmt_bound), ''
        without one."""
        if self.interval is None:
            return ""
        lo, hi = self.interval
        return f"{fmt_bound(lo, False, self.band)}–{fmt_bound(hi, True, self.band)}"

    @property
    def glyph(self) -> str:
        return glyph(self.outcome)

    def cell(self, interval: bool = True) -> str:
        """'1.16× 1.08–1.24 ▲': the ratio, its interval and the mark the interval gives."""
        if self.ratio is None:
            return "–"
        text = fmt_ratio(self.ratio)
        if interval and self.interval is not None:
            text += " " + self.interval_text
        return f"{text} {self.glyph}"

    def leader_text(self) -> str:
        """'0.98× (not separated: within ×0.80–1.25)': the ratio and the verdict's words."""
        ratio = fmt_ratio(self.ratio) + " " if self.ratio is not None else ""
        return f"{ratio}({self.words})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ratio_low": self.interval[0] if self.interval else None,
            "ratio_high": self.interval[1] if self.interval else None,
            "verdict": self.outcome,
            "confidence": round(self.confidence, 6),
            "band": self.band,
            "words": self.words,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Comparison | None:
        """A comparison a run stored (to_dict's form, Run.verdicts): what the run decided,
        shown as it was decided. None when the record has no ratio."""
        if rec.get("ratio") is None:
            return None
        lo, hi = rec.get("ratio_low"), rec.get("ratio_high")
        return cls(
            float(rec["ratio"]),
            (float(lo), float(hi)) if lo is not None and hi is not None else None,
            float(rec.get("confidence", 0.95)),
            str(rec["verdict"]),
            str(rec.get("words", "")),
            float(rec.get("band", 0.02)),
        )


def compare(base: Any, res: Any) -> Comparison:
    """``res`` against ``base`` as the reader sees it, for ``res``'s metric direction."""
    return Comparison.of(verdict_of(base, res), res.higher_is_better)


def latency_verdict(base: Any, res: Any, key: str = "p99") -> Verdict | None:
    """The verdict on ``key`` (p50, p99, p99.9 or iops) of ``res`` against ``base`` by the same
    procedure as a rate's (fsbench.latency.view: the per-sample figures as samples, lower
    better); None when either lacks it or ``res`` is the baseline."""
    from fsbench.stats import latency

    if base is None or base is res:
        return None
    a, b = latency.view(base, key), latency.view(res, key)
    if a is None or b is None:
        return None
    return verdict_of(a, b)
