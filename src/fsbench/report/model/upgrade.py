"""A run stored by an older fsbench, brought to this one's schema once, when a command reads it.

The store reads a run as it was written (records/store.py); what an older run lacks and only
the statistics and the report can give is filled in here: a result stored before
`Result.center` gets its centre and log-scale interval from its samples (fsbench.stats.describe,
at the priors it recorded), a run stored before schema 5 gets its comparisons decided
(`Run.verdicts`, report/model/decided.py) as the end of a run decides them. A run so upgraded is at
the current schema and says what it was (`migrated_from`), which every export names. A run
that has its centres and verdicts keeps what it recorded.
"""

from __future__ import annotations

from typing import Any

from fsbench.records.schema import SCHEMA_VERSION, Run
from fsbench.report.model.decided import verdicts
from fsbench.stats.describe import summarize
from fsbench.stats.verdict import Prior


def upgrade(run: Run) -> Run:
    """The run at the current schema: centres, then verdicts, then its version (in place)."""
    with_centres(run)
    if not run.verdicts and run.results:
        run.verdicts = verdicts(run)
    if run.schema_version < SCHEMA_VERSION:
        run.migrated_from = run.schema_version  # an extra field, kept in JSON
        run.schema_version = SCHEMA_VERSION
    return run


def with_centres(run: Run) -> Run:
    """Each result stored before Result.center with its centre and log-scale interval from its
    samples (its old linear interval around the median could go below 0)."""
    for r in run.results:
        if r.center is None and r.samples:
            r.center, r.ci95 = _centre_of(r.samples, r.verdict_family) or (r.median, r.ci95)
    return run


def _centre_of(
    samples: list[float], fam: dict[str, Any] | None
) -> tuple[float | None, tuple[float, float] | None] | None:
    try:
        f = fam or {}
        s = summarize(samples, prior=Prior(float(f.get("d0", 0.0)), float(f.get("s0sq", 0.0))))
    except (TypeError, ValueError):
        return None
    return s.center, s.ci95
