"""`fsbench tune` without a lab: candidates come from the explanation's factors (a real run's
explanation, tests/unit/fixtures/default_compare.json), unsafe remedies stay out without
--allow-unsafe, and the combination step measures the winners together. The pipeline is
replaced by a fake that answers each planned run with results made from the fixture's (the
untuned subject's samples, scaled by what each change is made to do)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fsbench.cli.commands.tune import _options
from fsbench.lab.subject import parse_subject
from fsbench.records.probes.factor import Factor
from fsbench.records.schema import Run
from fsbench.records.store import Store
from fsbench.records.tunerecord import tune_of
from fsbench.report.exports.export import export
from fsbench.report.views.sections import render_html
from fsbench.report.views.tune import terminal
from fsbench.schedule.plan import Plan
from fsbench.schedule.runner import workload_id
from fsbench.tune import budget, invm, remedies, session
from fsbench.tune.choose import Gap, choose
from fsbench.tune.outcome import gaps
from fsbench.tune.remedies import KINDS, REMEDIES, SAFE, SAFETY_WORDS

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"
GiB = 1024**3


def fixture_run() -> Run:
    """The fixture's real default compare, as compare records it now: every sample pinned at its
    default placement (`same`; the fixture predates that record), as tune's explain run is."""
    run = Run.model_validate_json(FIXTURE.read_text())
    run.results = [placed(r, None) for r in run.results]
    return run


def never(_r: Any) -> None:
    return None


def factor(name: str, accounts: float | None) -> Factor:
    return Factor(name, 1.0, "", name, name, accounts=accounts, weight=10 + (accounts or 0))


def test_the_table_is_well_formed() -> None:
    for r in REMEDIES.values():
        assert r.kind in KINDS and r.safety in SAFETY_WORDS and r.drivers and r.factors, r
        assert r.source, f"{r.name}: say where it is documented"
    # Every durability or semantics trade is labelled as such in the table itself.
    assert {r.name for r in REMEDIES.values() if r.safety != SAFE} >= {
        "data=writeback", "nobarrier", "commit=60", "noatime", "delay_mtime"
    }  # fmt: skip


def test_candidates_follow_the_factors_of_a_real_explanation() -> None:
    found = gaps(fixture_run(), "ntfs-3g", ["ext4"])
    assert [g.workload for g, _ in found] == ["seq-write/fsync", "seq-read/cold"]
    cands, skipped = choose("ntfs-3g", [g for _, g in found], GiB, False, never)
    names = [c.name for c in cands]
    assert names[:2] == ["big_writes", "placement same"] or names[:2] == [
        "placement same", "big_writes"
    ]  # fmt: skip
    big = next(c for c in cands if c.name == "big_writes")
    assert big.size >= 4 * GiB and "4 GiB" in big.lab  # the lab makes the bigger volume
    assert any("fuse WRITE" in a and "% of the gap" in a for a in big.addresses)
    why = {s.remedy.name: s.reason for s in skipped}
    assert "--allow-unsafe" in why["delay_mtime"]
    # A block-device remedy is made for its candidate alone, and the output says so.
    ra = next(c for c in cands if c.name == "read_ahead_kb")
    assert "on its loop device for it only" in ra.lab and ra.size == 0


def test_a_remedy_is_a_candidate_only_when_its_factor_is_there() -> None:
    only_cpu = [Gap("seq-write/fsync", [factor("cpu", 0.6)])]
    cands, skipped = choose("ntfs-3g", only_cpu, 8 * GiB, False, never)
    assert [c.name for c in cands] == ["big_writes"]  # addresses cpu; placement does not
    assert cands[0].size == 0 and cands[0].lab == ""  # the volume is big enough already
    why = {s.remedy.name: s.reason for s in skipped}
    assert "names none of the factors" in why["placement same"]
    # The largest share first.
    reads = [Gap("w", [factor("cpu", 0.2), factor("readahead", 0.7)])]
    cands, _ = choose("fuse2fs", reads, GiB, False, never)
    assert [c.name for c in cands] == [
        "FUSE readahead 1 MiB", "max_readahead", "read_ahead_kb", "splice"
    ]  # fmt: skip


