"""What a report says besides its rates, as records decided once (report/model/ puts them in
the `Report`): integrity (the damaged volumes that lead every output, the one line when all is
well, what was checked per subject), the semantics each mount probed (the features the subjects
differ in and those they share), and the environment (the machine, the subjects, how the run
sampled). Renderers format these records; none reads a status back from rendered text.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from fsbench.records.schema import FEATURES, Environment, Feature, Integrity, Run, Subject
from fsbench.report.model.comparison import Comparison, confidence_text, rates_verdict
from fsbench.report.model.explain import fmt_us, wakeup_costs
from fsbench.report.model.grouping import is_matrix, usable
from fsbench.schedule.phases import anatomy_line, phases_line
from fsbench.stats import latency
from fsbench.stats.decide import gmean
from fsbench.units import fmt_ratio, fmt_value, size_text


# -- integrity -----------------------------------------------------------------------------------
def failed_subjects(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.integrity is not None and s.integrity.status == "failed"]


def checked_subjects(run: Run) -> list[Subject]:
    """Subjects whose volume was mounted and then checked: a subject that never mounted still
    gets its image checked (the checker finds the fresh image clean), but nothing of it was
    used, so no summary may vouch for it."""
    measured = {r.subject for r in run.results if r.samples}
    return [
        s
        for s in run.subjects
        if s.integrity is not None
        and s.integrity.status != "not-checked"
        and (s.id in measured or s.integrity.digest_files > 0 or s.integrity.status == "failed")
    ]


def failure_lines(run: Run) -> list[str]:
    """One line per damaged subject, for the very top of every report."""
    out = []
    measured = {r.subject for r in run.results if r.samples}
    for s in failed_subjects(run):
        assert s.integrity is not None
        # A volume that never mounted was damaged before any workload: none of its own.
        why = (
            "its speed figures are shown but not ranked"
            if s.id in measured or s.integrity.digest_files
            else "it never mounted: no workload wrote to it"
        )
        out.append(f"{s.id}: integrity: failed — {'; '.join(s.integrity.problems[:3])} ({why})")
    return out


def checked_text(i: Integrity) -> str:
    """'e2fsck -fn (e2fsck 1.47.0 (5-Feb-2023)) clean; 8 files re-read, digests match; 1.2 s'."""
    if i.status == "not-checked" and i.checker is None and not i.digest_files:
        return "; ".join(i.not_checked) or "nothing checked"
    bits = []
    c = i.checker
    if c is not None:
        verdict = "clean" if c.exit_code == 0 else (c.says or f"exit {c.exit_code}")
        bits.append(f"{shlex.join(c.command[:-1])} ({c.version or 'version unknown'}): {verdict}")
    if i.digest_files or i.digest_failures:
        bad = len(i.digest_failures)
        bits.append(
            f"{i.digest_files} files ({i.digest_bytes // 1024} KiB) re-read, "
            + (f"{bad} digest(s) differ" if bad else "digests match")
        )
    bits.append(f"kernel log: {len(i.kernel_log)} line(s)" if i.kernel_log else "kernel log quiet")
    bits += [f"not checked: {n}" for n in i.not_checked]
    bits.append(f"{i.seconds:.1f} s")
    return "; ".join(bits)


@dataclass
class IntegrityRow:
    """One subject whose volume was checked, as every output shows it."""

    subject: str
    status: str  # ok | failed | not-checked | not mounted (its image checked, nothing used)
    outcome: str  # the look (style.OUTCOMES): better ok, unranked failed, open otherwise
    checked: bool  # mounted and then checked (checked_subjects): a line of its own
    problems: list[str]
    command: str
    version: str
    covers: str
    summary: str  # checked_text
    kernel_log: list[str]


@dataclass
class IntegrityView:
    failures: list[str]  # one line per damaged subject: the top of every output
    all_ok: str  # one line when every checked subject is ok ('' otherwise)
    brief: str  # the terminal's one line for the checked subjects when all are ok
    rows: list[IntegrityRow]


_LOOK = {"ok": "better", "failed": "unranked"}


def integrity(run: Run) -> IntegrityView | None:
    """The run's integrity checks (None when no subject was checked at all)."""
    checked = checked_subjects(run)
    ids = {s.id for s in checked}
    rows = []
    for s in run.subjects:
        i = s.integrity
        if i is None:
            continue
        # Its image was checked, but it never mounted: nothing of it was vouched for.
        status = i.status if s.id in ids or i.status != "ok" else "not mounted"
        rows.append(
            IntegrityRow(
                s.id,
                status,
                _LOOK.get(status, "open"),
                s.id in ids,
                i.problems,
                shlex.join(i.checker.command) if i.checker else "",
                (i.checker.version or "") if i.checker else "",
                i.checker.covers if i.checker else "",
                checked_text(i),
                i.kernel_log,
            )
        )
    if not rows:
        return None
    rest = [r for r in rows if r.checked and r.status != "failed"]
    fine = bool(rest) and all(r.status == "ok" for r in rest)
    all_ok = ""
    if checked and fine and not failed_subjects(run):
        all_ok = (
            f"Integrity: ok — {', '.join(s.id for s in checked)} (the format's checker clean, "
            "digests re-read and matching, kernel log quiet)."
        )
    brief = ""
    if fine:
        brief = (
            f"integrity: ok — {', '.join(r.subject for r in rest)} (checker clean, digests "
            "match, kernel log quiet; --verbose for each)"
        )
    return IntegrityView(failure_lines(run), all_ok, brief, rows)


