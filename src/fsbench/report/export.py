"""A stored run as JSON (the results.json document) or CSV (one row per result)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from fsbench.errors import UsageError
from fsbench.schema import Result, Run

FORMATS = ("json", "csv")

# The CSV's columns, in order: identity, the number and its interval, what it cost, its state.
CSV_COLUMNS: tuple[str, ...] = (
    "run_id",
    "subject",
    "workload",
    "variant",
    "op",
    "file_size",
    "record_size",
    "block_size",
    "numjobs",
    "clients",
    "params",
    "metric",
    "unit",
    "higher_is_better",
    "median",
    "ci_low",
    "ci_high",
    "n",
    "cv",
    "cpu_per_gib_s",
    "cpu_app_per_gib_s",
    "cpu_driver_per_gib_s",
    "cpu_kernel_threads_per_gib_s",
    "subject_ctx_switches_per_gib",
    "machine_ctx_switches_per_gib",
    "device_read_bytes",
    "device_write_bytes",
    "read_amplification",
    "write_amplification",
    "cache",
    "status",
    "error",
    "flags",
)


def _cell(v: Any) -> Any:
    # Empty for missing values (not "None"), so spreadsheets see an empty cell.
    return "" if v is None else v


def csv_row(run_id: str, res: Result) -> dict[str, Any]:
    p = res.params
    per = res.cpu.per_gib or {}
    row = {
        "run_id": run_id,
        "subject": res.subject,
        "workload": res.workload,
        "variant": p.get("variant"),
        "op": p.get("op"),
        "file_size": p.get("file_size"),
        "record_size": p.get("record_size"),
        "block_size": p.get("block_size"),
        "numjobs": p.get("numjobs"),
        "clients": p.get("clients"),
        "params": json.dumps(p, sort_keys=True, separators=(",", ":")),
        "metric": res.metric,
        "unit": res.unit,
        "higher_is_better": res.higher_is_better,
        "median": res.median,
        "ci_low": res.ci95[0] if res.ci95 else None,
        "ci_high": res.ci95[1] if res.ci95 else None,
        "n": len(res.samples),
        "cv": res.cv,
        "cpu_per_gib_s": res.cpu.per_gib_s,
        "cpu_app_per_gib_s": per.get("app"),
        "cpu_driver_per_gib_s": per.get("driver"),
        "cpu_kernel_threads_per_gib_s": per.get("kernel_threads"),
        "subject_ctx_switches_per_gib": res.subject_ctx_switches_per_gib,
        "machine_ctx_switches_per_gib": res.ctx_switches_per_gib,
        "device_read_bytes": res.device.read_bytes,
        "device_write_bytes": res.device.write_bytes,
        "read_amplification": res.read_amplification,
        "write_amplification": res.write_amplification,
        "cache": res.cache,
        "status": res.status,
        "error": res.error,
        "flags": "; ".join([*res.flags, *res.warnings]),
    }
    return {k: _cell(row[k]) for k in CSV_COLUMNS}


def to_csv(run: Run) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    for res in run.results:
        w.writerow(csv_row(run.run_id, res))
    return buf.getvalue()


def to_json(run: Run) -> str:
    """The run exactly as results.json holds it."""
    return run.to_json() + "\n"


def export(run: Run, fmt: str) -> str:
    f = fmt.strip().lower()
    if f == "csv":
        return to_csv(run)
    if f == "json":
        return to_json(run)
    raise UsageError(f"--format {fmt!r}: give json or csv")