def test_a_gap_the_explanation_leaves_unaccounted_for_tries_its_usual_causes() -> None:
    """ext4 against xfs: no factor the probes measure stands for the time of either gap (the
    explain run of 2026-12-05: CPU named, no share). The remedies for the usual causes of a
    gap of each direction are candidates, scored 0 and saying why; a factor the explanation
    names that accounts for half or more keeps the others out."""
    bare = [Gap("seq-write/fsync", [factor("cpu", None)]), Gap("seq-read/cold", [])]
    cands, skipped = choose("ext4", bare, GiB, False, never)
    by = {c.name: c for c in cands}
    assert set(by) == {"read_ahead_kb", "scheduler mq-deadline", "ext4 journal 256 MiB"}
    assert all(c.score == 0 for c in cands)
    assert set(by["read_ahead_kb"].covers) == {"seq-read/cold"}
    assert set(by["ext4 journal 256 MiB"].covers) == {"seq-write/fsync"}
    assert set(by["scheduler mq-deadline"].covers) == {"seq-write/fsync", "seq-read/cold"}
    assert any("a usual cause of its gap, which the explanation accounts for only 0 %" in a
               for a in by["read_ahead_kb"].addresses)  # fmt: skip
    # xfs and btrfs: at least three safe changes each for a gap so unexplained.
    for fs, least in (("xfs", 3), ("btrfs", 3)):
        assert len(choose(fs, bare, GiB, False, never)[0]) >= least, fs
    # Explained enough (a factor of 60 % of the write gap): only what addresses it.
    said = [Gap("seq-write/fsync", [factor("block write", 0.6)])]
    cands, skipped = choose("ext4", said, GiB, False, never)
    assert "read_ahead_kb" not in {c.name for c in cands}
    assert (
        "names none of the factors" in {s.remedy.name: s.reason for s in skipped}["read_ahead_kb"]
    )


def test_unsafe_only_with_the_flag_and_unavailable_with_its_reason() -> None:
    g = [Gap("w", [factor("block write", 0.8)])]
    safe, skipped = choose("ext4", g, GiB, False, never)
    # The safe ones for it: the loop device's scheduler, a larger journal at mkfs.
    assert [c.name for c in safe] == ["scheduler mq-deadline", "ext4 journal 256 MiB"]
    assert all("--allow-unsafe" in s.reason for s in skipped if s.remedy.safety != SAFE)
    assert {s.remedy.name for s in skipped if s.remedy.safety != SAFE} >= {"nobarrier"}
    every, _ = choose("ext4", g, GiB, True, never)
    assert {c.name for c in every} >= {"data=writeback", "nobarrier", "noatime",
                                       "ext4 journal_async_commit"}  # fmt: skip

    def unbuilt(r: Any) -> str | None:
        return "not built here" if r.kind == "transport" else None

    cands, skipped = choose("fuse2fs", [Gap("w", [factor("fuse WRITE", 0.9)])], GiB, False, unbuilt)
    assert "io_uring transport" not in {c.name for c in cands}
    assert any(s.reason == "not built here" for s in skipped)


def test_the_gap_once_spent_stops_the_list() -> None:
    g = [Gap("w", [factor("fuse WRITE", 1.0), factor("cpu", None)])]
    cands, skipped = choose("ntfs-3g", g, 8 * GiB, True, never)
    assert len(cands) == 1
    assert any("whole gap" in s.reason for s in skipped)


# -- the whole tune, with the pipeline faked ----------------------------------------------------
# What each change does to the fixture's untuned samples (rate: higher is better).
EFFECT = {"big_writes": 8.0, "delay_mtime": 1.0, "max_readahead=1048576": 3.0, "splice_read": 4.0}
SAME = 2.5
TIGHT = (0.95, 1.0, 1.05)  # the fake's samples, as multiples of the fixture's median
# The same for what the lab makes for one subject: its own mkfs options, block-device settings.
LAB_EFFECT: dict[str, float] = {}


# A kernel driver's samples, from the fixture's driver that stands for it (ntfs3: as ext4).
STANDS_FOR = {"ntfs3": "ext4", "exfat": "ext4"}


def fake_run(plan: Plan) -> Run:
    src = fixture_run()
    run = Run(run_id=plan.run_id, started="now", status="complete", command=plan.command)
    run.subjects = [s for s in src.subjects if s.id in ("ntfs-3g", "ext4")]
    placements = list(dict.fromkeys(getattr(w, "placement", "free") for w in plan.workloads))
    wanted = {workload_id(w).split("@")[0] for w in plan.workloads}
    assert plan.subjects is not None
    for spec in plan.subjects:
        opts = [o for o in spec.options.split(",") if o]
        gain = 1.0
        for o in opts:
            gain *= EFFECT.get(o, 1.0)
        for made in [" ".join(spec.mkfs), *(k.text for k in spec.knobs)]:
            gain *= LAB_EFFECT.get(made, 1.0)
        # big_writes does nothing on a small volume (ntfs-3g's rule), as on the real driver.
        if "big_writes" in opts and plan.size < 4 * GiB:
            gain /= EFFECT["big_writes"]
        name = STANDS_FOR.get(spec.driver.name, spec.driver.name)
        bases = [r for r in src.results if r.subject == name
                 and f"{r.workload}/{r.params.get('variant')}" in wanted]  # fmt: skip
        bases += [_as(r, w) for w in sorted(wanted) if w in AS for r in src.results
                  if r.subject == name and f"{r.workload}/{r.params.get('variant')}"
                  == AS[w][0]]  # fmt: skip
        # The fixture's 3 samples, pulled to within ±5 % of their median: the tune decides at
        # its one family (every candidate × workload), and these tests are of its logic.
        bases = [b.model_copy(update={"samples": [(b.median or 1.0) * f for f in TIGHT],
                                      "center": b.median}) for b in bases]  # fmt: skip
        for base, place in ((b, p) for b in bases for p in placements):
            pinned = (place or "same") == "same" and spec.driver.kind == "fuse"
            g = gain * (SAME * PINNED_WITH.get(spec.options, 1.0) if pinned else 1.0)
            run.results.append(placed(base.model_copy(update={
                "subject": spec.id,
                "samples": [x * g for x in base.samples], "median": (base.median or 0) * g,
                "center": base.center * g if base.center else None,
            }), place))  # fmt: skip
        if spec.id not in {s.id for s in run.subjects}:
            run.subjects.append(run.subjects[0].model_copy(update={"id": spec.id}))
    return run


