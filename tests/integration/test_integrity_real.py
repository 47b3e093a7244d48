"""Integrity beside speed, on real images: a damaged superblock and a flipped byte are found
and named, clean ext4 and ntfs-3g volumes pass with their checker's version and command, and
the semantics table is filled from probes on each mount."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from conftest import MiB, execute_released, fsbench_released, need_drivers

from fsbench.lab import ntfsck
from fsbench.lab.backing import Backing
from fsbench.lab.integrity import DAMAGE_HOOK_ENV, INTEGRITY_DIR, SET_SIZES
from fsbench.lab.subject import parse_subject
from fsbench.pipeline import Plan
from fsbench.records.schema import Run
from fsbench.registry import resolve_workloads
from fsbench.report.model.naming import baseline_result, ranked
from fsbench.report.model.summary import findings

# The file of the integrity set whose byte the hook flips (its largest: many blocks).
FLIPPED = f"{INTEGRITY_DIR}/f{len(SET_SIZES) - 1}-{SET_SIZES[-1]}.bin"

# Run by the lab between the unmount and the check, as `hook DEVICE SUBJECT`: damages "ext4"'s
# superblock, flips one byte of an integrity-set file on "ext4:noatime", leaves the rest alone.
HOOK = f"""#!/usr/bin/env python3
import os, re, subprocess, sys
device, subject = sys.argv[1], sys.argv[2]
if subject == "ext4":
    offset, data = 1024, bytes(1024)  # the primary superblock, zeroed
elif subject == "ext4:noatime":
    run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    bs = int(re.search(r"Block size:\\s+(\\d+)", run(["dumpe2fs", "-h", device])).group(1))
    block = int(run(["debugfs", "-R", "bmap /{FLIPPED} 1", device]).split()[-1])
    offset = block * bs + 7
    with open(device, "rb") as f:
        f.seek(offset)
        data = bytes([f.read(1)[0] ^ 0x01])
else:
    sys.exit(0)
fd = os.open(device, os.O_WRONLY)
os.pwrite(fd, data, offset)
os.fsync(fd)
os.close(fd)
"""


def _plan(tmp_path: Path, subjects: list[str], workloads: str) -> Plan:
    return Plan(
        subjects=[parse_subject(s) for s in subjects],
        explicit=True,
        workloads=resolve_workloads(workloads, None),
        repeat=1,
        backing=Backing("ram"),
        size=64 * MiB,
        out_dir=tmp_path / "out",
        db=tmp_path / "results.db",
        command=["fsbench", "compare", *subjects],
        warmup=0,
        min_sample_s=0.0,  # one iteration per sample: the checks, not the figures, are tested
    )


def _run(plan: Plan, state_dir: Path) -> Run:
    return execute_released(plan, state_dir)[0]


@pytest.mark.root
def test_damage_is_found_named_and_not_ranked(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_drivers("ext4")
    hook = tmp_path / "damage.py"
    hook.write_text(HOOK)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(DAMAGE_HOOK_ENV, str(hook))
    plan = _plan(tmp_path, ["ext4", "ext4:noatime", "ext4:nodiratime"], "seq-write/fsync")
    run = _run(plan, state_dir)
    subjects = {s.id: s for s in run.subjects}

    broken = subjects["ext4"].integrity
    assert broken is not None and broken.status == "failed", broken
    assert broken.checker is not None and broken.checker.command[:2] == ["e2fsck", "-fn"]
    assert broken.checker.exit_code not in (0, None)
    # The checker's own words come first.
    assert broken.problems[0].startswith("e2fsck: ")
    assert "superblock" in broken.problems[0].lower(), broken.problems

    flipped = subjects["ext4:noatime"].integrity
    assert flipped is not None and flipped.status == "failed", flipped
    assert flipped.checker is not None and flipped.checker.exit_code == 0  # data, not metadata
    assert [f.split(":")[0] for f in flipped.digest_failures] == [FLIPPED]
    assert any(p.startswith(f"digest: {FLIPPED}: XXH128") for p in flipped.problems)

    clean = subjects["ext4:nodiratime"].integrity
    assert clean is not None and clean.status == "ok", clean
    assert clean.digest_files == len(SET_SIZES) + 1 and not clean.digest_failures

    # Damaged subjects are shown but never the baseline or the fastest.
    res = {r.subject: r for r in run.results}
    assert res["ext4"].samples and not ranked(res["ext4"]) and not ranked(res["ext4:noatime"])
    base = baseline_result(run.results, [s.id for s in run.subjects])
    assert base is not None and base.subject == "ext4:nodiratime"
    assert all(f.best in (None, "ext4:nodiratime") for f in findings(run))
    # First thing in the report and in results.json.
    page = (plan.out_dir / "report.html").read_text()
    assert page.index("integrity: failed") < page.index('<section id="answer">')
    on_disk = json.loads((plan.out_dir / "results.json").read_text())
    assert [s["integrity"]["status"] for s in on_disk["subjects"]] == ["failed", "failed", "ok"]


@pytest.mark.root
def test_a_damaged_volume_exits_4_naming_its_subject(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line's side (docs/commands.md, exit codes): the run is stored and printed,
    and its exit code says a volume failed its check, with the subject named."""
    need_drivers("ext4")
    hook = tmp_path / "damage.py"
    hook.write_text(HOOK)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(DAMAGE_HOOK_ENV, str(hook))
    ran = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", "ext4", "ext4:nodiratime", "--workloads", "seq-write/fsync", "--size", "64M",
        "--repeat", "1", "--warmup", "0", "--min-sample-time", "0", "--no-trace",
        "--db", str(tmp_path / "db"),
        returncode=4, timeout=180,
    )  # fmt: skip
    said = [ln for ln in ran.stderr.splitlines() if ln.startswith("fsbench: integrity")]
    assert said == [
        "fsbench: integrity check failed on ext4: its volume was damaged by the run (results "
        "stored and shown above, never ranked)"
    ], ran.stderr
    assert "seq-write" in ran.stdout  # the tables are still printed
    status = {s["id"]: s["integrity"]["status"] for s in ran.doc["subjects"]}
    assert status == {"ext4": "failed", "ext4:nodiratime": "ok"}


