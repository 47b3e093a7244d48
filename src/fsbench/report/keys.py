"""Which results belong together in an explanation: the same workload (placement left out) and
the same placement; and the one reader of a result's probe data."""

from __future__ import annotations

from typing import Any

from fsbench.report.naming import result_title
from fsbench.schema import Result

PLACEMENT_WORDS = {
    "same": "on one CPU",
    "split": "on separate CPUs",
    "free": "unpinned",
}


def trace_of(obj: Any) -> dict[str, Any] | None:
    """The probe data of a Result or Sample: the schema's `trace` field when it has one, the
    model's extra fields before (one accessor, so both old and new records read the same)."""
    t = getattr(obj, "trace", None)
    if t is None:
        t = (getattr(obj, "model_extra", None) or {}).get("trace")
    if hasattr(t, "model_dump"):
        t = t.model_dump(exclude_none=True)
    return t if isinstance(t, dict) and t else None


def placement_of(res: Result) -> str:
    return str(res.params.get("placement") or "free")


def workload_key(res: Result) -> str:
    """The result's workload title with its placement left out: results that differ only in
    where the processes ran belong together."""
    params = {k: v for k, v in res.params.items() if k != "placement"}
    return result_title(res.model_copy(update={"params": params}))
