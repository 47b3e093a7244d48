"""A VM run's labels tell the truth: the header's measuring time counts the guests' (the host's
runner measured none of their subjects), and the free-page-reporting note does not claim a hold
that no lab on this machine made when only VMs measured."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fsbench import pipeline
from fsbench.environment import memory_notes
from fsbench.probes.procfs import PAGE_REPORTING, ProcFS
from fsbench.records.schema import VM, Result, Run, Schedule, Subject
from fsbench.report.model.facts import schedule_line
from fsbench.vm.guest import GuestGroup, GuestOutcome, merge
from fsbench.vm.kernels import Kernel


def _guest(kernel: str, spent: float, run_s: float) -> Run:
    g = Run(run_id=f"guest-{kernel}", started="now")
    g.subjects = [Subject(id="ntfs-3g", driver="ntfs-3g", fs="ntfs", kind="fuse")]
    g.results = [Result(subject="ntfs-3g", workload="seq-write", metric="throughput", unit="x")]
    g.schedule = Schedule(
        repeat=2, spent_s=spent, phases={"run": run_s, "cache": 10.0, "other": spent - run_s - 10}
    )
    return g


def test_the_header_counts_the_guests_measuring_time() -> None:
    host = Run(run_id="host", started="now")
    # What the host's runner records with no subject of its own.
    host.schedule = Schedule(repeat=2, spent_s=0.0, phases={"other": 0.0})
    assert "0 s measuring" in schedule_line(host)
    for kernel, spent, run_s in (("debian-sid", 92.4, 40.0), ("debian-6.12", 81.0, 35.5)):
        k = Kernel(kernel, "img", None, "rel", "pkg")
        vm = VM(kernel=kernel, virtualization="emulated")
        merge(host, GuestOutcome(vm=vm, run=_guest(kernel, spent, run_s)), GuestGroup(k, [], True))
    assert host.schedule.spent_s == pytest.approx(173.4)
    assert host.schedule.phases["run"] == pytest.approx(75.5)
    assert host.schedule.phases["cache"] == pytest.approx(20.0)
    assert "173 s measuring" in schedule_line(host)


def test_a_guest_without_a_schedule_changes_nothing() -> None:
    host = Run(run_id="host", started="now")
    k = Kernel("debian-sid", "img", None, "rel", "pkg")
    g = _guest("debian-sid", 50.0, 20.0)
    g.schedule = None
    merge(host, GuestOutcome(vm=VM(kernel="debian-sid"), run=g), GuestGroup(k, [], True))
    assert host.schedule is None


def _reporting_on(tmp_path: Path) -> ProcFS:
    f = tmp_path / PAGE_REPORTING.lstrip("/")
    f.parent.mkdir(parents=True)
    f.write_text("9\n")
    return ProcFS(str(tmp_path))


def test_the_note_of_a_run_measured_only_in_vms_claims_no_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = _reporting_on(tmp_path)
    (ordinary,) = memory_notes(fs)
    assert "holds it off during its runs" in ordinary
    (vms,) = memory_notes(fs, vms_only=True)
    assert "held nothing off here" in vms and "holds it off" not in vms
    # The pipeline swaps the one for the other when no lab runs here but VMs measure.
    monkeypatch.setattr(pipeline, "memory_notes", lambda vms_only=False: memory_notes(fs, vms_only))
    monkeypatch.delenv("FSBENCH_IN_VM", raising=False)
    run = Run(run_id="r", started="now")
    run.environment.notes = [ordinary, "another note"]
    plan = SimpleNamespace(vm_stage=lambda *_a: None, target_dir=None)
    pipeline._environment_in_lab(plan, None, run, {ordinary})  # type: ignore[arg-type]
    assert run.environment.notes == [vms, "another note"]
    # Measured here (a lab exists, or no VM): the note is left as it is.
    run.environment.notes = [ordinary]
    plan.vm_stage = None
    pipeline._environment_in_lab(plan, None, run, {ordinary})  # type: ignore[arg-type]
    assert run.environment.notes == [ordinary]