# -- semantics -----------------------------------------------------------------------------------
# Column heads of the compact semantics table (at most 6 characters, so that all 12 features
# fit 80 columns), said in full on the legend line under it.
SHORT: dict[str, str] = {
    "o_direct": "dio",
    "fallocate": "alloc",
    "fiemap": "fiemap",
    "seek_hole": "holes",
    "sparse_files": "sparse",
    "reflink": "clone",
    "copy_file_range": "cfr",
    "xattr_user": "xattr",
    "posix_permissions": "chmod",
    "case_sensitive": "case",
    "name_max": "name",
    "max_file_size": "size",
}
_UNITS = ((2**60, "E"), (2**50, "P"), (2**40, "T"), (2**30, "G"), (2**20, "M"))


def short_mark(f: Feature | None) -> str:
    """mark() in at most 4 characters: a file-size limit as '16T', '8E'."""
    if f is None:
        return ""
    if isinstance(f.value, int) and f.value > 4096:
        for unit, suffix in _UNITS:
            if f.value >= unit:
                return f"{f.value / unit:.2g}{suffix}".replace("e+0", "e")
    return mark(f)


def mark(f: Feature) -> str:
    """✓ yes, ✗ no, ? unknown; limits show their value."""
    if f.value is not None:
        return _size(f.value) if isinstance(f.value, int) and f.value > 4096 else str(f.value)
    return {True: "✓", False: "✗", None: "?"}[f.supported]


def _size(n: int) -> str:
    for unit, suffix in ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB")):
        if n >= unit:
            return f"{n / unit:.4g} {suffix}"
    return f"{n} B"


_MARK_LOOK = {"✓": "better", "✗": "worse", "?": "open"}


@dataclass
class SemanticsCell:
    text: str  # ✓ ✗ ? or a limit ('16T')
    outcome: str  # the look: better ✓, worse ✗, open ?, plain a value
    detail: str  # what the probe saw (the page's hover)


@dataclass
class SemanticsView:
    """Subjects as rows, the features they differ in as columns (every feature with one
    subject); the features all share, with their mark; per subject what it lacks that
    another has."""

    features: list[str]  # keys of FEATURES, the columns
    rows: list[tuple[str, list[SemanticsCell]]]
    same: list[tuple[str, str]]  # (feature's words, the mark every subject has)
    lacks: list[str]  # 'ntfs-3g lacks O_DIRECT honoured, fallocate'
    everything: list[tuple[str, str]]  # every feature with the first subject's mark

    @property
    def heads(self) -> list[str]:
        return [FEATURES[k] for k in self.features]

    @property
    def short_heads(self) -> list[str]:
        return [SHORT[k] for k in self.features]


