"""The report as data: `build(run) -> Report`, every decision a reader sees made once.

Free of rich, jinja and matplotlib. For each workload a `Table` (title, parameters, unit,
baseline, columns, rows, notes, reasons); for each row its centre, interval, `Comparison` with
the baseline (comparison.py: ratio, interval, outcome, words, cell text), CPU, cache, n and why
sampling stopped; the answer per workload (the fastest, the others ranked with their
comparison to it, the reasons). Renderers (table.py for the terminal, the page, the exports)
format these records and look each outcome up in the style table (style.py); none compares,
orders or picks notes itself.

One decision is the model's own: only a decided difference (▲/▼ against the reference) is
explained. A subject not separated from its reference gets no reason, only the verdict's words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fsbench import latency
from fsbench.report.answer import answer_factor, answers, leaders, missing, rank
from fsbench.report.comparison import Comparison, compare, confidence_text, latency_verdict
from fsbench.report.explain import Explanation, explain_run
from fsbench.report.naming import (
    baseline_result,
    centre_of,
    ci_text,
    placement_text,
    ranked,
    result_title,
)
from fsbench.report.notes import TableNotes, table_notes
from fsbench.report.style import CACHE_TEXT, STOP_MARKS, STOP_WORDS, words
from fsbench.report.summary import (
    by_title,
    groups,
    is_matrix,
    measured_subjects,
    report_order,
    usable,
)
from fsbench.schema import Result, Run
from fsbench.units import fmt_value
from fsbench.units import size_text as format_size


@dataclass
class Why:
    """What a table or the answer says about why a subject differs from its reference: the
    explanation's factors when the difference was decided, else only the verdict's words."""

    subject: str
    explanation: Explanation | None  # factors to give (None: nothing measured to say)
    words: str = ""  # 'not separated: within ×0.52–2.43 against ext4' (undecided)


@dataclass
class Row:
    """One subject's line in a workload table, every cell decided."""

    subject: str
    status: str  # ok, or why the subject has no figure
    error: str = ""
    median: str = ""  # '2,203'
    centre: str = ""  # '2,203 ±62%' (median and the interval's larger half)
    interval: str = ""  # '1,370 – 3,570'
    comparison: Comparison | None = None  # against the table's baseline
    outcome: str = "empty"  # the vs cell's look (style.OUTCOMES)
    vs: str = ""  # the vs cell: '0.44× 0.24–0.80 ▼', 'baseline', 'not ranked', '–'
    vs_words: str = ""  # the vs cell in words (the page's test column)
    iops: str = ""
    p99: str = ""
    p99_comparison: Comparison | None = None
    cpu: str = ""  # app+driver+kernel threads per GiB (per kop, per run)
    cpu_total: str = ""  # per GiB, all parts
    cpu_parts: str = ""  # '0.52 + 0.00 + 0.21'
    ctx: str = ""  # the subject's context switches per GiB (app + daemon)
    amp: str = ""  # read and write amplification
    cache: str = ""
    n: int = 0
    stop_mark: str = ""
    stop_words: str = ""
    best: bool = False
    notes: list[str] = field(default_factory=list)  # the subject's own (detail)


@dataclass
class Table:
    """One workload's table."""

    key: str
    title: str
    described: str  # the parameters in a few words: 'bs=1M, file=409 MiB, final fsync'
    unit: str
    higher_is_better: bool
    baseline: str | None
    latency: bool  # IOPS and p99 columns (a latency-bound workload)
    latency_words: str  # what the p99 is
    cpu_unit: str  # 's/GiB', 'ms/kop', 's/run'
    rows: list[Row]
    notes: TableNotes  # the decision of which notes show, brief
    notes_detail: TableNotes  # and in detail (--verbose, the page)
    whys: list[Why]  # reasons under the table, in row order
    results: list[Result]  # the rows' results (the page's plots and explanations)


@dataclass
class AnswerItem:
    subject: str
    text: str  # '0.44× 0.24–0.80 ▼', or the leader's words, or why it is not ranked
    outcome: str  # the look (style.OUTCOMES)
    leader: bool = False  # not separated from the top: the verdict's words


