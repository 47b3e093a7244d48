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

from dataclasses import dataclass, field
from functools import cached_property

from fsbench.records.schema import SCHEMA_VERSION, Environment, Result, Run
from fsbench.records.tunerecord import EXPLAINED_ENOUGH, TuneChange, TuneRecord, tune_of
from fsbench.report.model.aging import aging_lines, effect_lines
from fsbench.report.model.answer import (
    Why,
    answer_factor,
    answers,
    missing,
    missing_pieces,
    why,
)
from fsbench.report.model.comparison import Comparison, confidence_text
from fsbench.report.model.decided import (
    Decided,
    ResultFacts,
    baselines,
    family_line,
    result_facts,
    table_family,
    tables_legend,
    verdict_key,
    verdict_record,
    verdicts,
    vs_cell,
)
from fsbench.report.model.diff import RunDiff, diff_runs
from fsbench.report.model.explain import Explanation, OpFigures, Profile, explain_run, profile
from fsbench.report.model.facts import (
    EnvironmentView,
    IntegrityRow,
    IntegrityView,
    PageOnly,
    SemanticsCell,
    SemanticsView,
    environment,
    integrity,
    page_only,
    semantics,
)
from fsbench.report.model.grids import (
    DiskmarkCell,
    DiskmarkGrid,
    Matrix,
    MatrixTable,
    SummaryGrid,
    best_of,
    diskmark,
    matrix,
    summary,
)
from fsbench.report.model.grouping import (
    Group,
    by_title,
    groups,
    is_matrix,
    measured_subjects,
    usable,
)
from fsbench.report.model.keys import placement_of, workload_key
from fsbench.report.model.naming import (
    amp_text,
    baseline_result,
    centre_of,
    ci_text,
    cpu_text,
    ctx_text,
    describe,
    per_run,
    ranked,
    result_title,
)
from fsbench.report.model.notes import TableNotes, counted_lines, table_notes
from fsbench.report.model.tune import Shown, best_change, recommended, shown
from fsbench.report.model.vm_notes import vm_notes
from fsbench.report.style import CACHE_TEXT, STOP_MARKS, STOP_WORDS
from fsbench.stats import latency
from fsbench.stats.verdict import Family, family_of
from fsbench.units import fmt_value


