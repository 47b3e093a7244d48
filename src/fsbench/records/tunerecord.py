"""What `fsbench tune` found, as a record of the run that holds it (results.json's `tune`).

The tune's last run carries it (an extra field of `Run`, so older readers ignore it); the
report, `show`, `export` and `--json` read it with `tune_of`. Every figure in it is one the
run's results measured: a change's gain is the verdict of its result against the untuned
subject's in the same run (fsbench.stats.verdict, through the report's one `compare`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsbench.records.schema import Run


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class TuneGap(_Model):
    """The subject's gap to the reference on one workload, and what the explanation said."""

    workload: str  # workload key (workload and variant)
    reference: str  # the reference subject measured
    subject_median: float | None = None
    reference_median: float | None = None
    unit: str = ""
    higher_is_better: bool = True
    factors: list[dict[str, Any]] = Field(default_factory=list)  # name, brief, accounts


class TuneChange(_Model):
    """One change (or the combination) measured against the untuned subject on a workload."""

    name: str  # the remedy's name, or "combination"
    remedies: list[str] = Field(default_factory=list)
    subject: str  # the candidate subject as measured ("ntfs-3g:big_writes")
    untuned: str  # the untuned subject it was measured against (same run, same image)
    workload: str
    placement: str = "free"
    kind: str = ""
    change: str = ""
    safety: str = "safe"
    lab: str = ""  # what the lab changed for it ("image 4.25 GiB: big_writes needs ≥ 4 GiB")
    vm: str = ""  # the VM it was measured in, the untuned subject beside it ("": this host)
    emulated: bool = False  # that VM ran emulated: its ratio is not representative
    run_id: str = ""  # the run it was measured in
    unit: str = ""
    higher_is_better: bool = True
    untuned_median: float | None = None
    median: float | None = None
    ratio: float | None = None  # candidate / untuned, as the verdict states it
    interval: list[float] | None = None
    outcome: str = "none"  # better | worse | same | open | none (fsbench.report.naming)
    cell: str = ""  # "10.1× 9.2–11.0 ▲": the verdict as every table prints it
    gain: float | None = None  # speed-up factor (> 1: faster), whatever the metric's direction
    gap_closed: float | None = None  # share of the gap to the reference this change closes
    addresses: list[str] = Field(default_factory=list)  # the factors it was chosen for
    use: list[str] = Field(default_factory=list)  # commands / fstab line to use it
    versus: str = ""  # the combination against the best single change, same run ('' not)


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
    gaps: list[TuneGap] = Field(default_factory=list)
    changes: list[TuneChange] = Field(default_factory=list)  # each candidate alone
    combination: list[TuneChange] = Field(default_factory=list)  # the winners together
    skipped: list[TuneSkip] = Field(default_factory=list)
    runs: dict[str, str] = Field(default_factory=dict)  # phase -> run id
    notes: list[str] = Field(default_factory=list)


def tune_of(run: Run) -> TuneRecord | None:
    raw = (run.model_extra or {}).get("tune")
    if raw is None:
        return None
    return raw if isinstance(raw, TuneRecord) else TuneRecord.model_validate(raw)


def attach(run: Run, record: TuneRecord) -> None:
    """The record onto the run, as plain data (so results.json and the store keep it)."""
    setattr(run, "tune", record.model_dump(mode="json"))  # noqa: B010 (an extra field)
