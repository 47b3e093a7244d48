"""A remedy that is another driver in the kernel (ntfs3 for ntfs-3g, exfat for exfat-fuse): chosen
from the explanation's factors like every remedy; where this host's kernel lacks the driver, the
candidate and the untuned subject planned into one VM run with a kernel that has it, and every
output says so; skipped with its reason where no VM can run or its run does not fit the budget.
The pipeline and the VM are faked (test_tune.py's `tuned`); tests/integration/test_tune_vm_real.py
boots the real one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from test_tune import GiB, factor, fixture_run, never, tuned  # noqa: F401 (tuned: a fixture)

from fsbench.lab.drivers import DRIVERS
from fsbench.records.tunerecord import tune_of
from fsbench.report.exports.export import export
from fsbench.report.model import recommended
from fsbench.report.views.sections import render_html
from fsbench.report.views.tune import terminal
from fsbench.tune import budget, invm, remedies
from fsbench.tune.choose import Gap, choose
from fsbench.tune.outcome import gaps
from fsbench.tune.remedies import REMEDIES, SEMANTICS
from fsbench.vm.kernels import KNOWN

SAID = "measured in a VM (debian-6.12) beside ntfs-3g in the same VM"


@pytest.fixture
def no_ntfs3(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose kernel lacks the kernel drivers (this one: no ntfs3, no exfat)."""
    monkeypatch.setattr(remedies, "host_has", lambda driver: False)
    monkeypatch.setattr(invm, "virtualization", lambda: "emulated")
    monkeypatch.setattr(invm, "cached", lambda kernel: True)


def test_each_kernel_driver_remedy_names_a_kernel_that_has_it() -> None:
    drivers = [r for r in REMEDIES.values() if r.kind == "kernel-driver"]
    assert {r.change for r in drivers} >= {"ntfs3", "exfat"}
    for r in drivers:
        d = DRIVERS[r.change]
        assert d.kind == "kernel" and all(DRIVERS[x].fs == d.fs for x in r.drivers), r
        assert r.change in KNOWN[r.kernel].adds, f"{r.kernel} does not add {r.change}"
        # What programs see differs between two drivers (measured: docs/tune.md).
        assert r.safety == SEMANTICS


def test_a_kernel_driver_is_chosen_from_the_factors_like_the_others(no_ntfs3: None) -> None:
    found = [g for _, g in gaps(fixture_run(), "ntfs-3g", ["ext4"])]
    cands, skipped = choose("ntfs-3g", found, GiB, True, never)
    ntfs3 = next(c for c in cands if c.name == "ntfs3 kernel driver")
    assert ntfs3.kernel == "debian-6.12" and ntfs3.score > 0
    assert any(a.startswith("fuse WRITE") and "% of the gap" in a for a in ntfs3.addresses)
    assert ntfs3.lab.startswith("measured in a VM (debian-6.12) beside ntfs-3g in the same VM")
    # Unsafe without the flag, as every remedy that changes what programs see.
    _, skipped = choose("ntfs-3g", found, GiB, False, never)
    why = {s.remedy.name: s.reason for s in skipped}
    assert "--allow-unsafe" in why["ntfs3 kernel driver"]
    # Any FUSE request is its factor ("fuse *"); readahead windows are not.
    getxattr = [Gap("w", [factor("fuse GETXATTR", 0.4)])]
    cands, _ = choose("exfat-fuse", getxattr, GiB, True, never)
    assert "exfat kernel driver" in {c.name for c in cands}
    cands, skipped = choose("exfat-fuse", [Gap("w", [factor("readahead", 0.4)])], GiB, True, never)
    assert "exfat kernel driver" not in {c.name for c in cands}


