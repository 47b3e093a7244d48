"""Two runs side by side: per matching result both centres (the geometric means the ratio
divides), the ratio B / A with its interval,
whether the difference is significant, and which kernel-probe figures changed with it; and what
differs between the two environments.

A result matches another when subject, workload, metric and parameters are equal (parameters
that only describe how much work a sample was are ignored). Environment differences that change
what a result means (kernel, driver version, mount and mkfs options, fio, backing) "matter";
the others (host, CPU, memory, sysctl, tools) are shown for information.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from fsbench.errors import UsageError
from fsbench.records.schema import Environment, Result, Run, Subject, WakeupCost
from fsbench.report.model.comparison import Comparison, samples_verdict
from fsbench.report.model.explain import changed_figures
from fsbench.report.model.facts import changes as integrity_changes
from fsbench.report.model.grouping import report_order, usable
from fsbench.report.model.naming import centre_of, confidence_text, result_title
from fsbench.report.style import css, glyph
from fsbench.stats.verdict import Family

# Parameters older runs stored that say how much work a sample was, not what was measured.
_VOLATILE_PARAMS = frozenset({"bytes_per_sample", "seconds_per_sample"})


@dataclass
class ResultDiff:
    subject: str
    workload: str
    title: str
    params: dict[str, Any]
    metric: str
    unit: str
    higher_is_better: bool
    status_a: str
    status_b: str
    median_a: float | None
    median_b: float | None
    ci_a: tuple[float, float] | None
    ci_b: tuple[float, float] | None
    n_a: int
    n_b: int
    # The centres every view prints: each side's geometric mean, which the ratio B / A divides
    # (naming.centre_of); the medians above are kept for readers of the JSON.
    centre_a: float | None = None
    centre_b: float | None = None
    ratio: float | None = None  # B / A, ratio of geometric means (fsbench.verdict)
    ratio_ci95: tuple[float, float] | None = None  # its interval, at `confidence`
    confidence: float | None = None
    band: float = 0.02  # the ≈ band it was judged at (the runs' --equivalence)
    # fsbench.verdict's mark: above | below (the interval excludes 1), same (within ±band),
    # open, none (fewer than 2 samples a side)
    mark: str = "none"
    # Kernel-probe figures that changed along with the rate (explain.changed_figures).
    probe_changes: list[str] = field(default_factory=list)
    # Environment differences that change what this result means (kernel, its driver's
    # version, mkfs, ...): with any, B and A measured different things and get no verdict.
    not_comparable: list[str] = field(default_factory=list)
    # The verdict as every table shows one (its cell, mark and class): comparison.py's.
    comparison: Comparison | None = field(default=None, repr=False)

    @property
    def cell(self) -> str:
        return ratio_text(self)

    @property
    def css(self) -> str:
        return verdict_class(self)

    @property
    def words(self) -> str:
        return test_text(self)

    @property
    def verdict(self) -> str:
        """better | worse | same (within ±2 %) | open | untested | not comparable | n/a."""
        if self.ratio is None:
            return "n/a"
        if self.not_comparable:
            return "not comparable"
        return verdict_word(self.mark, self.higher_is_better)


def verdict_word(mark: str, higher_is_better: bool) -> str:
    """fsbench.verdict's mark of B against A (above | below | same | open | none) as the
    reader's word for B: better | worse | same | open | untested."""
    if mark in ("above", "below"):
        return "better" if (mark == "above") == higher_is_better else "worse"
    return {"same": "same", "open": "open"}.get(mark, "untested")


# --fail-on: the verdicts that fail a regression gate (`diff`, `judge`), each a word of
# verdict_word. One entry today; a gate on "open" too would be one more.
FAIL_ON: dict[str, frozenset[str]] = {"worse": frozenset({"worse"})}


def check_fail_on(text: str | None) -> str | None:
    """`--fail-on TEXT` checked: a key of FAIL_ON, or one line and exit 2."""
    if text is None:
        return None
    key = text.strip().lower()
    if key not in FAIL_ON:
        raise UsageError(f"--fail-on {text!r}: give {' or '.join(FAIL_ON)}")
    return key


def gate_failures(verdicts: Iterable[str], fail_on: str | None) -> int:
    """How many of the verdicts (verdict_word's words) fail the gate `--fail-on FAIL_ON`
    names: a CI step exits 1 (errors.EXIT_FAILED) when this is above 0. No gate: 0."""
    if fail_on is None:
        return 0
    failing = FAIL_ON[fail_on]
    return sum(1 for v in verdicts if v in failing)


