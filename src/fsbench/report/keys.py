"""Which results belong together in an explanation: the same workload (placement left out) and
the same placement."""

from __future__ import annotations

from fsbench.report.naming import result_title
from fsbench.schema import Result

PLACEMENT_WORDS = {
    "same": "on one CPU",
    "split": "on separate CPUs",
    "free": "unpinned",
}


def placement_of(res: Result) -> str:
    return str(res.params.get("placement") or "free")


def workload_key(res: Result) -> str:
    """The result's workload title with its placement left out: results that differ only in
    where the processes ran belong together."""
    params = {k: v for k, v in res.params.items() if k != "placement"}
    return result_title(res.model_copy(update={"params": params}))