# What pinning does beside a change, over SAME (1.0: pinning gains SAME with it too).
PINNED_WITH: dict[str, float] = {}


def placed(r: Any, place: str | None) -> Any:
    """A result as a run records where it ran: a placement asked for (`--placement`) in its
    params; compare's default (None: not asked) in what each sample recorded it pinned."""
    if place is not None:
        return r.model_copy(update={"params": {**r.params, "placement": place}})
    details = [d.model_copy(update={"extra": {**d.extra, "pinned": {"placement": "same"}}})
               for d in r.sample_details]  # fmt: skip
    return r.model_copy(update={"sample_details": details})


# Workloads the fixture lacks, made from one it has (name, speed-up over it).
AS = {"rand-write/4k-buffered": ("seq-write/fsync", 1.0),
      "rand-write/8k-buffered": ("seq-write/fsync", 6.0)}  # fmt: skip


def _as(r: Any, wl: str) -> Any:
    name, variant = wl.split("/")
    g = AS[wl][1]
    return r.model_copy(update={
        "workload": name, "workload_id": wl, "variant": variant,
        "params": {**r.params, "variant": variant},
        "samples": [x * g for x in r.samples], "median": (r.median or 0) * g,
        "center": r.center * g if r.center else None,
    })  # fmt: skip


def fake_vm(monkeypatch: pytest.MonkeyPatch, here: dict[str, Any]) -> None:
    """VMs faked: their plan fields carry the subjects the guest would measure (fake_run
    measures them), and whether a VM can run (`here["vm"]`) is the test's to say."""

    def plan_fields(kernel: str, subjects: list[str], workloads: list[str], size: int,
                    budget_s: float) -> dict[str, Any]:  # fmt: skip
        def stage(run: Run, store: Any, on_step: Any) -> None:
            raise AssertionError("the fake pipeline measures a VM's subjects itself")

        stage.guest = (kernel, subjects, invm.guest_args(workloads, size, "emulated", budget_s))  # type: ignore[attr-defined]
        return {"subjects": [], "explicit": True, "unavailable": [], "vm_stage": stage}

    monkeypatch.setattr(invm, "plan_fields", plan_fields)
    monkeypatch.setattr(invm, "virtualization", lambda: "emulated")
    monkeypatch.setattr(invm, "cached", lambda kernel: True)
    monkeypatch.setattr(invm, "vm_problem", lambda backing: here.get("vm"))
    monkeypatch.setattr(remedies, "host_has", lambda driver: here.get("host_has", False))


def in_vm(plan: Plan) -> Plan:
    """A VM run's plan as the fake pipeline measures it: the guest's subjects as the run's."""
    from dataclasses import replace

    from fsbench.records.schema import VM

    kernel, subjects, _args = plan.vm_stage.guest  # type: ignore[union-attr]
    specs = [parse_subject(s) for s in subjects]
    plan = replace(plan, subjects=specs)
    plan.vm = VM(kernel=kernel, release="6.12.95+deb12-amd64", virtualization="emulated",  # type: ignore[attr-defined]
                 why_emulated="no vmx/svm", subjects=subjects)  # fmt: skip
    return plan


@pytest.fixture
def tuned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    return tuner(tmp_path, monkeypatch)