@dataclass
class EnvDifference:
    what: str  # "kernel", "ntfs-3g: driver version", ...
    a: str
    b: str
    matters: bool


@dataclass
class RunDiff:
    run_a: str
    run_b: str
    results: list[ResultDiff]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    environment: list[EnvDifference] = field(default_factory=list)
    # Integrity or probed semantics that changed for a subject in both runs (report/integrity).
    subject_changes: list[str] = field(default_factory=list)
    # The comparisons' family: one look, the error rate spread over every pair compared.
    family: Family = field(default_factory=Family)

    @property
    def legend(self) -> str:
        """What the B / A column is and what its marks promise, at this diff's own family."""
        return (
            "B / A: ratio of the geometric means printed as A and B, with its interval "
            f"(Welch on logs); {self.family.legend()} (green/red: better/worse for B)"
        )

    @property
    def mattering(self) -> list[EnvDifference]:
        return [e for e in self.environment if e.matters]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "environment_differences": [asdict(e) for e in self.environment],
            "results": [
                {**{k: v for k, v in asdict(r).items() if k != "comparison"}, "verdict": r.verdict}
                for r in self.results
            ],
            "only_in_a": self.only_a,
            "only_in_b": self.only_b,
            "subject_changes": self.subject_changes,
            "legend": self.legend,
        }


def match_key(res: Result) -> str:
    params = {k: v for k, v in res.params.items() if k not in _VOLATILE_PARAMS}
    if params.get("placement") == "free":
        del params["placement"]  # unpinned is what a run without --placement measured too
    return json.dumps([res.subject, res.workload, res.metric, params], sort_keys=True)


def _label(res: Result) -> str:
    return f"{res.subject} · {result_title(res)}"


def diff_results(
    a: Result,
    b: Result,
    run_a: Run | None = None,
    run_b: Run | None = None,
    family: Family | None = None,
) -> ResultDiff:
    d = ResultDiff(
        subject=a.subject,
        workload=a.workload,
        title=result_title(a),
        params=dict(a.params),
        metric=a.metric,
        unit=a.unit,
        higher_is_better=a.higher_is_better,
        status_a=a.status,
        status_b=b.status,
        median_a=a.median,
        median_b=b.median,
        ci_a=a.ci95,
        ci_b=b.ci95,
        n_a=len(a.samples),
        n_b=len(b.samples),
        centre_a=centre_of(a),
        centre_b=centre_of(b),
    )
    if usable(a) and usable(b):
        v = samples_verdict(a.samples, b.samples, family or Family())
        d.ratio, d.ratio_ci95, d.confidence, d.mark = v.ratio, v.interval, v.confidence, v.mark
        d.band = v.band
        d.comparison = Comparison.of(v, a.higher_is_better)
    if run_a is not None and run_b is not None and a.status == "ok" and b.status == "ok":
        d.probe_changes = changed_figures(a, run_a, b, run_b)
    return d


def run_band(*runs: Run) -> float:
    """The ≈ band the runs were measured at (the wider when they differ; the default for runs
    stored before results recorded it)."""
    bands = [
        float(r.verdict_family["band"])
        for run in runs
        for r in run.results
        if r.verdict_family and "band" in r.verdict_family
    ]
    return max(bands, default=Family().band)


def diff_runs(a: Run, b: Run) -> RunDiff:
    """B against A: per matching result, in the order A's report shows them."""
    in_b = {match_key(r): r for r in report_order(b)}
    in_a = {match_key(r): r for r in report_order(a)}
    pairs = [(r, in_b[k]) for k, r in in_a.items() if k in in_b]
    # One look, one comparison per matching pair: the error rate spread over all of them; the
    # ≈ band the runs were judged at (--equivalence, recorded in each result's family).
    family = Family(
        comparisons=max(1, sum(1 for x, y in pairs if usable(x) and usable(y))),
        band=run_band(a, b),
    )
    rows = [diff_results(x, y, a, b, family) for x, y in pairs]
    env = environment_differences(a, b)
    for row in rows:
        # "ext4: mkfs" concerns ext4's results only; "kernel" or "tool mkntfs" concerns all.
        row.not_comparable = [
            e.what
            for e in env
            if e.matters and (": " not in e.what or e.what.split(": ", 1)[0] == row.subject)
        ]
    return RunDiff(
        run_a=a.run_id,
        run_b=b.run_id,
        results=rows,
        only_a=[_label(r) for k, r in in_a.items() if k not in in_b],
        only_b=[_label(r) for k, r in in_b.items() if k not in in_a],
        environment=env,
        subject_changes=integrity_changes(a, b),
        family=family,
    )


