"""One command across kernels: the anchor added to every guest, one image made once for all
guests (real mkntfs on a file, no mount), the guest's lab taking it instead of formatting, and
the report's like-with-like notes. No VM is booted here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fsbench.lab.lab import PRISTINE_DIR_ENV, PRISTINE_MANIFEST, shared_pristine
from fsbench.records.schema import VM, Result, Run, Subject
from fsbench.report.model.vm_notes import vm_notes
from fsbench.vm import add_anchors, group_subjects, images
from fsbench.vm.guest import guest_script, vng_argv
from fsbench.vm.kernels import Kernel


def test_a_fuse_subject_on_one_guest_kernel_is_the_anchor_on_the_others() -> None:
    groups = group_subjects(["ntfs@debian-sid", "ntfs3@debian-6.12", "ntfs-3g@debian-sid"], None)
    added = add_anchors(groups)
    assert added == {"debian-6.12": ["ntfs-3g"]}
    assert groups == {"debian-sid": ["ntfs", "ntfs-3g"], "debian-6.12": ["ntfs3", "ntfs-3g"]}
    # One guest kernel (or the host beside one): nothing to anchor.
    one = group_subjects(["ntfs-3g@debian-sid", "ext4@host"], None)
    assert add_anchors(one) == {} and one["debian-sid"] == ["ntfs-3g"]


@pytest.mark.skipif(shutil.which("mkntfs", path="/usr/sbin:/sbin") is None, reason="no mkntfs")
def test_one_image_per_format_for_every_guest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = images.make(tmp_path, ["ntfs"], 16 * 2**20)
    image = tmp_path / "ntfs.img"
    assert image.stat().st_size == 16 * 2**20
    assert made["ntfs"]["mkfs"][0] == "mkntfs" and len(made["ntfs"]["sha256"]) == 64
    assert json.loads((tmp_path / PRISTINE_MANIFEST).read_text()) == made
    # The guest's lab reads it through the environment its script exports.
    monkeypatch.setenv(PRISTINE_DIR_ENV, str(tmp_path))
    shared = shared_pristine("ntfs")
    assert shared is not None and shared["path"] == str(image)
    assert shared["sha256"] == made["ntfs"]["sha256"]
    assert shared_pristine("ext4") is None  # not made: the guest formats its own
    monkeypatch.delenv(PRISTINE_DIR_ENV)
    assert shared_pristine("ntfs") is None


def test_the_guest_gets_the_images_read_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("fsbench.vm.guest.vng_path", lambda: "vng")
    k = Kernel("debian-sid", "/k/vmlinuz", None, "7.2.13+deb14-amd64", "pkg")
    imgs = str(tmp_path / "imgs")
    argv = vng_argv(k, tmp_path / "s.sh", tmp_path, 2**30, 2, False, None, imgs)
    assert argv[argv.index("--rodir") + 1] == imgs
    text = guest_script(tmp_path, ["ntfs"], [], ["ntfs"], None, imgs)
    assert f"export {PRISTINE_DIR_ENV}={imgs}" in text


def _subject(sid: str, kernel: str, digest: str = "ab" * 32) -> Subject:
    driver = sid.split("@")[0]
    return Subject(
        id=sid, driver=driver, fs="ntfs", kind="kernel", kernel=kernel, image_sha256=digest
    )


def _result(sid: str, wid: str, median: float) -> Result:
    return Result(
        subject=sid,
        workload=wid.split("/")[0],
        workload_id=wid,
        metric="throughput",
        unit="MiB/s",
        median=median,
    )


def test_the_report_keeps_like_with_like() -> None:
    run = Run(run_id="r", started="now")
    run.subjects = [
        _subject("ntfs@debian-sid", "debian-sid"),
        _subject("ntfs-3g@debian-sid", "debian-sid"),
        _subject("ntfs3@debian-6.12", "debian-6.12"),
        _subject("ntfs-3g@debian-6.12", "debian-6.12"),
    ]
    run.results = [
        _result("ntfs-3g@debian-sid", "seq-write/fsync", 90.0),
        _result("ntfs-3g@debian-6.12", "seq-write/fsync", 60.0),
        _result("ntfs@debian-sid", "seq-write/fsync", 300.0),
    ]
    run.environment.vms = [
        VM(kernel="debian-sid", release="7.2.13+deb14-amd64", virtualization="emulated"),
        VM(
            kernel="debian-6.12",
            release="6.12.95+deb12-amd64",
            virtualization="emulated",
            anchors=["ntfs-3g@debian-6.12"],
        ),
    ]
    notes = vm_notes(run)
    assert sum("NOT representative" in n for n in notes) == 2  # each VM says it ran emulated
    (same,) = [n for n in notes if "one image" in n]
    assert "debian-6.12, debian-sid" in same and "abababababab" in same
    (anchor,) = [n for n in notes if n.startswith("anchor ")]
    assert anchor.startswith("anchor ntfs-3g on debian-6.12, debian-sid (added by fsbench")
    assert "seq-write/fsync 60.0 MiB/s on debian-6.12 vs 90.0 MiB/s on debian-sid" in anchor
    # Different bytes are said, not hidden.
    run.subjects[2].image_sha256 = "cd" * 32
    assert any("images differ" in n for n in vm_notes(run))
