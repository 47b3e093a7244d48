"""Which results belong together in an explanation: the same workload (placement left out) and
the same placement."""

from __future__ import annotations

from fsbench.records.schema import Result
from fsbench.report.model.naming import result_title

PLACEMENT_WORDS = {
    "same": "on one CPU",
    "split": "on separate CPUs",
    "free": "unpinned",
}


def placement_of(res: Result) -> str:
    """Where its samples ran: its own placement (--placement), else what its samples recorded
    (a run without --placement pins `same` by default), else free (runs stored before that)."""
    if res.params.get("placement"):
        return str(res.params["placement"])
    for s in res.sample_details:
        pinned = s.extra.get("pinned")
        if isinstance(pinned, dict) and pinned.get("placement"):
            return str(pinned["placement"])
    return "free"


def workload_key(res: Result) -> str:
    """The result's workload title with its placement left out: results that differ only in
    where the processes ran belong together."""
    params = {k: v for k, v in res.params.items() if k != "placement"}
    return result_title(res.model_copy(update={"params": params}))