def _mkfs(s: Subject) -> str:
    # The device argument names whichever loop device was free: not an option.
    if not s.mkfs_command:
        return ""
    return shlex.join(a for a in s.mkfs_command if not a.startswith("/dev/"))


def _text(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, str):
        return v or "–"
    return json.dumps(v, sort_keys=True)


def _clients(env: Environment) -> list[str]:
    return [f"{c.host}:{c.port} {c.fio_version} {c.os}/{c.arch}" for c in env.clients]


def environment_differences(a: Run, b: Run) -> list[EnvDifference]:
    out: list[EnvDifference] = []

    def add(what: str, va: object, vb: object, matters: bool) -> None:
        if _text(va) != _text(vb):
            out.append(EnvDifference(what, _text(va), _text(vb), matters))

    ea, eb = a.environment, b.environment
    add("kernel", ea.kernel, eb.kernel, True)
    add("fio version", ea.fio_version, eb.fio_version, True)
    add("backing", ea.backing, eb.backing, True)
    add("image size", ea.image_size, eb.image_size, False)
    add("CPU", ea.cpu_model, eb.cpu_model, False)
    add("CPUs", ea.cpus, eb.cpus, False)
    add("memory", ea.memory_bytes, eb.memory_bytes, False)
    add("host", ea.hostname, eb.hostname, False)
    add("fsbench version", ea.fsbench_version, eb.fsbench_version, False)
    if ea.clients or eb.clients:
        # fio client/server runs: the hosts that ran the load, and their fio, are the setup.
        add("clients", _clients(ea), _clients(eb), True)
    for k in sorted(set(ea.tools) | set(eb.tools)):
        if k != "fio":
            # Recorded by both runs, a tool's version is part of what was measured (mkfs makes
            # the on-disk layout, nginx serves the files); recorded by one only, it is context.
            both = k in ea.tools and k in eb.tools
            add(f"tool {k}", ea.tools.get(k), eb.tools.get(k), both)
    for k in sorted(set(ea.sysctl) | set(eb.sysctl)):
        add(f"sysctl {k}", ea.sysctl.get(k), eb.sysctl.get(k), False)
    if ea.wakeup_us is not None and eb.wakeup_us is not None:
        # Context for FUSE results: costly or cheap, not the µs (they move every run).
        add("cross-CPU wake-ups", _wakeups(ea.wakeup_us), _wakeups(eb.wakeup_us), False)
    sa = {s.id: s for s in a.subjects}
    sb = {s.id: s for s in b.subjects}
    for sid in [s for s in sa if s in sb]:
        x, y = sa[sid], sb[sid]
        add(f"{sid}: driver version", x.driver_version, y.driver_version, True)
        add(f"{sid}: mount options", x.mount_options, y.mount_options, True)
        add(
            f"{sid}: effective mount options",
            x.effective_mount_options,
            y.effective_mount_options,
            True,
        )
        add(f"{sid}: mkfs", _mkfs(x), _mkfs(y), True)
    return out


def _wakeups(w: WakeupCost) -> str:
    return "costly" if w is not None and w.costly else "cheap"


# -- shared text ---------------------------------------------------------------------------------
def ratio_text(r: ResultDiff) -> str:
    """'1.16× 1.08–1.24 ▲': the cell every table prints (comparison.Comparison.cell); without
    its mark when the runs measured different things."""
    c = r.comparison
    if c is None or c.ratio is None:
        return "–"
    if r.not_comparable:
        return c.cell().removesuffix(f" {glyph(c.outcome)}")
    return c.cell()


def test_text(r: ResultDiff) -> str:
    if r.not_comparable:
        return "not comparable: " + ", ".join(r.not_comparable) + " differ"
    if r.confidence is None or r.ratio_ci95 is None:
        return "no interval (fewer than 2 samples a side)" if r.ratio is not None else ""
    words = {
        "better": "better",
        "worse": "worse",
        "same": f"no difference (within ±{r.band * 100:g} %)",
        "open": "not separated",
    }.get(r.verdict, r.verdict)
    return f"{words} ({confidence_text(r.confidence)} % interval)"


def verdict_class(r: ResultDiff) -> str:
    """The page's class of the verdict (the style table's)."""
    if r.not_comparable or r.comparison is None:
        return "dim"
    return css(r.comparison.outcome)