def semantics(run: Run) -> SemanticsView | None:
    subjects = [s for s in run.subjects if s.semantics]
    if not subjects:
        return None
    marks = {s.id: {k: short_mark((s.semantics or {}).get(k)) for k in FEATURES} for s in subjects}
    differ = [k for k in FEATURES if len({marks[s.id][k] for s in subjects}) > 1]
    if len(subjects) < 2:
        differ = list(FEATURES)
    first = marks[subjects[0].id]
    same = [(FEATURES[k], first[k]) for k in FEATURES if k not in differ and first[k]]
    rows = []
    for s in subjects:
        cells = []
        for k in differ:
            f = (s.semantics or {}).get(k)
            text = marks[s.id][k]
            cells.append(SemanticsCell(text, _MARK_LOOK.get(text, "plain"), f.detail if f else ""))
        rows.append((s.id, cells))
    lacks = []
    for s in subjects:
        gone = [
            FEATURES[k]
            for k in FEATURES
            if marks[s.id][k] == "✗" and any(marks[o.id][k] == "✓" for o in subjects)
        ]
        if gone:
            lacks.append(f"{s.id} lacks {', '.join(gone)}")
    every = [(FEATURES[k], first[k]) for k in FEATURES]
    return SemanticsView(differ, rows, same, lacks, every)


def changes(a: Run, b: Run) -> list[str]:
    """What `diff` says about a subject in both runs whose integrity or semantics changed (a
    driver patch that breaks fallocate): 'ntfs-3g: fallocate ✓ → ✗ (fallocate(1 MiB): ...)'."""
    out = []
    sb = {s.id: s for s in b.subjects}
    for x in a.subjects:
        y = sb.get(x.id)
        if y is None:
            continue
        ia, ib = x.integrity, y.integrity
        if ia is not None and ib is not None and ia.status != ib.status:
            why = f" ({'; '.join(ib.problems[:2])})" if ib.problems else ""
            out.append(f"{x.id}: integrity {ia.status} → {ib.status}{why}")
        if x.semantics and y.semantics:
            for key, label in FEATURES.items():
                fa, fb = x.semantics.get(key), y.semantics.get(key)
                if fa is None or fb is None or mark(fa) == mark(fb):
                    continue
                out.append(f"{x.id}: {label} {mark(fa)} → {mark(fb)} ({fb.detail})")
    return out


# -- the environment ------------------------------------------------------------------------------
def schedule_line(run: Run) -> str:
    """How many samples were taken and why they stopped, in one line."""
    sc = run.schedule
    assert sc is not None
    spent = f", {sc.spent_s:.0f} s measuring" if sc.spent_s is not None else ""
    if not sc.adaptive:
        return f"samples: {sc.repeat} per result (--repeat {sc.repeat}){spent}"
    budget = f", budget {sc.time_budget_s:g} s" if sc.time_budget_s is not None else ""
    why: dict[str, int] = {}
    for r in run.results:
        if r.stopped and not is_matrix(r):
            why[r.stopped] = why.get(r.stopped, 0) + 1
    told = {"settled": "settled ✓", "budget": "open at the budget …"}
    told["max-repeat"] = f"open at --max-repeat {sc.max_repeat} …"
    told["planned"] = "open at their planned precision …"
    counts = " · ".join(f"{n} {told[k]}" for k, n in why.items())
    return f"samples: auto, {sc.repeat}–{sc.max_repeat} per result{budget}{spent}" + (
        f" · {counts}" if counts else ""
    )


def noise_line(floor: dict | None) -> str | None:
    """The machine's noise floor at the start of the run and, re-measured, at its end, each
    the geometric mean of its rates (a decided move is also one of the notes: floor_moved)."""
    if not floor or floor.get("cv") is None or not floor.get("mib_s"):
        return None
    text = (
        f"CV {floor['cv'] * 100:.1f} % over {floor['runs']} identical raw fio runs at the "
        f"start ({gmean(floor['mib_s']) or 0:,.0f} MiB/s)"
    )
    if floor.get("cv_end") is not None and floor.get("mib_s_end"):
        text += (
            f", {floor['cv_end'] * 100:.1f} % at the end "
            f"({gmean(floor['mib_s_end']) or 0:,.0f} MiB/s)"
        )
    elif floor.get("end_not_measured"):
        text += f", not measured again at the end ({floor['end_not_measured']})"
    return text + ": a spread no subject can beat here"


# What fsbench before the model decided the floor's move wrote among the run's notes (a
# median's order-statistic interval): the model decides it again from the stored rates.
_OLD_FLOOR_NOTE = "the machine's noise floor moved"


