"""The terminal table's CPU column says the unit its cells are in: s/GiB for workloads that
move bytes, ms per 1000 operations for those that do not (metadata, compile)."""

from __future__ import annotations

from rich.console import Console

from fsbench.records.schema import CPU, Result, Run, Subject
from fsbench.report.model import build
from fsbench.report.views.table import workload_tables


def _render(results: list[Result]) -> str:
    run = Run(
        run_id="r",
        started="t",
        subjects=[Subject(id=s, driver=s, fs="ext4", kind="kernel") for s in ("a", "b")],
        results=results,
    )
    con = Console(width=100, record=True)
    for t in workload_tables(build(run)):
        con.print(t)
    return con.export_text()


def _res(subject: str, workload: str, cpu: CPU) -> Result:
    return Result(subject=subject, workload=workload, metric="m", unit="MiB/s",
                  samples=[1.0, 1.1, 0.9], median=1.0, cpu=cpu)  # fmt: skip


def test_cpu_header_is_per_gib_for_byte_workloads() -> None:
    cpu = CPU(per_gib_s=3.0, per_gib={"app": 1.0, "driver": 1.5, "kernel_threads": 0.5})
    text = _render([_res("a", "seq-write", cpu), _res("b", "seq-write", cpu)])
    assert "CPU s/GiB" in text and "ms/kop" not in text
    assert "1.0+1.5+0.5" in text


def test_cpu_header_is_per_kop_for_ops_workloads() -> None:
    cpu = CPU(per_kop_ms={"app": 12.0, "driver": 30.0, "kernel_threads": 1.0})
    text = _render([_res("a", "metadata", cpu), _res("b", "metadata", cpu)])
    assert "CPU ms/kop" in text and "s/GiB" not in text
    assert "12.0+30.0+1.0" in text