@dataclass
class Answer:
    """One workload's answer: the fastest (or the leaders not separated), the others best
    first, each with its comparison to the top, and the reasons against the baseline."""

    title: str
    unit: str
    winner: str
    value: str  # the top's rate with its unit
    separated: bool
    alone: bool
    items: list[AnswerItem]
    unranked: list[AnswerItem]
    baseline: str | None
    whys: list[Why]


@dataclass
class Report:
    run: Run
    tables: list[Table]
    answers: list[Answer]

    @cached_property
    def missing(self):  # type: ignore[no-untyped-def]
        return missing(self.run)


CPU_PARTS = ("app", "driver", "kernel_threads")


# -- rows ------------------------------------------------------------------------------------------
def _per_run(res: Result) -> bool:
    return res.params.get("engine") == "command"


def cpu_text(res: Result) -> str:
    """app+driver+kernel threads, per GiB; per 1000 operations (ms) when no bytes moved; per run
    (s) for a user's command."""
    parts = CPU_PARTS
    per = res.cpu.per_gib
    if per:
        return "+".join(f"{per.get(k, 0):.1f}" for k in parts)
    per_kop = res.cpu.per_kop_ms
    if per_kop and _per_run(res):
        return "+".join(f"{per_kop.get(k, 0) / 1e6:.2f}" for k in parts)
    if per_kop:
        return "+".join(f"{per_kop.get(k, 0):.1f}" for k in parts)
    return "–"


def vs_cell(
    base: Result | None, res: Result, stored: dict[str, Any] | None = None
) -> tuple[Comparison | None, str, str, str]:
    """(comparison, outcome, cell text, words) of res against the table's baseline: the one
    the run stored (`stored`, a Run.verdicts record) when it has one, else decided now."""
    if not ranked(res):
        return None, "unranked", "not ranked", "integrity failed"
    if base is None or base is res or not base.samples or not res.samples:
        return (
            None,
            ("baseline" if base is res else "empty"),
            ("baseline" if base is res else "–"),
            "",
        )
    c = (Comparison.from_record(stored) if stored else None) or compare(base, res)
    how = words(c.outcome)
    if c.interval is not None:
        how += f" ({confidence_text(c.confidence)} % interval)"
    return c, c.outcome, c.cell(), how


def _row(res: Result, base: Result | None, lat: bool, stored: dict[str, Any] | None) -> Row:
    if res.status != "ok" or not res.samples:
        return Row(res.subject, res.status, res.error or "no samples")
    c, said, vs, how = vs_cell(base, res, stored)
    row = Row(
        subject=res.subject,
        status="ok",
        median=fmt_value(centre_of(res)),
        centre=ci_text(res),
        interval=ci_text(res, "range"),
        comparison=c,
        outcome=said,
        vs=vs,
        vs_words=how,
        cpu=cpu_text(res),
        cpu_total="" if res.cpu.per_gib_s is None else f"{res.cpu.per_gib_s:.2f}",
        cpu_parts=" + ".join(
            f"{(res.cpu.per_gib or {}).get(k, 0.0):.2f}"
            for k in ("app", "driver", "kernel_threads")
        )
        if res.cpu.per_gib
        else "",
        ctx=_ctx(res),
        amp=_amp(res),
        cache=CACHE_TEXT.get(res.cache, res.cache),
        n=len(res.samples),
        stop_mark=STOP_MARKS.get(res.stopped or "", ""),
        stop_words=STOP_WORDS.get(res.stopped or "", ""),
    )
    if lat:
        figs = latency.figures(res)
        row.iops = fmt_value(figs["iops"], 0) if figs.get("iops") else "–"
        row.p99 = fmt_value(figs["p99_us"]) if figs.get("p99_us") is not None else "–"
        kept = Comparison.from_record(stored["p99"]) if stored and "p99" in stored else None
        v = None if kept is not None else latency_verdict(base, res)
        if kept is not None:
            row.p99_comparison = kept
        elif v is not None and v.ratio is not None:
            row.p99_comparison = Comparison.of(v, False)
    return row


def _ctx(res: Result) -> str:
    """The subject's context switches per GiB (app + daemon); an older run has only the whole
    machine's, and says so."""
    if res.subject_ctx_switches_per_gib is not None:
        return f"{res.subject_ctx_switches_per_gib:,.0f}"
    if res.ctx_switches_per_gib is not None:
        return f"{res.ctx_switches_per_gib:,.0f} (machine)"
    return ""