def floor_moved(floor: dict | None) -> str | None:
    """A sentence when the machine's noise floor moved during the run: its rates at the end
    decidedly (▲/▼) apart from those at the start, by the verdict procedure; the centres
    printed are the geometric means its ratio divides."""
    start, end = (floor or {}).get("mib_s") or [], (floor or {}).get("mib_s_end") or []
    v = rates_verdict(start, end)
    c = Comparison.of(v, True) if v is not None else None
    if c is None or not c.decided:
        return None
    return (
        f"{_OLD_FLOOR_NOTE} during the run: raw fio read {fmt_value(gmean(start))} MiB/s at the "
        f"start, {fmt_value(gmean(end))} MiB/s at the end ({c.cell()}, "
        f"{confidence_text(c.confidence)} % interval): the machine itself changed speed; "
        "results measured early and late may differ by as much, beyond their intervals"
    )


def run_notes(env: Environment) -> list[str]:
    """The run's notes, and the floor's move as the model decides it."""
    kept = [n for n in env.notes if not n.startswith(_OLD_FLOOR_NOTE)]
    moved = floor_moved(env.noise_floor)
    return [*kept, moved] if moved else kept


def env_rows(run: Run) -> list[tuple[str, str]]:
    env = run.environment
    rows = [
        ("kernel", env.kernel),
        ("CPU", f"{env.cpu_model} × {env.cpus}" if env.cpus else env.cpu_model),
        ("memory", size_text(env.memory_bytes) if env.memory_bytes else ""),
        ("backing", env.backing),
        ("image size", size_text(env.image_size) if env.image_size else ""),
        ("fio", env.fio_version or ""),
        ("host", env.hostname),
        ("Python", env.python),
        ("fsbench", env.fsbench_version),
        ("wake-up cost", wakeup_text(env)),
        ("noise floor", noise_line(env.noise_floor) or ""),
    ]
    rows += [(f"tool: {k}", v or "missing") for k, v in sorted(env.tools.items()) if k != "fio"]
    rows += [(f"sysctl {k}", v) for k, v in sorted(env.sysctl.items())]
    rows += [(f"{k} cache", size_text(v)) for k, v in env.cpu_caches.items() if v]
    rows += [("note", n) for n in run_notes(env)]
    if run.schedule is not None:
        rows.append(("samples", schedule_line(run).removeprefix("samples: ")))
        if run.schedule.phases:
            line = phases_line(run.schedule.phases, run.schedule.spent_s, label=False)
            rows.append(("measuring time", line))
            rows.append(("time anatomy", anatomy(run).removeprefix("time anatomy: ")))
    rows += [("interrupted by", env.interrupted_by or ""), ("report", env.report_error or "")]
    for k, v in sorted((env.model_extra or {}).items()):
        rows.append((k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)))
    return [(k, str(v)) for k, v in rows if v not in (None, "")]


def wakeup_text(env: Environment) -> str:
    """'1.3 µs on one CPU, 25 µs across CPUs (19×)': the probe's figures as measured."""
    costs = wakeup_costs(env)
    if costs is None:
        return ""
    w = env.wakeup_us
    if w is None or w.cross_cpu is None or w.cross_cpu_end is None or w.same_cpu_end is None:
        same, cross = costs
        return f"{fmt_us(same)} on one CPU, {fmt_us(cross)} across CPUs ({fmt_ratio(cross / same)})"
    # Measured twice: both, and which one the explanation uses (the calmer).
    used = "the end's" if costs == (w.same_cpu_end, w.cross_cpu_end) else "the start's"
    return (
        f"{fmt_us(w.same_cpu)} on one CPU, {fmt_us(w.cross_cpu)} across CPUs at the start; "
        f"{fmt_us(w.same_cpu_end)} and {fmt_us(w.cross_cpu_end)} after the last sample "
        f"(the explanation uses {used}, the calmer)"
    )


def subject_rows(run: Run) -> list[dict[str, str]]:
    out = []
    for s in run.subjects:
        out.append(
            {
                "id": s.id,
                "driver": s.driver,
                "fs": s.fs,
                "kind": s.kind,
                "version": s.driver_version or "",
                "options": s.mount_options or "(defaults)",
                "effective": s.effective_mount_options or "",
                "mkfs": shlex.join(s.mkfs_command) if s.mkfs_command else "",
                "status": s.status,
                "error": s.error or "",
            }
        )
    return out


