"""Integrity and semantics without root: the kernel-log filter on canned records, the checker's
words, the probes on a temporary directory, and how every renderer treats a damaged subject
(shown, never ranked, named first), old results.json, and `diff` of integrity and semantics."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from run_parts import subject

from fsbench.lab.formats import FORMATS
from fsbench.lab.integrity import KmsgRecord, kernel_lines, notable, set_files, verify, write_set
from fsbench.probes.semantics import FEATURES, capabilities, probe
from fsbench.records.schema import (
    INTEGRITY_FAILED_FLAG,
    SCHEMA_VERSION,
    Checker,
    Feature,
    Integrity,
    Result,
    Run,
)
from fsbench.report.model.diff import diff_runs
from fsbench.report.model.naming import baseline_result
from fsbench.report.model.summary import findings
from fsbench.report.views.sections import render, render_html
from fsbench.stats.describe import summarize


def test_kernel_lines_name_the_device_and_tell_damage_from_notes() -> None:
    recs = [
        KmsgRecord(3, 10, "EXT4-fs error (device loop3): ext4_lookup: deleted inode referenced"),
        KmsgRecord(3, 11, "EXT4-fs error (device loop30): another run's device"),
        KmsgRecord(6, 12, "EXT4-fs (loop3): mounted filesystem r/w"),
        KmsgRecord(4, 13, "EXT4-fs warning (device loop3): checksum invalid"),
        KmsgRecord(4, 14, "loop3: some harmless warning"),
        KmsgRecord(3, 5, "EXT4-fs error (device loop3): before the mount"),
    ]
    damage, notes = kernel_lines(9, "loop3", recs)
    assert damage == [recs[0].text, recs[3].text]
    assert notes == [recs[4].text]
    assert kernel_lines(9, None, recs) == ([], [])


def test_checker_words_leave_out_banners_and_progress() -> None:
    out = (
        "e2fsck 1.47.0 (5-Feb-2023)\next2fs_open2: Bad magic number in super-block\n"
        "e2fsck: Superblock invalid, trying backup blocks...\nPass 1: Checking inodes\n"
        "Block bitmap differences:  +(8193--8450)\nFix? no\n"
    )
    checker = FORMATS["ext4"].checker
    assert checker is not None
    assert notable(out, checker.noise) == (
        "ext2fs_open2: Bad magic number in super-block; "
        "e2fsck: Superblock invalid, trying backup blocks...; "
        "Block bitmap differences:  +(8193--8450)"
    )


def test_every_format_declares_a_read_only_checker() -> None:
    for fmt in FORMATS.values():
        assert fmt.checker is not None, fmt.name
        assert fmt.checker.covers
        # Read-only flags: nothing repairs.
        assert {"-n", "-fn", "--readonly"} & set(fmt.checker.argv), fmt.checker.argv


def test_digests_name_the_changed_file(tmp_path: Path) -> None:
    expected = write_set(str(tmp_path))
    assert len(expected) == len(set_files())
    victim = sorted(expected)[3]
    data = bytearray((tmp_path / victim).read_bytes())
    data[0] ^= 1
    (tmp_path / victim).write_bytes(bytes(data))
    n, total, failures = verify(str(tmp_path), expected)
    assert n == len(expected) and total == sum(len(v) for v in set_files().values())
    assert [f.split(":")[0] for f in failures] == [victim]


def test_probes_fill_every_feature(tmp_path: Path) -> None:
    sem = probe(str(tmp_path), lambda: None)
    assert list(sem) == list(FEATURES)
    assert all(f.detail for f in sem.values())
    assert sem["posix_permissions"].supported is True  # tmp is a POSIX file system here
    assert sem["name_max"].value and sem["name_max"].value >= 255
    assert sem["o_direct"].supported is None or "O_DIRECT" in sem["o_direct"].detail
    assert not (tmp_path / ".fsbench-semantics").exists()
    ro = probe(str(tmp_path), lambda: None, read_only=True)
    assert ro["fallocate"].supported is None and "read-only" in ro["fallocate"].detail


def test_capabilities_follow_the_probe() -> None:
    no = {"posix_permissions": Feature(supported=False, detail="ignored")}
    assert capabilities(no, {"posix_permissions": True})["posix_permissions"] is False
    unknown = {"posix_permissions": Feature(supported=None)}
    assert capabilities(unknown, {"posix_permissions": True})["posix_permissions"] is True


def _result(subject: str, samples: list[float], flags: list[str] | None = None) -> Result:
    s = summarize(samples)
    return Result(
        subject=subject,
        workload="seq-write",
        params={"variant": "fsync"},
        metric="throughput",
        unit="MiB/s",
        samples=samples,
        median=s.median,
        ci95=s.ci95,
        flags=flags or [],
    )


def _run(damaged: bool, fallocate: bool = True) -> Run:
    bad = Integrity(
        status="failed",
        problems=["e2fsck: Bad magic number in super-block"],
        checker=Checker(command=["e2fsck", "-fn", "/dev/loop3"], version="e2fsck 1.47.0"),
    )
    good = Integrity(
        status="ok",
        checker=Checker(
            command=["ntfsfix", "-n", "/dev/loop4"], version="ntfsfix v2022.10.3", exit_code=0
        ),
        digest_files=8,
    )
    sem = {k: Feature(supported=True, detail="probed") for k in FEATURES}
    sem["fallocate"] = Feature(supported=fallocate, detail="fallocate(1 MiB)")
    flag = [f"{INTEGRITY_FAILED_FLAG}: e2fsck: Bad magic (not ranked)"] if damaged else []
    return Run(
        run_id="r-" + str(damaged),
        started="now",
        status="complete",
        subjects=[
            subject("ext4", integrity=bad if damaged else good),
            subject("ntfs-3g", integrity=good, semantics=sem),
        ],
        results=[_result("ext4", [900.0, 910.0, 905.0], flag), _result("ntfs-3g", [90.0, 91, 92])],
    )


def test_a_damaged_subject_is_shown_first_but_never_ranked() -> None:
    run = _run(damaged=True)
    base = baseline_result(run.results, ["ext4", "ntfs-3g"])
    assert base is not None and base.subject == "ntfs-3g"
    f = findings(run)[0]
    assert f.best == "ntfs-3g"  # though ext4 was 10x faster
    assert any("ext4: integrity failed, not ranked" in p for p in f.problems)
    con = Console(record=True, width=120)
    render(run, con)
    text = con.export_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[1].startswith("✗ ext4: integrity: failed — e2fsck: Bad magic number")
    assert "not ranked" in text and "905" in text  # its figure is still shown
    assert "integrity: ok — ntfs-3g (checker clean" in text  # all others ok: one line
    con = Console(record=True, width=120)
    render(run, con, verbose=True)
    verbose = con.export_text()
    assert "integrity: ok ntfs-3g — ntfsfix -n (ntfsfix v2022.10.3): clean" in verbose
    assert "chmod honoured" in verbose  # the semantics table (one line without --verbose)
    page = render_html(run)
    assert page.index("integrity: failed") < page.index('<section id="answer">')
    assert "e2fsck: Bad magic number in super-block" in page
    assert "Semantics (probed on each mount)" in page and "chmod honoured" in page
    assert "not ranked" in page  # the ratio cell of the damaged subject


def test_old_results_without_integrity_still_load() -> None:
    old = {
        "schema_version": 1,
        "run_id": "old",
        "started": "then",
        "subjects": [{"id": "ext4", "driver": "ext4", "fs": "ext4", "kind": "kernel"}],
        "results": [],
    }
    run = Run.model_validate(old)
    assert run.subjects[0].integrity is None and run.subjects[0].semantics is None
    assert SCHEMA_VERSION > 1


def test_diff_says_when_integrity_or_semantics_changed() -> None:
    d = diff_runs(_run(damaged=False), _run(damaged=True, fallocate=False))
    assert any(
        c.startswith("ext4: integrity ok → failed (e2fsck: Bad magic") for c in d.subject_changes
    )
    assert "ntfs-3g: fallocate ✓ → ✗ (fallocate(1 MiB))" in d.subject_changes
    assert d.to_dict()["subject_changes"] == d.subject_changes
    assert diff_runs(_run(False), _run(False)).subject_changes == []


def test_ntfsck_is_fetched_only_when_volumes_will_be_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deeper NTFS checker is the integrity check's: --no-integrity fetches nothing."""
    from fsbench.lab import ntfsck
    from fsbench.lab.integrity import Guard

    asked: list[set[str]] = []
    monkeypatch.setattr(ntfsck, "fetch_for", lambda formats: asked.append(formats))
    Guard(enabled=False).fetch_checkers({"ntfs", "ext4"})
    assert asked == []
    Guard(enabled=True).fetch_checkers({"ntfs", "ext4"})
    assert asked == [{"ntfs", "ext4"}]


def test_o_direct_is_what_the_runs_own_samples_proved() -> None:
    """The mount-time probe's answer gives way to the run's O_DIRECT samples: verified direct,
    or the device's cache filled (ntfs-3g); a subject without such samples keeps its probe."""
    from fsbench.probes.semantics import prove_o_direct

    run = _run(damaged=False)
    ext4, ntfs = run.subjects
    ext4.semantics = {"o_direct": Feature(supported=None, detail="probed")}
    ntfs.semantics = {"o_direct": Feature(supported=True, detail="probed")}
    run.results[0].cache = "direct"
    run.results[1].cache = "direct-not-honored"
    prove_o_direct(run.subjects, run.results)
    assert ext4.semantics["o_direct"].supported is True
    assert ntfs.semantics["o_direct"].supported is False
    assert "cache filled" in ntfs.semantics["o_direct"].detail
    run.results[0].cache = None
    ext4.semantics = {"o_direct": Feature(supported=None, detail="probed")}
    prove_o_direct(run.subjects, run.results[:1])
    assert ext4.semantics["o_direct"] == Feature(supported=None, detail="probed")