def tuner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The whole tune with the pipeline faked (fake_run answers every planned run): `go(...)`
    runs one and returns its last run, the plans and the steps said (also for
    test_report_parity.py, which renders a tune run in every output)."""
    plans: list[Plan] = []
    here: dict[str, Any] = {"vm": "no VM in this test"}
    fake_vm(monkeypatch, here)

    def execute(plan: Plan, on_step: Any = None, **_kw: Any) -> tuple[Run, int]:
        plans.append(plan)
        vm = plan.vm_stage is not None
        if vm:
            plan = in_vm(plan)
        run = fake_run(plan)
        if vm:
            run.environment.vms.append(plan.vm)  # type: ignore[attr-defined]
        on_step(f"{plan.subjects[0].id if plan.subjects else 'nothing'} · sample 1")
        with Store(plan.db) as store:
            store.begin_run(run, plan.out_dir)
            store.finish_run(run)
        return run, 0

    monkeypatch.setattr(session.pipeline, "execute", execute)
    monkeypatch.setattr(budget, "_fits", lambda size, n: True)
    # The page is drawn once, in the test that reads it (matplotlib takes seconds).
    monkeypatch.setattr(session, "write_report_safely", lambda run, out: None)
    unbuilt = session.problem

    def problem(spec: Any, backing: str = "ram") -> Any:
        here = unbuilt(spec, backing)
        return lambda r: "not built here" if r.kind == "transport" else here(r)

    monkeypatch.setattr(session, "problem", problem)

    def go(
        allow_unsafe: bool = False,
        subject: str = "ntfs-3g",
        workloads: str = "seq-write/fsync",
        budget_s: float = 600,
        **vm: Any,  # vm: why no VM can run (None: one can); host_has: the host has the driver
    ) -> tuple[Run, list[Plan], list[str]]:
        here.update(vm)
        o = _options(workloads, tmp_path / "db.sqlite", None)
        out = tmp_path / f"out-{subject}-{allow_unsafe}-{len(plans)}"
        req = session.Request(subject, "ext4", o, ["fsbench", "tune"], budget_s, allow_unsafe,
                              out)  # fmt: skip
        steps: list[str] = []
        run, _record, code = session.Tuner(req, steps.append).run()
        assert code == 0
        return run, plans, steps

    return go


def test_the_tune_measures_each_change_then_confirms_the_winners_on_fresh_samples(
    tuned: Any,
) -> None:
    run, plans, steps = tuned()
    explain, cands, pinned, confirm, confirm_pinned = plans
    assert [s.id for s in explain.subjects] == ["ntfs-3g", "ext4"]
    # big_writes on the bigger image it needs, beside the untuned subject on the same size,
    # as compare measures it (pinned: `same`).
    assert [s.id for s in cands.subjects] == ["ntfs-3g", "ntfs-3g:big_writes"]
    assert cands.size >= 4 * GiB
    # At compare's default placement (no --placement: pinned `same`); 1 workload.
    assert [getattr(w, "placement", None) for w in cands.workloads] == [None]
    # The placement candidate on the tune's own image size, in a run of its own: the untuned
    # subject pinned beside it left free (free, its passes over a 4 GiB image's file were the
    # slowest cells of the tune: 28 s a sample on the real ntfs-3g).
    assert [s.id for s in pinned.subjects] == ["ntfs-3g"] and pinned.size == GiB
    assert [getattr(w, "placement", None) for w in pinned.workloads] == ["same", "free"]
    # Both won: measured again in runs of their own (fresh images, fresh rounds), each on the
    # size it was chosen on.
    assert [s.id for s in confirm.subjects] == ["ntfs-3g", "ntfs-3g:big_writes"]
    assert confirm.size >= 4 * GiB and confirm.run_id != cands.run_id
    assert [getattr(w, "placement", None) for w in confirm.workloads] == [None]
    assert [s.id for s in confirm_pinned.subjects] == ["ntfs-3g"] and confirm_pinned.size == GiB
    assert [getattr(w, "placement", None) for w in confirm_pinned.workloads] == ["same", "free"]
    t = tune_of(run)
    assert t is not None
    by = {c.name: c for c in t.changes}
    big = by["big_writes"]
    assert big.outcome == "better" and big.gain == pytest.approx(8.0)
    assert big.run_id == t.runs["candidates-1"]
    assert big.confirmation is not None and big.confirmation.run_id == t.runs["confirm"]
    assert big.confirmation.outcome == "better" and big.confirmation.gain == pytest.approx(8.0)
    assert by["placement same"].gain == pytest.approx(SAME)
    # One family for the selection (2 changes × 1 workload), one for the confirmation.
    assert t.families[0].startswith("selection (2 changes × 1 workload(s)): one family of 2")
    assert t.families[1].startswith("confirmation (fresh samples): one family of 2")
    # Pinning is in every change already (as compare measures): no combination to make.
    assert not t.combination
    assert big.gap_closed is not None and big.gap_closed > 0.8
    assert any("mount" in u or "ntfs-3g" in u for u in big.use)
    assert any("budget" in s and "left" in s for s in steps)
    # Never measured without the flag: no plan names a remedy that is not safe.
    unsafe = {r.change for r in REMEDIES.values() if r.safety != SAFE}
    measured = {o for p in plans for s in p.subjects or [] for o in s.options.split(",")}
    assert not unsafe & measured
    assert "delay_mtime" in {s.name for s in t.skipped}
    # The --json record carries the confirmation on the change.
    raw = json.loads(json.dumps(run.model_dump(mode="json")))["tune"]
    (b,) = [c for c in raw["changes"] if c["name"] == "big_writes"]
    assert b["confirmation"]["run_id"] == t.runs["confirm"] and b["confirmation"]["cell"]


def test_two_option_winners_are_confirmed_together(tuned: Any) -> None:
    run, plans, _ = tuned(subject="fuse2fs", workloads="seq-write/fsync,seq-read/cold")
    _explain, cands, confirm = plans
    both = "fuse2fs:splice_read,splice_write,splice_move,max_readahead=1048576"
    # Readahead windows stand for no share of the gap: such remedies ride along in the run
    # made for the others, each subject with its own setting, until it has 3 candidates.
    assert {s.id for s in cands.subjects} == {
        "fuse2fs", "fuse2fs:max_readahead=1048576", "fuse2fs:splice_read,splice_write,splice_move",
        "fuse2fs (FUSE bdi read_ahead_kb=1024)",
    }  # fmt: skip
    t = tune_of(run)
    assert t is not None
    why = {s.name: s.reason for s in t.skipped}
    assert "3 candidates already" in why["read_ahead_kb"]
    # What it would take to try one the family left out: a lab change set by hand, a mount
    # option by the command that measures it alone.
    assert why["read_ahead_kb"].endswith("to try it alone: set it by hand and compare the "
                                         "subject before and after")  # fmt: skip
    left = [x.reason for x in t.skipped if "no measured share" in x.reason]
    assert all("to try it alone:" in r for r in left)
    # The winners alone and together, on fresh samples; the readahead (no effect) is not.
    assert [s.id for s in confirm.subjects] == [
        "fuse2fs", "fuse2fs:splice_read,splice_write,splice_move",
        "fuse2fs:max_readahead=1048576", both,
    ]  # fmt: skip
    assert {getattr(w, "placement", None) for w in confirm.workloads} == {"free", "same"}
    assert len(t.combination) == 2  # one per workload
    for together in t.combination:
        assert together.run_id == t.runs["confirm"] and together.placement == "same"
        assert together.gain == pytest.approx(3.0 * 4.0)  # both pinned, as compare measures
    ra = [c for c in t.changes if c.name == "FUSE readahead 1 MiB"]
    assert ra and all(c.confirmation is None and c.gap_closed is None for c in ra)
    assert "io_uring transport" in {s.name for s in t.skipped}


def test_unsafe_is_measured_with_the_flag_and_labelled(tuned: Any) -> None:
    run, plans, _ = tuned(allow_unsafe=True)
    measured = {s.id for p in plans for s in p.subjects or []}
    assert "ntfs-3g:delay_mtime" in measured
    t = tune_of(run)
    assert t is not None
    dm = next(c for c in t.changes if c.name == "delay_mtime")
    assert dm.safety == "changes-semantics"
    con = Console(width=160, record=True)
    for part in terminal(run):
        con.print(part)
    text = con.export_text()
    assert "UNSAFE" in text and "delay_mtime" in text
    md = export(run, "markdown")
    assert "### Tune: ntfs-3g" in md and "UNSAFE" in md and "To use" in md
    page = render_html(run)
    assert 'id="tune"' in page and "UNSAFE" in page and "tune-gain" in page


def test_the_stored_tune_run_reads_back(tuned: Any, tmp_path: Path) -> None:
    run, _, _ = tuned()
    with Store(tmp_path / "db.sqlite") as store:
        again = store.load_run(run.run_id)
    t = tune_of(again)
    assert t is not None and t.changes and t.subject == "ntfs-3g"
    assert (tmp_path / "out-ntfs-3g-False-0" / "results.json").exists()


def test_diff_sets_two_tunes_side_by_side(tuned: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fsbench.cli.app import cli

    safe, _, _ = tuned()
    unsafe, _, _ = tuned(allow_unsafe=True)
    db = str(tmp_path / "db.sqlite")
    r = CliRunner().invoke(cli, ["diff", safe.run_id, unsafe.run_id, "--db", db, "--force"])
    assert r.exit_code == 0, r.output
    assert "tune: ntfs-3g (A) → ntfs-3g (B)" in r.output
    assert "delay_mtime (UNSAFE: semantics) · seq-write/fsync: not measured → 1.00×" in r.output
    assert "the change to use: big_writes → big_writes" in r.output
    assert "skipped in A only: delay_mtime: UNSAFE" in r.output
    j = CliRunner().invoke(cli, ["diff", safe.run_id, unsafe.run_id, "--db", db, "--json",
                                 "--force"])  # fmt: skip
    rows = {(x["change"], x["workload"]): x for x in json.loads(j.output)["tune"]["rows"]}
    big = rows["big_writes", "seq-write/fsync"]
    assert big["outcome_a"] == big["outcome_b"] == "better" and not big["moved"]


def test_subject_and_reference_are_checked_first() -> None:
    with pytest.raises(Exception, match="unknown driver"):
        parse_subject("nosuchfs")
    spec = parse_subject("ntfs-3g")
    with pytest.raises(Exception, match="the subject itself"):
        session.references(spec, "ntfs-3g")
    # The fastest for a subject that is its format's only kernel driver here: never itself
    # alone (a tune of ext4 measured ext4 alone and found no gap to explain).
    for name in ("ext4", "xfs", "btrfs"):
        refs = [r.id for r in session.references(parse_subject(name), "fastest")]
        assert refs and name not in refs, (name, refs)


def test_the_budget_keeps_the_best_candidates_and_says_what_it_left() -> None:
    found = gaps(fixture_run(), "fuse2fs", ["ext4"])
    cands, _ = choose("fuse2fs", [g for _, g in found], GiB, False, never)
    assert len(cands) >= 3
    groups, _ = budget.plan_groups(cands, GiB, fits=lambda size, n: True)
    costs = budget.Costs(overhead_s=30, per_cell_s=20)
    kept, skipped = budget.fit_budget(groups, 60, costs, 2)
    assert [c.name for g in kept for c in g.cands] == [cands[0].name]  # the best, always
    assert {s.remedy.name for s in skipped} == {c.name for c in cands[1:]}
    # Skipped for the budget; those whose factors stand for no time also because the only run
    # kept (the best: pinning) measures the subject pinned and free alone.
    riders = {c.name for c in cands if c.score <= 0}
    for s in skipped:
        assert "--time-budget" in s.reason or (
            s.remedy.name in riders and "pinned and free only" in s.reason
        ), (s.remedy.name, s.reason)
    assert any("--time-budget" in s.reason for s in skipped)
    kept, skipped = budget.fit_budget(groups, 10_000, costs, 2)
    # Time enough for all; those whose factors stand for no time stop at 3 in a run.
    assert all("3 candidates already" in s.reason and s.remedy.name in {c.name for c in cands}
               for s in skipped)  # fmt: skip
    assert sum(len(g.cands) for g in kept) == len(cands) - len(skipped)
    assert all(sum(c.remedy.kind != "placement" for c in g.cands) <= 3 for g in kept)


def test_dry_run_shows_the_first_step_and_the_remedies_and_makes_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fsbench.cli.app import cli

    out = tmp_path / "out"
    args = ["tune", "ntfs-3g", "--dry-run", "--out", str(out), "--db", str(tmp_path / "db")]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "subjects on this kernel (2): ntfs-3g" in r.output and "ext4" in r.output
    assert "big_writes" in r.output and "4.25 GiB images" in r.output
    assert "delay_mtime" in r.output and "--allow-unsafe" in r.output
    assert not out.exists() and not (tmp_path / "db").exists()
    bad = CliRunner().invoke(cli, ["tune", "nosuchfs", "--dry-run"])
    assert bad.exit_code != 0


def test_the_change_to_use_is_shown_better_than_the_best_alone_and_labelled() -> None:
    from fsbench.records.tunerecord import TuneChange, TuneRecord
    from fsbench.report.model import recommended
    from fsbench.report.views.tune import answer_lines
    from fsbench.tune.outcome import confirmation

    def ch(name: str, gain: float, **kw: Any) -> TuneChange:
        return TuneChange(name=name, subject="ntfs-3g:x", untuned="ntfs-3g", workload="w",
                          outcome="better", gain=gain, cell=f"{gain}× ▲", **kw)  # fmt: skip

    single = ch("big_writes", 6.0, use=["ntfs-3g -o big_writes"])
    together = ch("combination", 7.0, remedies=["big_writes", "delay_mtime"],
                  safety="changes-semantics", change="big_writes, delay_mtime",
                  use=["ntfs-3g -o big_writes,delay_mtime"])  # fmt: skip
    t = TuneRecord(subject="ntfs-3g", against="ext4", changes=[single], combination=[together])
    # ▲ in the run that chose it, never measured again: nothing to recommend yet.
    assert recommended(t) is None
    single.confirmation = confirmation(single)
    together.confirmation = confirmation(together)
    # Faster but never set against big_writes alone: big_writes is the answer.
    assert recommended(t) is single
    together.versus = "1.2× 1.1–1.3 ▲ against big_writes alone"
    together.versus_outcome = "better"
    assert recommended(t) is together
    text = "\n".join(str(x) for x in answer_lines(t))
    assert "to use together: big_writes + delay_mtime (UNSAFE: semantics" in text
    # Confirmed not separated: the selecting run's ▲ alone recommends nothing.
    single.confirmation = single.confirmation.model_copy(update={"outcome": "open"})
    t.combination = []
    assert recommended(t) is None


def test_a_lab_made_change_is_measured_and_combined_with_what_the_lab_makes(
    tuned: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # exfat-fuse: its own image with 1 MiB clusters wins on writes, the FUSE mount's readahead
    # on reads; together they are one subject made with both, beside the untuned one.
    monkeypatch.setitem(LAB_EFFECT, "-c 1M", 8.0)
    monkeypatch.setitem(LAB_EFFECT, "FUSE bdi read_ahead_kb=1024", 8.0)
    run, plans, _ = tuned(subject="exfat-fuse", workloads="seq-write/fsync,seq-read/cold")
    cands = plans[1]
    made = {s.id: s for s in cands.subjects or []}
    assert made["exfat-fuse (mkfs -c 1M)"].mkfs == ("-c", "1M")
    assert [k.text for k in made["exfat-fuse (FUSE bdi read_ahead_kb=1024)"].knobs] == [
        "FUSE bdi read_ahead_kb=1024"
    ]
    t = tune_of(run)
    assert t is not None
    by = {(c.name, c.workload): c for c in t.changes}
    cluster = by["exfat cluster 1 MiB", "seq-write/fsync"]
    assert cluster.outcome == "better" and "formatted with mkfs -c 1M" in cluster.lab
    assert "mkfs.exfat -c 1M DEVICE" in cluster.use[0]
    ra = by["FUSE readahead 1 MiB", "seq-read/cold"]
    assert ra.outcome == "better" and any("read_ahead_kb" in u for u in ra.use)
    combo = plans[-1].subjects or []
    (both,) = [s for s in combo if s.mkfs and s.knobs]
    assert both.mkfs == ("-c", "1M") and [k.where for k in both.knobs] == ["mount"]
    assert {c.run_id for c in t.combination} == {t.runs["confirm"]}


def test_an_io_size_change_is_the_workloads_larger_records_beside_its_own(tuned: Any) -> None:
    run, plans, _ = tuned(subject="fuse2fs", workloads="rand-write/4k-buffered")
    io, again = [p for p in plans if [s.id for s in p.subjects or []] == ["fuse2fs"]]
    assert again.run_id != io.run_id  # confirmed afresh, on the same pair of workloads
    assert {workload_id(w) for w in again.workloads} == {workload_id(w) for w in io.workloads}
    assert {workload_id(w).split("@")[0] for w in io.workloads} == {
        "rand-write/4k-buffered", "rand-write/8k-buffered"
    }  # fmt: skip
    t = tune_of(run)
    assert t is not None
    (rec,) = [c for c in t.changes if c.name == "records 8 KiB"]
    assert rec.workload == "rand-write/4k-buffered" and rec.gain == pytest.approx(6.0)
    assert rec.outcome == "better" and rec.use[0].startswith("the application: 8k records")
    assert rec.confirmation is not None and rec.confirmation.run_id == t.runs["confirm-io"]
    assert "8k variant beside its 4k one" in rec.lab
    assert all("records 8 KiB" not in c.remedies for c in t.combination)  # the app's own
    # On 1 MiB records there is nothing to resize: said, not measured.
    n = len(plans)
    _, plans2, _ = tuned(subject="fuse2fs", workloads="seq-write/fsync")
    assert all("8k" not in workload_id(w) for p in plans2[n:] for w in p.workloads)


def test_a_transport_of_another_daemon_is_not_merged_with_mount_options() -> None:
    # io_uring is fuse2fs-3.18's (libfuse 3): fuse2fs's libfuse 2 options would not mount.
    spec = parse_subject("fuse2fs")
    by = {r.name: session.Candidate(r, 1.0) for r in REMEDIES.values()}
    notes: list[str] = []
    kept = session._one_daemon([by["io_uring transport"], by["splice"]], notes)
    assert [c.name for c in kept] == ["splice"] and "not combined" in notes[0]
    # Lab-made changes travel with it: the transport's driver leads the merged subject.
    uring = session.candidate_spec(spec, REMEDIES["io_uring transport"])
    ra = session.candidate_spec(spec, REMEDIES["read_ahead_kb"])
    for a, b in ((uring, ra), (ra, uring)):
        merged = session._merge(a, b)
        assert merged.driver.name == "fuse2fs-3.18" and merged.transport == "uring"
        assert [k.text for k in merged.knobs] == ["loop read_ahead_kb=1024"]


def test_tune_measures_the_subject_as_compare_does_and_names_the_free_one(
    tuned: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One subject, one name: tune's untuned ntfs-3g is compare's (pinned to one CPU, compare's
    default placement), so a change's gain is the ratio `compare ntfs-3g ntfs-3g:big_writes`
    prints on the same machine; left free, the subject is measured beside it only as the
    placement change's baseline, and named so. Here pinning gains less with big_writes (fewer
    requests to wake the daemon for), as on the real driver: had tune measured the untuned
    subject free, big_writes would read 8× here and compare 3.2×."""
    from click.testing import CliRunner

    from fsbench.cli.app import cli
    from fsbench.report.model.keys import placement_of
    from fsbench.tune.outcome import result_of

    monkeypatch.setitem(PINNED_WITH, "big_writes", 0.4)
    run, plans, _ = tuned()
    explain, cands, pinned = plans[:3]
    # The explain run at compare's default: no placement asked for, every sample pinned `same`;
    # big_writes' run so too, and the placement's run with the subject free beside it.
    assert all(getattr(w, "placement", None) is None for w in explain.workloads)
    assert all(getattr(w, "placement", None) is None for w in cands.workloads)
    assert [getattr(w, "placement", None) for w in pinned.workloads] == ["same", "free"]
    t = tune_of(run)
    assert t is not None and t.untuned_placement == "same"
    assert "as `fsbench compare` measures it" in t.measured_as
    assert "ntfs-3g free (nothing pinned" in t.measured_as
    by = {c.name: c for c in t.changes}
    big, pin = by["big_writes"], by["placement same"]
    assert (big.placement, big.untuned_placement) == ("same", "same")
    assert big.gain == pytest.approx(8.0 * 0.4)  # the pinned ratio, compare's
    assert not any(u.startswith("taskset") for u in big.use)  # its use: the change alone
    # Pinning: the untuned subject pinned against itself free, one run; no share of the gap
    # (the gap is the pinned subject's), its two placements named with their centres.
    assert (pin.subject, pin.placement, pin.untuned_placement) == ("ntfs-3g", "same", "free")
    assert pin.gain == pytest.approx(SAME) and pin.gap_closed is None
    assert "ntfs-3g free (nothing pinned)" in pin.lab and "MiB/s pinned (same)" in pin.lab
    assert any(u.startswith("taskset") for u in pin.use)
    assert not t.combination  # pinning is in every change already: nothing to combine
    con = Console(width=200, record=True)
    for part in terminal(run):
        con.print(part)
    text = con.export_text()
    assert t.measured_as in " ".join(text.split())
    rows = {line.split("│")[0].strip(): line for line in text.splitlines() if "│" in line}
    assert "[same]" in rows["placement same"] and "[same]" not in rows["big_writes"]
    # compare, as a user runs it on the same (fake) machine: the same ratio.
    db = str(plans[0].db)
    args = ["compare", "ntfs-3g", "ntfs-3g:big_writes", "--size", "5G",
            "--workloads", "seq-write/fsync", "--db", db, "--out", str(tmp_path / "cmp"),
            "--json"]  # fmt: skip
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    cmp = fake_run(plans[-1])
    a, b = (result_of(cmp, s, "seq-write/fsync") for s in ("ntfs-3g", "ntfs-3g:big_writes"))
    assert a is not None and b is not None and placement_of(a) == "same"
    assert b.center / a.center == pytest.approx(big.confirmation.gain)  # type: ignore[union-attr,operator]


