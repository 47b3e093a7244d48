"""What `fsbench tune` found, as a record of the run that holds it (results.json's `tune`).

The tune's last run carries it (an extra field of `Run`, so older readers ignore it); the
report, `show`, `export` and `--json` read it with `tune_of`. Every figure in it is one the
run's results measured: a change's gain is the verdict of its result against the untuned
subject's in the same run (fsbench.stats.verdict), at the tune's one family (every candidate ×
workload of the tune), and again on fresh samples (`confirmation`) for the changes that won.
One centre everywhere: the geometric mean the verdicts divide (Result.center).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsbench.records.schema import Run


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


# Below this share of a workload's gap explained, tune tries the remedies for the gap's usual
# causes too (tune/choose.py), and its output says how much is unaccounted for.
EXPLAINED_ENOUGH = 0.5


class TuneGap(_Model):
    """The subject's gap to the reference on one workload, and what the explanation said."""

    workload: str  # workload key (workload and variant)
    reference: str  # the reference subject measured
    subject_median: float | None = None  # stored by older tunes; not read (one centre)
    reference_median: float | None = None
    subject_center: float | None = None  # geometric means (Result.center)
    reference_center: float | None = None
    unit: str = ""
    higher_is_better: bool = True
    cell: str = ""  # the subject against the reference: "0.043× 0.0061–0.31 ▼"
    outcome: str = "none"
    slower: float | None = None  # how many times slower, on the centres (> 1: a gap)
    # name, brief, accounts (share of the gap, may overlap or run against it), text
    factors: list[dict[str, Any]] = Field(default_factory=list)
    explained: float | None = None  # the share of the gap the largest factor accounts for


class TuneConfirmation(_Model):
    """A change measured again on fresh samples (a run of its own, after the selection): the
    gain the tune prints and recommends on."""

    run_id: str = ""
    center: float | None = None
    untuned_center: float | None = None
    ratio: float | None = None
    interval: list[float] | None = None
    outcome: str = "none"
    cell: str = ""
    gain: float | None = None
    gap_closed: float | None = None  # only for a ▲: a change not separated closes no share
    confidence: float | None = None  # each interval's, at the confirmation's family


class TuneChange(_Model):
    """One change (or the combination) measured against the untuned subject on a workload."""

    name: str  # the remedy's name, or "combination"
    remedies: list[str] = Field(default_factory=list)
    subject: str  # the candidate subject as measured ("ntfs-3g:big_writes")
    untuned: str  # the untuned subject it was measured against (same run, same image)
    workload: str
    placement: str = "free"  # where the candidate ran
    # where the untuned subject it is measured against ran: compare's default (`same`, pinned)
    # for every change since the untuned subject is measured as compare measures it; `free`
    # for a placement change (the subject left free), and for tunes stored before
    untuned_placement: str = "free"
    kind: str = ""
    change: str = ""
    safety: str = "safe"
    lab: str = ""  # what the lab changed for it ("image 4.25 GiB: big_writes needs ≥ 4 GiB")
    vm: str = ""  # the VM it was measured in, the untuned subject beside it ("": this host)
    emulated: bool = False  # that VM ran emulated: its ratio is not representative
    run_id: str = ""  # the run it was measured in
    unit: str = ""
    higher_is_better: bool = True
    untuned_median: float | None = None  # stored by older tunes; not read (one centre)
    median: float | None = None
    untuned_center: float | None = None  # geometric means (Result.center)
    center: float | None = None
    confidence: float | None = None  # each interval's, at the tune's family
    ratio: float | None = None  # candidate / untuned, as the verdict states it
    interval: list[float] | None = None
    outcome: str = "none"  # better | worse | same | open | none (fsbench.report.model.naming)
    cell: str = ""  # "10.1× 9.2–11.0 ▲": the verdict as every table prints it
    gain: float | None = None  # speed-up factor (> 1: faster), whatever the metric's direction
    # share of the gap to the reference this change closes: only for a ▲ (a change not
    # separated, or slower, closes no share: its words say so)
    gap_closed: float | None = None
    addresses: list[str] = Field(default_factory=list)  # the factors it was chosen for
    use: list[str] = Field(default_factory=list)  # commands / fstab line to use it
    versus: str = ""  # the combination against the best single change, same run ('' not)
    versus_outcome: str = "none"  # that comparison's outcome (better: the rest adds to it)
    confirmation: TuneConfirmation | None = None  # measured again on fresh samples


class TuneSkip(_Model):
    name: str
    change: str = ""
    reason: str


class TuneRecord(_Model):
    subject: str
    against: str  # as asked: a subject or "fastest"
    workloads: list[str] = Field(default_factory=list)
    allow_unsafe: bool = False
    budget_s: float | None = None
    used_s: float | None = None
    # How the untuned subject was measured ("" for tunes stored before: free, nothing pinned):
    # as compare measures it, and the free placement beside it when placement is a candidate.
    untuned_placement: str = ""
    measured_as: str = ""  # the same in words, printed under the title
    gaps: list[TuneGap] = Field(default_factory=list)
    changes: list[TuneChange] = Field(default_factory=list)  # each candidate alone
    combination: list[TuneChange] = Field(default_factory=list)  # the winners together
    skipped: list[TuneSkip] = Field(default_factory=list)
    runs: dict[str, str] = Field(default_factory=dict)  # phase -> run id
    # The families the verdicts were decided under, each a line of the legend: the selection
    # (every candidate × workload of the tune: one question), the confirmation's.
    families: list[str] = Field(default_factory=list)
    confidence: float | None = None  # each selection interval's confidence (the chart's axis)
    notes: list[str] = Field(default_factory=list)


def tune_of(run: Run) -> TuneRecord | None:
    raw = (run.model_extra or {}).get("tune")
    if raw is None:
        return None
    return raw if isinstance(raw, TuneRecord) else TuneRecord.model_validate(raw)


def attach(run: Run, record: TuneRecord) -> None:
    """The record onto the run, as plain data (so results.json and the store keep it)."""
    setattr(run, "tune", record.model_dump(mode="json"))  # noqa: B010 (an extra field)