@dataclass
class Row:
    """One subject's line in a workload table, every cell decided."""

    subject: str
    status: str  # ok, or why the subject has no figure
    error: str = ""
    median: str = ""  # '2,203': the centre (centre_of, the geometric mean), as printed
    centre: str = ""  # '2,203 ±62%' (the centre and the interval's larger half)
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
    # Each row's explanation with what the model decided of it (None: nothing decided to
    # hide), in row order; and the key of the workload's traces (placement left out).
    explained: list[tuple[Explanation, Why | None]] = field(default_factory=list)
    trace_key: str = ""
    family: Family = field(default_factory=Family)  # its own verdicts' (decided.table_family)

    @property
    def legend(self) -> str:
        """Its ratios' confidence, from its own family (decided.family_line)."""
        return family_line(self.family)

    def note_lines(self, detail: bool = False) -> list[str]:
        """The counted kinds in one line with the advice (notes.counted_lines), brief or in
        detail: the same words under every output's table."""
        return counted_lines(self.notes_detail if detail else self.notes)


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
    """Everything a reader sees of a run, decided: renderers format it."""

    run: Run
    tables: list[Table]
    answers: list[Answer]
    matrix: Matrix | None = None
    diskmark: DiskmarkGrid | None = None
    integrity: IntegrityView | None = None
    semantics: SemanticsView | None = None
    environment: EnvironmentView | None = None
    page_only: list[PageOnly] = field(default_factory=list)  # what only report.html shows
    summary: SummaryGrid | None = None  # workloads × subjects (the page's)
    unshown: dict[str, list[Explanation]] = field(default_factory=dict)  # model.unshown
    vm_notes: list[str] = field(default_factory=list)  # what makes the answer unrepresentative
    aging_effects: list[str] = field(default_factory=list)  # what aging changed, per workload
    aging_notes: list[str] = field(default_factory=list)  # how each aged image was made
    decide: Decided | None = field(default=None, repr=False)  # the run's comparisons, asked once

    def comparison_of(self, base: Result, res: Result) -> Comparison | None:
        """The comparison of `res` against `base` as the run decided it (Run.verdicts), else
        decided now, once: what a plot marks beside a pair the tables compare too."""
        return (self.decide or Decided(self.run))(base, res)[0]

    def p99_of(self, res: Result) -> Comparison | None:
        """The p99 comparison of a latency-bound result's row against its table's baseline."""
        return self._rows.get(id(res))

    @cached_property
    def _rows(self) -> dict[int, Comparison | None]:
        return {
            id(r): row.p99_comparison
            for t in self.tables
            for r, row in zip(t.results, t.rows, strict=True)
        }

    @cached_property
    def missing(self):  # type: ignore[no-untyped-def]
        return missing(self.run)

    @cached_property
    def family(self) -> Family:
        """The run's family (its largest table's; Run.schedule.verdict): its error rate and
        band, which every table shares; a table's confidence is its own (Table.family)."""
        return family_of(self.run)

    @cached_property
    def shared_family(self) -> Family | None:
        """The family every workload table shares (one legend for all), else None."""
        fams = {t.family for t in self.tables}
        return fams.pop() if len(fams) == 1 else None

    @property
    def verdict_legend(self) -> str:
        """What ▲/▼ promise, for the tables and the answer (decided.tables_legend)."""
        return tables_legend(self.shared_family, self.family)

    def not_shown(self, verbose_shows: bool = False) -> str:
        """What an output leaves to the page, in words ('rate and CPU plots, the summary grid,
        …'); `verbose_shows`: the terminal, which shows the integrity and
        semantics tables with --verbose and says so where it leaves them out."""
        return ", ".join(p.words for p in self.page_only if not (verbose_shows and p.verbose))

    def missing_lines(self, width: int) -> list[list[str]]:
        """The subjects not measured, per line its pieces (answer.missing_pieces)."""
        return missing_pieces(self.run, width)


# What a renderer reads, and the only place it imports from besides the style table and the
# number words (tests/unit/test_architecture.py): the model's records; the run's records; the
# report's grouping, baseline and names; the explanation's figures; the tune record.
__all__ = [
    "EXPLAINED_ENOUGH",
    "SCHEMA_VERSION",
    "Answer",
    "AnswerItem",
    "Decided",
    "DiskmarkCell",
    "DiskmarkGrid",
    "Environment",
    "EnvironmentView",
    "Explanation",
    "Group",
    "IntegrityRow",
    "IntegrityView",
    "Matrix",
    "MatrixTable",
    "OpFigures",
    "PageOnly",
    "Profile",
    "Report",
    "Result",
    "ResultFacts",
    "Row",
    "Run",
    "RunDiff",
    "SemanticsCell",
    "SemanticsView",
    "Shown",
    "SummaryGrid",
    "Table",
    "TuneChange",
    "TuneRecord",
    "Why",
    "baseline_result",
    "baselines",
    "best_change",
    "build",
    "confidence_text",
    "diff_runs",
    "groups",
    "is_matrix",
    "latency",
    "measured_subjects",
    "placement_of",
    "profile",
    "ranked",
    "recommended",
    "result_facts",
    "result_title",
    "shown",
    "tune_of",
    "usable",
    "verdict_key",
    "verdict_record",
    "verdicts",
    "vs_cell",
    "workload_key",
]