def test_a_confirmation_starts_only_when_the_selecting_cells_say_it_fits(
    tuned: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget is kept by what the selecting runs took, cell by cell: ntfs-3g left free took
    28 s a sample on a 4.25 GiB image here, and a confirmation priced by the explain run's
    per-cell seconds ran 69 s past a 540 s budget. Here the free cells took 200 s a sample:
    pinning's confirmation (4 × 200 s for the free cell alone) does not fit 600 s, and is said
    not to be confirmed; big_writes' own confirmation, priced by its cheap cells, runs."""
    real = fake_run

    def slow_free(plan: Plan) -> Run:
        run = real(plan)
        for i, r in enumerate(run.results):
            if r.params.get("placement") == "free":
                slow = [d.model_copy(update={"seconds": 200.0}) for d in r.sample_details]
                run.results[i] = r.model_copy(update={"sample_details": slow})
        return run

    monkeypatch.setattr(sys.modules[__name__], "fake_run", slow_free)
    run, plans, _ = tuned(budget_s=600)
    t = tune_of(run)
    assert t is not None
    assert "confirm" in t.runs and "confirm-placement" not in t.runs
    by = {c.name: c for c in t.changes}
    assert by["big_writes"].confirmation is not None
    assert by["placement same"].confirmation is None
    (note,) = [n for n in t.notes if n.startswith("placement same not confirmed")]
    assert "as the selecting run took for the same cells" in note and "--time-budget" in note
    # Nothing was started that the budget could not pay for: the last plan is big_writes'.
    assert [s.id for s in plans[-1].subjects] == ["ntfs-3g", "ntfs-3g:big_writes"]


def test_a_cell_is_priced_at_its_fewest_samples_and_by_its_image_size() -> None:
    """A later run's cell costs its warm-up and three samples (its adaptive rounds stop at its
    share of the budget), at the explain run's seconds per warm-up and per sample weighted by
    the subject's own sample length; on a larger image, more only once a pass over its file
    outlasts the sample (ntfs-3g's explain run of 2026-12-05: 0.94 s passes in 1.9 s samples)."""
    from fsbench.records.schema import Schedule

    run = fixture_run()
    every = [d.seconds for r in run.results for d in r.sample_details]
    mine = [r for r in run.results if r.subject == "ntfs-3g"]
    secs = [d.seconds for r in mine for d in r.sample_details]
    run.schedule = Schedule(adaptive=True, spent_s=60.0,
                            phases={"warm-up": 12.0, "run": 2.0 * len(every)})  # fmt: skip
    costs = budget.costs_of(run, "ntfs-3g", 80.0, GiB)
    weight = (sum(secs) / len(secs)) / (sum(every) / len(every))
    want = (12.0 / len(run.results) + 3 * 2.0) * weight
    assert costs.per_cell_s == pytest.approx(max(1.0, want))
    assert costs.overhead_s == pytest.approx(20.0)
    assert costs.cell_s(GiB // 2) == costs.cell_s(GiB)  # a sample lasts its minimum at least
    # A pass half a sample long: twice the image, the same; four times, twice the cost.
    half = budget.Costs(10.0, 8.0, base_size=GiB, pass_share=0.5)
    assert half.cell_s(2 * GiB) == 8.0 and half.cell_s(4 * GiB) == 16.0