@pytest.mark.root
def test_clean_runs_pass_and_semantics_are_probed(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4", "ntfs-3g", "fuse2fs", "exfat-fuse")
    ids = ["ext4", "ntfs-3g", "fuse2fs", "exfat-fuse"]
    plan = _plan(tmp_path, ids, "tree-hash/cold,metadata/chmod-flat")
    run = _run(plan, state_dir)
    subjects = {s.id: s for s in run.subjects}
    # NTFS: ntfsck -n where fsbench fetched it (setup.sh --test does; lab/ntfsck.py), else
    # ntfsfix -n.
    ntfs_tool = "ntfsck" if ntfsck.checker() is not None else "ntfsfix"
    for sid, tool in (("ext4", "e2fsck"), ("ntfs-3g", ntfs_tool)):
        i = subjects[sid].integrity
        assert i is not None and i.status == "ok", (sid, i)
        assert i.checker is not None and Path(i.checker.command[0]).name == tool
        assert i.checker.command[-1].startswith("/dev/loop")
        assert i.checker.version and any(c.isdigit() for c in i.checker.version)
        assert i.checker.covers
        # The integrity set and tree-hash's tree were re-read from a fresh mount.
        assert i.digest_files > len(SET_SIZES) + 100 and not i.digest_failures
    for sid in ids:
        sem = subjects[sid].semantics
        assert sem is not None and all(f.detail for f in sem.values()), (sid, sem)
    assert subjects["exfat-fuse"].semantics["posix_permissions"].supported is False
    assert subjects["ntfs-3g"].semantics["o_direct"].supported is False
    assert subjects["ext4"].semantics["fallocate"].supported is True
    assert subjects["ext4"].semantics["o_direct"].supported is True
    assert subjects["ext4"].semantics["name_max"].value == 255
    # A workload that needs a missing feature says so, with what the probe saw.
    chmod = next(r for r in run.results if r.subject == "exfat-fuse" and "chmod" in str(r.params))
    assert chmod.status == "unsupported" and "probed" in (chmod.error or ""), chmod.error


@pytest.mark.root
def test_no_integrity_skips_the_checks(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4")
    plan = _plan(tmp_path, ["ext4"], "seq-write/fsync")
    plan.integrity = False
    run = _run(plan, state_dir)
    assert run.subjects[0].integrity is None
    assert run.subjects[0].semantics is not None
