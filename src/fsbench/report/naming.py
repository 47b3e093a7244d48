"""How a result is named in every renderer: workload/variant[-jN]."""

from __future__ import annotations

from fsbench.schema import Result


def result_title(res: Result) -> str:
    variant = res.params.get("variant")
    jobs = res.params.get("numjobs", 1)
    title = f"{res.workload}/{variant}" if variant else res.workload
    return title if jobs in (1, None) else f"{title}-j{jobs}"