def _row(decided: Decided, res: Result, base: Result | None, lat: bool) -> Row:
    if res.status != "ok" or not res.samples:
        return Row(res.subject, res.status, res.error or "no samples")
    c, said, vs, how = decided(base, res)
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
        ctx=ctx_text(res),
        amp=amp_text(res),
        cache=CACHE_TEXT.get(res.cache, res.cache),
        n=len(res.samples),
        stop_mark=STOP_MARKS.get(res.stopped or "", ""),
        stop_words=STOP_WORDS.get(res.stopped or "", ""),
    )
    if lat:
        figs = latency.printed(res)  # the p99 at the centre its ratio divides
        row.iops = fmt_value(figs["iops"], 0) if figs.get("iops") else "–"
        row.p99 = fmt_value(figs["p99_us"]) if figs.get("p99_us") is not None else "–"
        row.p99_comparison = decided.p99(base, res)
    return row


# -- rows ----------------------------------------------------------------------------------------
# -- reasons: only what was decided ----------------------------------------------------------------
# -- tables ----------------------------------------------------------------------------------------
def tables(run: Run, explained: dict[int, Explanation], decided: Decided) -> list[Table]:
    """One table per workload (the matrix has its own), subjects in run order; each cell as
    the run decided it (Run.verdicts), else decided now."""
    subjects = measured_subjects(run)
    out = []
    for title, results in by_title(run).items():
        results.sort(key=lambda r: subjects.index(r.subject) if r.subject in subjects else 99)
        base = baseline_result(results, subjects)
        lat = any(latency.latency_bound(r) for r in results)
        rows = [_row(decided, r, base, lat) for r in results]
        per_kop = not any(r.cpu.per_gib for r in results) and any(r.cpu.per_kop_ms for r in results)
        cpu_unit = (
            ("s/run" if all(per_run(r) for r in results) else "ms/kop") if per_kop else "s/GiB"
        )
        whys = []
        for r, row in zip(results, rows, strict=True):
            w = why(explained.get(id(r)), row.comparison, base.subject if base else None)
            if w is not None:
                whys.append(w)
        by_subject = {w.subject: w for w in whys}
        exps = [
            (explained[id(r)], by_subject.get(r.subject)) for r in results if id(r) in explained
        ]
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
                explained=exps,
                trace_key=workload_key(results[0]),
                family=table_family(results, run),
            )
        )
    return out


def unshown(tables: list[Table], explained: dict[int, Explanation]) -> dict[str, list[Explanation]]:
    """Explanations of results no table shows (two placements under one title), by their
    workload: the page explains them under it."""
    shown = {id(r) for t in tables for r in t.results}
    out: dict[str, list[Explanation]] = {}
    for rid, e in explained.items():
        if rid not in shown:
            out.setdefault(e.title, []).append(e)
    return out


# -- the answer ------------------------------------------------------------------------------------
def answer_list(run: Run, explained: dict[int, Explanation], decided: Decided) -> list[Answer]:
    out = []
    for a in answers(run):
        if a.winner is None:
            continue
        top = a.winner
        items = []
        for r in a.others:
            c = decided.pair(top, r)
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
            c = decided.pair(base, r) if ranked(r) and base.samples and r.samples else None
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


def build(
    run: Run, explained: dict[int, Explanation] | None = None, decided: Decided | None = None
) -> Report:
    """The report of a finished run: every table, the answer, the grids, integrity,
    semantics and the environment, decided once (`decided`: the run's comparisons, shared
    with the explanation when the caller made it)."""
    decided = decided or Decided(run)
    if explained is None:
        explained = {id(run.results[e.index]): e for e in explain_run(run, decided)}
    said = answer_list(run, explained, decided)
    open_titles = {a.title for a in said if not a.separated}
    shown = tables(run, explained, decided)
    return Report(
        run,
        shown,
        said,
        matrix(run, decided),
        diskmark(run, decided),
        integrity(run),
        semantics(run),
        environment(run),
        page_only(run),
        summary(run, decided, open_titles),
        unshown(shown, explained),
        vm_notes(run),
        effect_lines(run, decided),
        aging_lines(run),
        decided,
    )