def test_the_pair_is_measured_in_one_vm_and_every_output_says_so(
    tuned: Any,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    run, plans, _ = tuned(allow_unsafe=True, budget_s=3000, vm=None)
    (vm,) = [p for p in plans if p.vm_stage is not None]
    kernel, subjects, args = vm.vm_stage.guest
    # The untuned subject beside the candidate in the same VM; nothing of it on the host.
    assert (kernel, subjects, vm.subjects) == ("debian-6.12", ["ntfs-3g", "ntfs3"], [])
    assert args[:2] == ["--workloads", "seq-write/fsync"] and "--placement" not in args
    assert plans.index(vm) > 1  # after the host's candidates
    t = tune_of(run)
    assert t is not None
    (ch,) = [c for c in t.changes if c.name == "ntfs3 kernel driver"]
    step = f"candidates-{plans.index(vm)}"  # plans[0] is the explain run
    assert (ch.subject, ch.untuned, ch.run_id) == ("ntfs3", "ntfs-3g", t.runs[step])
    assert ch.vm.startswith("debian-6.12") and ch.emulated and ch.outcome == "better"
    assert ch.lab.startswith(SAID) and "not representative" in ch.lab
    assert ch.gap_closed is None  # an emulated ratio says nothing of the host's gap
    assert ch.use[0] == "mount -i -t ntfs3 DEVICE MOUNTPOINT"
    assert any(u.startswith("needs a kernel with ntfs3") and "debian-6.12" in u for u in ch.use)
    # Never merged into the FUSE driver's combination, never the change to use when emulated.
    assert all("ntfs3 kernel driver" not in c.remedies for c in t.combination)
    assert recommended(t) is not ch
    con = Console(width=300, record=True)
    for part in terminal(run):
        con.print(part)
    text = con.export_text()
    assert SAID in text and "[VM debian-6.12, emulated]" in text
    assert "in an emulated VM beside ntfs-3g: not representative" in text
    assert "  mount -i -t ntfs3 DEVICE MOUNTPOINT" in text
    assert SAID in json.dumps(t.model_dump(mode="json"))
    assert SAID in render_html(run) and SAID in export(run, "markdown")
    from fsbench.cli.app import cli

    shown = CliRunner().invoke(cli, ["show", run.run_id, "--db", str(tmp_path / "db.sqlite")])
    assert shown.exit_code == 0, shown.output
    assert SAID in " ".join(shown.output.split())


def test_with_the_driver_on_this_host_it_is_measured_here(tuned: Any) -> None:  # noqa: F811
    run, plans, _ = tuned(allow_unsafe=True, host_has=True)
    assert all(p.vm_stage is None for p in plans)
    assert "ntfs3" in {s.id for p in plans for s in p.subjects or []}
    t = tune_of(run)
    assert t is not None
    (ch,) = [c for c in t.changes if c.name == "ntfs3 kernel driver"]
    assert ch.vm == "" and ch.lab == "" and "this kernel" in ch.use[-1]


def test_skipped_with_its_reason_when_no_vm_can_run(
    tuned: Any,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    why = "needs a VM: virtme-ng (vng) is not installed; run scripts/setup.sh"
    run, plans, _ = tuned(allow_unsafe=True, vm=why)
    assert all(p.vm_stage is None for p in plans)
    t = tune_of(run)
    assert t is not None
    assert {s.name: s.reason for s in t.skipped}["ntfs3 kernel driver"] == why
    # A VM is possible but its run does not fit what the budget leaves: said, with both.
    run, plans, _ = tuned(allow_unsafe=True, vm=None, budget_s=200)
    assert all(p.vm_stage is None for p in plans)
    t = tune_of(run)
    assert t is not None
    reason = {s.name: s.reason for s in t.skipped}["ntfs3 kernel driver"]
    assert reason.startswith("needs a VM (debian-6.12): ~") and "budget left" in reason
    assert reason.endswith("raise --time-budget")
    # The kernel cannot be fetched (or cannot mount them): skipped with what went wrong.
    from fsbench.errors import EnvironmentProblem

    def unfetched(*_a: Any) -> Any:
        raise EnvironmentProblem("kernel debian-6.12: apt-get update failed: no network")

    monkeypatch.setattr(invm, "plan_fields", unfetched)
    run, plans, _ = tuned(allow_unsafe=True, vm=None, budget_s=3000)
    assert all(p.vm_stage is None for p in plans)
    t = tune_of(run)
    assert t is not None
    reason = {s.name: s.reason for s in t.skipped}["ntfs3 kernel driver"]
    assert (
        reason == "needs a VM (debian-6.12): kernel debian-6.12: apt-get update failed: no network"
    )


def test_a_vm_that_failed_says_why_its_change_is_missing(
    tuned: Any,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import test_tune

    def failed(plan: Any) -> Any:  # the guest booted no kernel: no subject measured
        plan = in_vm(plan)
        plan.subjects = []
        plan.vm.status, plan.vm.error = "failed", "kernel debian-6.12 did not boot within 240 s"
        return plan

    in_vm = test_tune.in_vm
    monkeypatch.setattr(test_tune, "in_vm", failed)
    run, plans, _ = tuned(allow_unsafe=True, budget_s=3000, vm=None)
    assert any(p.vm_stage is not None for p in plans)
    t = tune_of(run)
    assert t is not None and "ntfs3 kernel driver" not in {c.name for c in t.changes}
    assert {s.name: s.reason for s in t.skipped}["ntfs3 kernel driver"] == (
        "its VM run (debian-6.12) measured nothing to compare: kernel debian-6.12 did not boot "
        "within 240 s"
    )


def test_a_vm_needs_ram_images_and_its_tools() -> None:
    assert "not with --backing device" in str(invm.vm_problem("device"))
    from fsbench.vm import guest

    try:
        guest.vng_path()
    except Exception as e:
        assert str(e) in str(invm.vm_problem("ram"))
    else:
        assert invm.vm_problem("ram") is None


def test_a_vm_is_never_forced_into_the_budget(no_ntfs3: None) -> None:
    found = [g for _, g in gaps(fixture_run(), "ntfs-3g", ["ext4"])]
    cands, _ = choose("ntfs-3g", found, 8 * GiB, True, never)
    groups, _ = budget.plan_groups(cands, 8 * GiB, fits=lambda size, n: True)
    assert groups[-1].kernel == "debian-6.12" and [c.name for c in groups[-1].cands] == [
        "ntfs3 kernel driver"
    ]
    costs = budget.Costs(overhead_s=30, per_cell_s=20)
    vm_s = costs.run([groups[-1]], 1)
    assert vm_s == pytest.approx(30 + 25 + 2 * (30 + 35))  # emulated: boot, guest, 2 subjects
    kept, skipped = budget.fit_budget(groups, 60, costs, 1)
    assert kept and not any(g.kernel for g in kept)  # the best on this host, always
    why = {s.remedy.name: s.reason for s in skipped}
    assert why["ntfs3 kernel driver"].startswith(f"needs a VM (debian-6.12): ~{vm_s:.0f} s")
    kept, _ = budget.fit_budget(groups, 10_000, costs, 1)
    assert kept[-1].kernel == "debian-6.12"  # the host's runs first, the VM's last


def test_the_guests_options_are_ones_its_compare_takes() -> None:
    from fsbench.cli import options
    from fsbench.cli.app import compare

    for how in ("emulated", "kvm"):
        args = invm.guest_args(["seq-write/fsync", "seq-read/cold"], GiB, how, 300)
        ctx = compare.make_context("compare", ["ntfs-3g", "ntfs3", *args])
        o = options.parse("compare", ctx.params, ("ntfs-3g", "ntfs3"))
        assert o["placement"] is None and o["repeat"] == (3, True)  # compare's default
        if how == "emulated":  # the rounds a verdict needs and no more
            assert o["size"] == invm.VM_SMALL_SIZE and o["max_repeat"] == 3
        else:
            assert o["size"] == GiB and o["time_budget"] == 300


def test_a_run_of_vms_alone_with_adaptive_repeats_leaves_measuring_to_the_guests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing on the host (a tune's VM step, `compare ntfs3 --kernel debian-6.12`): the
    host's runner has no subject, so it is not run (it raised KeyError at its interim look
    under --repeat auto); the VM stage's results are the run's."""
    from fsbench import pipeline
    from fsbench.lab.backing import parse_backing
    from fsbench.records.schema import VM, Result
    from fsbench.workloads.fake import FakeWorkload

    monkeypatch.setattr(pipeline, "write_report_safely", lambda run, out: None)

    def stage(run: Any, store: Any, on_step: Any) -> None:
        run.environment.vms.append(VM(kernel="debian-6.12", subjects=["ntfs3"]))
        run.results.append(Result(subject="ntfs3", workload="fake", metric="rate",
                                  unit="MiB/s", samples=[1.0, 1.1, 0.9]))  # fmt: skip

    plan = pipeline.Plan(
        subjects=[], explicit=True, workloads=[FakeWorkload()], repeat=3, adaptive=True,
        backing=parse_backing("ram"), size=64 * 1024 * 1024, out_dir=tmp_path / "out",
        db=tmp_path / "db.sqlite", command=["fsbench", "compare"], vm_stage=stage,
        time_budget_s=60,
    )  # fmt: skip
    run, code = pipeline.execute(plan)
    assert code == 0 and run.status == "complete", run.environment.notes
    assert [r.subject for r in run.results] == ["ntfs3"]