def environment_line(run: Run) -> str:
    """The run's environment in one line: kernel, CPU, memory, backing, image, tools."""
    e = run.environment
    bits = [
        f"Linux {e.kernel}" if e.kernel else "",
        f"{e.cpu_model} × {e.cpus}" if e.cpus else e.cpu_model,
        f"{size_text(e.memory_bytes)} RAM" if e.memory_bytes else "",
        f"backing {e.backing}" if e.backing else "",
        f"image {size_text(e.image_size)}" if e.image_size else "",
        e.fio_version or "",
        f"fsbench {e.fsbench_version}" if e.fsbench_version else "",
    ]
    return " · ".join(b for b in bits if b)


def anatomy(run: Run) -> str:
    """The run's time anatomy (phases.anatomy_line), '' for a run that did not record it."""
    sc = run.schedule
    if sc is None or sc.first_sample_s is None:
        return ""
    n = sum(len(r.samples) for r in run.results)
    return anatomy_line(sc.setup, sc.first_sample_s, sc.phases, sc.spent_s, sc.data_s, n)


@dataclass
class EnvironmentView:
    """The machine and the subjects as every output names them, and how the run went."""

    run: Run = field(repr=False)
    line: str  # the machine in one line (environment_line)
    backing_note: str
    noise: str  # the noise floor ('' not measured)
    schedule: str  # how many samples and why they stopped ('' an older run)
    phases: str  # where the measuring time went ('' not recorded)
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> list[tuple[str, str]]:
        """The page's table of the machine (env_rows)."""
        return env_rows(self.run)

    @property
    def subjects(self) -> list[dict[str, str]]:
        """The page's table of the subjects (subject_rows)."""
        return subject_rows(self.run)


def environment(run: Run) -> EnvironmentView:
    env, sc = run.environment, run.schedule
    return EnvironmentView(
        run,
        environment_line(run),
        env.backing_note or "",
        noise_line(env.noise_floor) or "",
        schedule_line(run) if sc is not None else "",
        "\n".join(x for x in (phases_line(sc.phases, sc.spent_s), anatomy(run)) if x)
        if sc is not None and sc.phases
        else "",
        run_notes(env),
    )


# -- what only the page shows --------------------------------------------------------------------
@dataclass(frozen=True)
class PageOnly:
    """Something of the run only the page (report.html) shows: its words, the page's sections
    that show it (report/views/sections.py ids), and whether the terminal shows it with --verbose
    (and says so where it leaves it out)."""

    words: str
    sections: tuple[str, ...]
    verbose: bool = False


def _ok(run: Run) -> bool:
    return any(usable(r) for r in run.results)


# What the page shows that the terminal and the markdown do not, each with when the run has it.
PAGE_ONLY: tuple[tuple[Callable[[Run], bool], PageOnly], ...] = (
    (_ok, PageOnly("rate and CPU plots", ("workloads", "costs"))),
    (lambda run: any(is_matrix(r) for r in run.results),
     PageOnly("the Iozone matrix's plots", ("matrix",))),
    (lambda run: any(latency.latency_bound(r) and usable(r) for r in run.results),
     PageOnly("latency CDF plots", ("latency",))),
    (lambda run: any(r.params.get("placement") for r in run.results),
     PageOnly("placement plots", ("placement",))),
    (lambda run: any(r.params.get("clients") is not None for r in run.results),
     PageOnly("client scaling", ("clients",))),
    (_ok, PageOnly("the summary grid", ("summary",))),
    (_ok, PageOnly("full reasons", ("workloads",))),
    (lambda run: bool(run.definitions), PageOnly("your workloads' definitions", ("definitions",))),
    (lambda run: any(s.integrity is not None for s in run.subjects),
     PageOnly("integrity checks per subject", ("integrity",), verbose=True)),
    (lambda run: any(s.semantics for s in run.subjects),
     PageOnly("the semantics table", ("integrity",), verbose=True)),
    (lambda _run: True, PageOnly("the environment tables", ("environment",))),
)  # fmt: skip


def page_only(run: Run) -> list[PageOnly]:
    """What only the page (report.html) shows of this run: its plots, the summary grid, the
    explanations in full, the integrity and semantics tables, the environment's; every other
    output names them, never drops them."""
    return [p for has, p in PAGE_ONLY if has(run)]
