"""Shared by the renderers: how a result is named (workload/variant[-jN]), which result is a
workload's baseline, and how a ratio and its verdict are printed (fsbench.verdict: ▲ better,
▼ worse, both when the interval excludes 1; ≈ within ±2 %; ? open). Every table, report, diff
and plot prints a ratio through these, so a mark never disagrees with its printed interval."""

from __future__ import annotations

from fsbench.records.schema import Result
from fsbench.report.model.comparison import Comparison, confidence_text
from fsbench.report.model.comparison import outcome_of as outcome
from fsbench.report.style import OUTCOMES, STOP_MARKS, STOP_WORDS, VERDICT_OUTCOMES
from fsbench.stats.baseline import baseline_result, ranked
from fsbench.stats.verdict import Verdict
from fsbench.units import fmt_halfwidth, fmt_value, size_text

__all__ = [
    "OUTCOME_WORDS",
    "STOP_MARKS",
    "STOP_WORDS",
    "SYMBOLS",
    "baseline_result",
    "ci_text",
    "confidence_text",
    "interval_text",
    "outcome",
    "placement_text",
    "ranked",
    "ratio_cell",
    "result_title",
]

# What a verdict tells the reader, by outcome: the style table's (report/style.py).
SYMBOLS = {k: OUTCOMES[k].glyph for k in VERDICT_OUTCOMES}
OUTCOME_WORDS = {k: OUTCOMES[k].words for k in VERDICT_OUTCOMES}


def result_title(res: Result) -> str:
    """workload/variant[-jN][ [placement]]: the placement is named only when the run measured
    placements (params.placement), so results of one placement share a table."""
    variant = res.params.get("variant")
    jobs = res.params.get("numjobs", 1)
    title = f"{res.workload}/{variant}" if variant else res.workload
    if jobs not in (1, None):
        title += f"-j{jobs}"
    clients = res.params.get("clients")
    if clients is not None:
        title += f"-c{clients}"
    placement = res.params.get("placement")
    return f"{title} [{placement}]" if placement else title


# How a title's description says where the processes ran (--placement).
PLACEMENT_TEXT = {
    "free": "nothing pinned",
    "same": "app and daemon on one CPU",
    "split": "app and daemon on separate CPUs",
}


def placement_text(placement: object) -> str:
    return PLACEMENT_TEXT.get(str(placement), f"placement {placement}")


def ci_text(res: Result, form: str = "half") -> str:
    """A result's centre (centre_of: the geometric mean) and 95 % interval, one way for every
    renderer: 'half' is '2,203 ±62%' (the centre and the interval's larger half), 'range' is
    '1,370 – 3,570' (its bounds), '' without an interval; '–' without samples."""
    if res.median is None:
        return "–"
    if form == "range":
        if res.ci95 is None or not centre_of(res):
            return ""
        return f"{fmt_value(res.ci95[0])} – {fmt_value(res.ci95[1])}"
    half = fmt_halfwidth(centre_of(res), res.ci95)
    return f"{fmt_value(centre_of(res))} {half}" if half else fmt_value(centre_of(res))


def centre_of(res: Result) -> float | None:
    """The centre every output prints: the samples' geometric mean, which a comparison's
    ratio divides (fsbench.stats); the median for a result without one."""
    return res.center if res.center is not None else res.median


def interval_text(v: Verdict) -> str:
    """'1.08–1.24': the interval's bounds rounded outward (units.fmt_bound), '' without one."""
    return Comparison.of(v, True).interval_text


def ratio_cell(v: Verdict, higher_is_better: bool, interval: bool = True) -> str:
    """'1.16× 1.08–1.24 ▲': the ratio, its interval and the mark the interval gives."""
    return Comparison.of(v, higher_is_better).cell(interval)


# -- a result's figures in words ------------------------------------------------------------
CPU_PARTS = ("app", "driver", "kernel_threads")


def per_run(res: Result) -> bool:
    return res.params.get("engine") == "command"


def cpu_text(res: Result) -> str:
    """app+driver+kernel threads, per GiB; per 1000 operations (ms) when no bytes moved; per run
    (s) for a user's command."""
    parts = CPU_PARTS
    per = res.cpu.per_gib
    if per:
        return "+".join(f"{per.get(k, 0):.1f}" for k in parts)
    per_kop = res.cpu.per_kop_ms
    if per_kop and per_run(res):
        return "+".join(f"{per_kop.get(k, 0) / 1e6:.2f}" for k in parts)
    if per_kop:
        return "+".join(f"{per_kop.get(k, 0):.1f}" for k in parts)
    return "–"


def ctx_text(res: Result) -> str:
    """The subject's context switches per GiB (app + daemon); an older run has only the whole
    machine's, and says so."""
    if res.subject_ctx_switches_per_gib is not None:
        return f"{res.subject_ctx_switches_per_gib:,.0f}"
    if res.ctx_switches_per_gib is not None:
        return f"{res.ctx_switches_per_gib:,.0f} (machine)"
    return ""


def amp_text(res: Result) -> str:
    bits = []
    if res.read_amplification is not None:
        bits.append(f"read {res.read_amplification:.2f}")
    if res.write_amplification is not None:
        bits.append(f"write {res.write_amplification:.2f}")
    return ", ".join(bits)


def describe(res: Result) -> str:
    """A workload's parameters in a few words: 'bs=1M, file=409 MiB, final fsync'."""
    p = res.params
    bits = []
    if "block_size" in p:
        bits.append(f"bs={p['block_size']}")
    if isinstance(p.get("file_size"), int) and p["file_size"]:
        bits.append(f"file={size_text(p['file_size'])}")
    if p.get("numjobs", 1) not in (1, None):
        bits.append(f"{p['numjobs']} jobs")
    if p.get("clients") is not None:
        bits.append(f"{p['clients']} clients")
    if p.get("fsync") == "end":
        bits.append("final fsync")
    if p.get("direct"):
        bits.append("O_DIRECT")
    if p.get("placement"):
        bits.append(placement_text(p["placement"]))
    return ", ".join(bits)
