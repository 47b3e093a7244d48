"""Environment capture and the doctor's notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsbench import environment as env
from fsbench.probes.procfs import PAGE_REPORTING, ProcFS


@pytest.mark.parametrize(("order", "noted"), [("9\n", True), ("10\n", True), ("11\n", False)])
def test_free_page_reporting_is_noted_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str, noted: bool
) -> None:
    param = tmp_path / PAGE_REPORTING.lstrip("/")
    param.parent.mkdir(parents=True)
    param.write_text(order)
    notes = env.memory_notes(ProcFS(str(tmp_path)))
    assert bool(notes) is noted
    if noted:
        assert f"order {order.strip()}" in notes[0] and f"echo 11 > {PAGE_REPORTING}" in notes[0]


def test_no_page_reporting_module_no_note(tmp_path: Path, monkeypatch) -> None:
    assert env.memory_notes(ProcFS(str(tmp_path))) == []


def test_cpu_caches_are_bytes_by_level() -> None:
    caches = env.cpu_caches()
    if not caches:
        pytest.skip("not applicable here: no cache sizes under /sys/devices/system/cpu")
    assert all(k.startswith("L") and v > 0 for k, v in caches.items())


def test_environment_names_every_tool_that_can_move_a_result() -> None:
    """mkfs of each format in use and each workload's own tools, not only fio and mount."""
    from types import SimpleNamespace

    from fsbench.lab.subject import parse_subject
    from fsbench.pipeline import tools_used
    from fsbench.registry import resolve_workloads

    plan = SimpleNamespace(
        subjects=[parse_subject("ext4"), parse_subject("ntfs-3g")],
        workloads=resolve_workloads("seq-write/fsync,compile,web-serve", None),
    )
    tools = tools_used(plan)  # type: ignore[arg-type]
    for name in ("fio", "losetup", "mount", "mkfs.ext4", "mkntfs", "cc", "make", "nginx", "wrk"):
        assert name in tools, name
    assert len(tools) == len(set(tools))