def _amp(res: Result) -> str:
    bits = []
    if res.read_amplification is not None:
        bits.append(f"read {res.read_amplification:.2f}")
    if res.write_amplification is not None:
        bits.append(f"write {res.write_amplification:.2f}")
    return ", ".join(bits)


def best_of(results: list[Result]) -> Result | None:
    """The fastest to star: none when fewer than two ranked, or when the leaders are not
    separated (answer.leaders, the answer line's rule)."""
    ok = rank(results)
    if len(ok) < 2 or len(leaders(ok)) > 1:
        return None
    return ok[0]


def describe(res: Result) -> str:
    """A workload's parameters in a few words: 'bs=1M, file=409 MiB, final fsync'."""
    p = res.params
    bits = []
    if "block_size" in p:
        bits.append(f"bs={p['block_size']}")
    if isinstance(p.get("file_size"), int) and p["file_size"]:
        bits.append(f"file={format_size(p['file_size'])}")
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


# -- reasons: only what was decided ----------------------------------------------------------------
def _decided_placements(e: Explanation) -> Explanation:
    """The explanation's placement remarks whose verdict is ▲ or ▼ (they compare the subject
    with itself, a comparison of their own)."""
    moved = [
        f for f in e.factors if f.name.startswith("placement") and f.outcome in ("better", "worse")
    ]
    return replace(e, factors=moved)


def why(e: Explanation | None, c: Comparison | None, base: str | None) -> Why | None:
    """What is said about a subject's difference from its reference: the ranked factors when
    the difference was decided (▲/▼); the verdict's words, and no reason, when it was not."""
    if e is None:
        return None
    if e.is_baseline:
        kept = _decided_placements(e)
        return Why(e.subject, kept) if kept.factors else None
    if c is not None and not c.decided:
        kept = _decided_placements(e)
        return Why(e.subject, kept if kept.factors else None, f"{c.words} against {base}")
    return Why(e.subject, e) if e.factors else None


# -- tables ----------------------------------------------------------------------------------------
def tables(run: Run, explained: dict[int, Explanation]) -> list[Table]:
    """One table per workload (the matrix has its own), subjects in run order."""
    subjects = measured_subjects(run)
    # What the run decided (Run.verdicts), shown as decided.
    stored = {str(v.get("key")): v for v in run.verdicts}
    out = []
    for title, results in by_title(run).items():
        results.sort(key=lambda r: subjects.index(r.subject) if r.subject in subjects else 99)
        base = baseline_result(results, subjects)
        lat = any(latency.latency_bound(r) for r in results)
        rows = [_row(r, base, lat, stored.get(verdict_key(r))) for r in results]
        per_kop = not any(r.cpu.per_gib for r in results) and any(r.cpu.per_kop_ms for r in results)
        cpu_unit = (
            ("s/run" if all(_per_run(r) for r in results) else "ms/kop") if per_kop else "s/GiB"
        )
        whys = []
        for r, row in zip(results, rows, strict=True):
            w = why(explained.get(id(r)), row.comparison, base.subject if base else None)
            if w is not None:
                whys.append(w)
        detail = table_notes(results, run.schedule, detail=True)
        best = best_of(results)
        for r, row in zip(results, rows, strict=True):
            row.notes = detail.per_subject.get(row.subject, [])
            row.best = r is best
        out.append(
            Table(
                key=title,
                title=title,
                described=describe(results[0]),
                unit=results[0].unit,
                higher_is_better=results[0].higher_is_better,
                baseline=base.subject if base else None,
                latency=lat,
                latency_words=latency.words(results) if lat else "",
                cpu_unit=cpu_unit,
                rows=rows,
                notes=table_notes(results, run.schedule, detail=False),
                notes_detail=detail,
                whys=whys,
                results=results,
            )
        )
    return out


