"""Which result a workload's others are compared with: one rule, used by the runner (to decide
whose answer is settled) and by every renderer and the explanation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fsbench.records.schema import INTEGRITY_FAILED_FLAG, Result


def ranked(res: Result) -> bool:
    """False for a subject whose volume failed its integrity check: its figures are shown but
    it is never the baseline, the fastest or the best."""
    return not any(n.code == INTEGRITY_FAILED_FLAG for n in res.notes)


def baseline_result(results: Iterable[Result], order: Sequence[str]) -> Result | None:
    """The result the others of a workload are compared with: that of the first subject (in
    the run's order) which finished with samples and passed its integrity check."""
    ok = [r for r in results if r.status == "ok" and r.samples and ranked(r)]
    ok.sort(key=lambda r: order.index(r.subject) if r.subject in order else len(order))
    return ok[0] if ok else None
