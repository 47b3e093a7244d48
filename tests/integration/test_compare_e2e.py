"""`fsbench compare` and `fsbench run --target` end to end: results, a rejected mount option,
a subject that fails to mount on its own, and a directory measured by an unprivileged user."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import jsonschema
import pytest
from conftest import (
    REPO,
    MiB,
    asks_cold,
    execute_released,
    fsbench_released,
    need_drivers,
    results_of,
)
from rich.console import Console

from fsbench.environment import NO_NOISE_FLOOR_NOTE
from fsbench.errors import EXIT_FAILED
from fsbench.lab.backing import Backing
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subject
from fsbench.pipeline import Plan
from fsbench.registry import resolve_workloads
from fsbench.report.views.sections import render, render_html


@pytest.mark.root
def test_compare_ext4_and_fuse2fs(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FSBENCH_TEST_NO_NOISE_FLOOR")  # this test checks the floor
    need_drivers("ext4", "fuse2fs")
    out = tmp_path / "out"
    ran = fsbench_released(
        state_dir, out,
        "compare", "ext4", "fuse2fs", "--size", "64M", "--repeat", "2", "--warmup", "0",
        "--min-sample-time", "0", "--workloads", "seq-write,seq-read",
        "--db", str(tmp_path / "results.db"), "--json",
    )  # fmt: skip
    doc = ran.doc
    assert json.loads(ran.stdout)["run_id"] == doc["run_id"]
    # A real run's document holds to the published schema (docs/results.schema.json).
    schema = json.loads((REPO / "docs" / "results.schema.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    assert isinstance(doc["schema_version"], int) and doc["schema_version"] >= 1
    assert doc["status"] == "complete"

    subjects = {s["id"]: s for s in doc["subjects"]}
    assert set(subjects) == {"ext4", "fuse2fs"}
    for s in subjects.values():
        assert s["status"] == "ok", s
        assert s["driver_version"] and any(c.isdigit() for c in s["driver_version"])
        assert s["mkfs_command"][0] == "mkfs.ext4"
        assert s["mkfs_command"][-1].startswith("/dev/loop")
        assert "rw" in s["effective_mount_options"].split(",")
    assert subjects["ext4"]["kind"] == "kernel" and subjects["fuse2fs"]["kind"] == "fuse"
    # The same image, made by the same command, for both drivers of the format.
    assert subjects["ext4"]["mkfs_command"] == subjects["fuse2fs"]["mkfs_command"]
    assert "user_id=0" in subjects["fuse2fs"]["effective_mount_options"]

    # A workload name may stand for several variants (seq-read: cold and warm); each is one
    # result, told apart by params.variant.
    results = {(r["subject"], r["workload"], r["params"].get("variant")): r for r in doc["results"]}
    assert len(results) == len(doc["results"])
    assert {(s, w) for s, w, _v in results} == {
        (s, w) for s in ("ext4", "fuse2fs") for w in ("seq-write", "seq-read")
    }
    for key, r in results.items():
        assert r["status"] == "ok", (key, r["error"])
        assert len(r["samples"]) == 2, key
        assert all(v > 0 for v in r["samples"]), key
    for subject in ("ext4", "fuse2fs"):
        cold = [r for r in results_of(doc, subject, "seq-read") if asks_cold(r)]
        assert cold, f"no cold seq-read result for {subject}"
        for r in cold:
            assert r["cache"] == "cold-verified", (subject, r["cache"], r["flags"])
            assert all(s["cache"] == "cold-verified" for s in r["sample_details"])
    # A FUSE driver's daemon burns CPU of its own; a kernel driver has no daemon.
    for r in results_of(doc, "fuse2fs", "seq-write"):
        assert r["cpu"]["driver_s"] > 0, r["params"]
    for r in results_of(doc, "ext4", "seq-write"):
        assert r["cpu"]["driver_s"] == 0, r["params"]
    # The subject's own context switches (the daemon's among them) beside the machine's.
    for r in results_of(doc, "fuse2fs", "seq-write"):
        assert r["subject_ctx_switches_per_gib"] > 0, r["params"]
        assert all(s["extra"]["daemon_ctx"] > 0 for s in r["sample_details"]), r["params"]
    # The machine's noise floor: at the start, and again after the last sample unless the
    # run was too short for that to be worth its cost (then it says so).
    floor = doc["environment"]["noise_floor"]
    assert len(floor["mib_s"]) == floor["runs"] and floor["seconds"] > 0, floor
    assert len(floor.get("mib_s_end", [])) == floor["runs"] or floor["end_not_measured"], floor


@pytest.mark.root
def test_a_file_backed_run_deals_its_images_out_every_round_and_stays_intact(
    tmp_path: Path, state_dir: Path, disk_dir: Path
) -> None:
    """--backing file:DIR: before every round after the first the images are dealt out to the
    subjects again, each written afresh from its pristine image (the run records which image
    each subject used in each round, and the phases name the time); the integrity set goes on
    every image again, so the check at the end passes; nothing is left in DIR."""
    need_drivers("ext4", "fuse2fs")
    holder = disk_dir  # a disk: the session's temporary directory may be memory
    ran = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", "ext4", "fuse2fs", "ext4:noatime", "--size", "64M", "--repeat", "3",
        "--warmup", "0", "--min-sample-time", "0", "--workloads", "seq-write/fsync",
        "--backing", f"file:{holder}", "--db", str(tmp_path / "results.db"), "--json",
    )  # fmt: skip
    doc = ran.doc
    assert doc["status"] == "complete"
    ids = {s["id"] for s in doc["subjects"]}
    for s in doc["subjects"]:
        assert s["status"] == "ok", s
        assert s["integrity"]["status"] == "ok", s["integrity"]
        assert s["integrity"]["digest_files"] > 0 and not s["integrity"]["digest_failures"]
    assert all(len(r["samples"]) == 3 for r in doc["results"])
    dealt = doc["schedule"]["images"]
    assert len(dealt) == 3 and all(set(d) == ids for d in dealt), dealt
    assert all(len(set(d.values())) == 3 for d in dealt), dealt  # one image each
    assert doc["schedule"]["phases"].get("setup", 0) > 0, doc["schedule"]["phases"]
    assert not list(holder.iterdir())


@pytest.mark.root
def test_rejected_mount_option_is_a_usage_error(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4")
    # The refusal comes after the lab was built, so results.json names the run (no samples),
    # and what was built is released.
    ran = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", "ext4:bogusopt", "--size", "64M", "--repeat", "1", "--warmup", "0",
        "--min-sample-time", "0", "--workloads", "seq-write",
        "--db", str(tmp_path / "results.db"),
        returncode=2,
    )  # fmt: skip
    # One line says what went wrong; the lab's progress lines before it ('fsbench [0:01]
    # mounting ...', printed when stderr is not a terminal) are not errors.
    lines = [ln for ln in ran.stderr.strip().splitlines() if not ln.startswith("fsbench [")]
    assert len(lines) == 1, ran.stderr
    assert "bogusopt" in lines[0] and "rejected" in lines[0]
    assert "Unknown parameter 'bogusopt'" in lines[0]  # the kernel's reason, not mount(8)'s
    assert all(not r["samples"] for r in ran.doc["results"])


@pytest.mark.root
def test_subject_that_fails_to_mount_fails_alone(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken image (its superblock zeroed after prepare) cannot mount, whatever its options:
    that subject fails, the other is measured, the run exits 1 and leaves nothing behind."""
    need_drivers("ext4")
    original = Lab.prepare

    def prepare_and_break_one(self: Lab, specs):
        subjects = original(self, specs)
        broken = next(s for s in subjects if s.spec.id == "ext4:noatime")
        with open(broken.device, "r+b") as dev:  # the loop device: ext4's superblock is at 1 KiB
            dev.write(bytes(MiB))
            dev.flush()
            os.fsync(dev.fileno())
        return subjects

    monkeypatch.setattr(Lab, "prepare", prepare_and_break_one)
    out = tmp_path / "out"
    plan = Plan(
        subjects=[parse_subject("ext4:noatime"), parse_subject("ext4")],
        explicit=True,
        workloads=resolve_workloads("seq-write", None),
        repeat=1,
        backing=Backing("ram"),
        size=64 * MiB,
        out_dir=out,
        db=tmp_path / "results.db",
        command=["fsbench", "compare", "ext4:noatime", "ext4"],
        warmup=0,
        min_sample_s=0.0,  # one iteration per sample: the test is about the failure
    )
    run, code = execute_released(plan, state_dir)
    assert code == EXIT_FAILED
    assert run.status == "complete"
    subjects = {s.id: s for s in run.subjects}
    assert subjects["ext4:noatime"].status == "failed"
    assert "mount failed" in (subjects["ext4:noatime"].error or "")
    assert subjects["ext4"].status == "ok"
    measured = {r.subject: r for r in run.results}
    assert "ext4" in measured and measured["ext4"].status == "ok"
    assert len(measured["ext4"].samples) == 1 and measured["ext4"].samples[0] > 0
    assert not measured.get("ext4:noatime") or not measured["ext4:noatime"].samples
    # Under the suite a run skips the machine's noise floor (tests/conftest.py) and says so.
    assert run.environment.noise_floor is None
    assert NO_NOISE_FLOOR_NOTE in run.environment.notes
    on_disk = json.loads((out / "results.json").read_text())
    assert {s["id"]: s["status"] for s in on_disk["subjects"]} == {
        "ext4:noatime": "failed",
        "ext4": "ok",
    }
    # No output vouches for the volume that never mounted: the terminal's integrity summary
    # names ext4 alone, and the page (which leads with the broken image's failure) no ok line.
    con = Console(width=100, record=True, color_system=None, file=io.StringIO())
    render(run, con)
    ok = [ln for ln in con.export_text().splitlines() if ln.startswith("integrity: ok")]
    assert ok and ok[0].startswith("integrity: ok — ext4 (")
    page = render_html(run)
    assert not any("ext4:noatime" in ln for ln in page.splitlines() if "Integrity: ok" in ln)