# -- the answer ------------------------------------------------------------------------------------
def answer_list(run: Run, explained: dict[int, Explanation]) -> list[Answer]:
    out = []
    for a in answers(run):
        if a.winner is None:
            continue
        top = a.winner
        items = []
        for r in a.others:
            c = compare(top, r)
            if not a.separated and r in a.leaders:
                items.append(AnswerItem(r.subject, c.leader_text(), "same", leader=True))
            else:
                items.append(AnswerItem(r.subject, *_answer_cell(top, r, c)))
        unranked = [
            AnswerItem(r.subject, "not ranked" if r.status == "ok" else r.status, "unranked")
            for r in a.unranked
        ]
        base = a.baseline
        whys = []
        for r in a.ranking:
            e = explained.get(id(r))
            if e is None or e.is_baseline or base is None or r is base:
                continue
            c = compare(base, r) if ranked(r) and base.samples and r.samples else None
            if c is not None and not c.decided:
                whys.append(Why(r.subject, None, f"{c.words} against {base.subject}"))
            elif answer_factor(e) is not None:
                whys.append(Why(r.subject, e))
        out.append(
            Answer(
                title=a.title,
                unit=a.unit,
                winner=top.subject,
                value=f"{fmt_value(centre_of(top))} {a.unit}",
                separated=a.separated,
                alone=not (a.others or a.unranked),
                items=items,
                unranked=unranked,
                baseline=base.subject if base else None,
                whys=whys,
            )
        )
    return out


def _answer_cell(top: Result, r: Result, c: Comparison) -> tuple[str, str]:
    if not ranked(r):
        return "not ranked", "unranked"
    if not top.samples or not r.samples:
        return "–", "empty"
    return c.cell(), c.outcome


def build(run: Run, explained: dict[int, Explanation] | None = None) -> Report:
    """The report of a finished run: every table and the answer, decided once."""
    if explained is None:
        explained = {id(run.results[e.index]): e for e in explain_run(run)}
    return Report(run, tables(run, explained), answer_list(run, explained))


# -- every result's verdict, as the exports and results.json carry it ----------------------------
def baselines(run: Run) -> dict[int, Result | None]:
    """Each result's baseline: the first subject that finished in its table (id(result) ->
    baseline; the matrix: per cell)."""
    order = measured_subjects(run)
    out: dict[int, Result | None] = {}
    for g in groups(run):
        for per in g.cells.values():
            base = baseline_result(list(per.values()), order)
            out.update({id(r): base for r in per.values()})
    return out


def verdict_key(res: Result) -> str:
    """What names a result across a store's round trip: subject, workload, parameters."""
    return json.dumps([res.subject, res.workload, res.params], sort_keys=True, default=str)


def verdict_record(res: Result, base: Result | None) -> dict[str, Any]:
    """A result against its table's baseline, as every output shows it: the outcome, the
    ratio with its interval and confidence, the cell text, the verdict's words; for a
    latency-bound result also its p99's ({} when there is no baseline)."""
    if base is None or not usable(res) or not usable(base):
        return {}
    c, said, cell, _ = vs_cell(base, res)
    rec: dict[str, Any] = {"baseline": base.subject, "verdict": said, "cell": cell}
    if c is not None:
        rec.update(c.to_dict())
        rec["verdict"] = said
    if latency.latency_bound(res):
        v = latency_verdict(base, res)
        if v is not None:
            rec["p99"] = Comparison.of(v, False).to_dict()
    return rec


def verdicts(run: Run) -> list[dict[str, Any]]:
    """Every result's verdict record, in the report's order, with its index in run.results."""
    base = baselines(run)
    index = {id(r): i for i, r in enumerate(run.results)}
    out = []
    for res in report_order(run):
        rec = verdict_record(res, base.get(id(res)))
        if rec:
            out.append({"index": index[id(res)], "key": verdict_key(res),
                        "subject": res.subject, "title": result_title(res), **rec})  # fmt: skip
    return out


def page_only(run: Run) -> list[str]:
    """The run's sections that only the page (report.html) can show: plots, the Iozone
    matrix's grids, placements and clients' scaling; an export names them, never drops them."""
    out = []
    if any(is_matrix(r) for r in run.results):
        out.append("the Iozone matrix")
    if any(r.params.get("placement") for r in run.results):
        out.append("placement plots")
    if any(r.params.get("clients") is not None for r in run.results):
        out.append("client scaling")
    if any(usable(r) for r in run.results):
        out.append("plots of rates and CPU")
    if any(s.integrity is not None for s in run.subjects):
        out.append("integrity checks per subject")
    if any(s.semantics for s in run.subjects):
        out.append("the semantics table")
    return out
