"""Driver availability on canned machines: the kernel's file systems and module tree, /dev/fuse
and the binaries are a tree the test builds, so every verdict below is a fact of that tree."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from fsbench.lab.drivers import DRIVERS, availability, serving_proof
from fsbench.lab.subject import parse_subject
from fsbench.probes.procfs import ProcFS


def _machine(root: Path, filesystems: str, modules: list[str], fuse: bool, bins: list[str]):
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "filesystems").write_text(filesystems)
    mods = root / "lib" / "modules" / platform.release() / "kernel" / "fs"
    mods.mkdir(parents=True)
    for m in modules:
        (mods / m).write_bytes(b"")
    if fuse:
        (root / "dev").mkdir()
        (root / "dev" / "fuse").write_bytes(b"")
    bindir = root / "bin"
    bindir.mkdir()
    for b in bins:
        (bindir / b).write_text("#!/bin/sh\n")
        (bindir / b).chmod(0o755)
    return ProcFS(str(root)), str(bindir)


@pytest.fixture
def machine(tmp_path: Path):
    # ext4 built in, xfs as a (compressed) module, btrfs nowhere; FUSE and ntfs-3g only.
    return _machine(
        tmp_path,
        "nodev\tsysfs\nnodev\tfuse\n\text4\n\tfuseblk\n",
        ["xfs.ko.zst"],
        fuse=True,
        bins=["ntfs-3g"],
    )


def test_kernel_drivers_built_in_or_as_a_module(machine) -> None:
    fs, path = machine
    assert availability(DRIVERS["ext4"], fs, path).available
    assert availability(DRIVERS["xfs"], fs, path).available
    btrfs = availability(DRIVERS["btrfs"], fs, path)
    assert not btrfs.available
    assert "no btrfs file system" in btrfs.reason and "/lib/modules" in btrfs.reason
    assert btrfs.lacks == "kernel"  # what the report groups on, not the words


def test_a_kernel_lack_is_a_field_of_the_record() -> None:
    """The report tells a driver this kernel lacks by `Subject.unavailable`; records written
    before the field get it from their words once, when read."""
    from fsbench.records.schema import Run, Subject
    from fsbench.report.model.answer import missing

    base = {"fs": "x", "kind": "kernel", "status": "unavailable"}
    new = Subject(id="a", driver="a", error="reworded", unavailable="kernel", **base)
    old = Subject.model_validate({"id": "b", "driver": "b", "error": "this kernel: no b", **base})
    fuse = Subject.model_validate(
        {**base, "id": "c", "driver": "c", "kind": "fuse", "unavailable": "fuse",
         "error": "this kernel has no FUSE support"}
    )  # fmt: skip
    m = missing(Run(run_id="r", started="t", subjects=[new, old, fuse]))
    assert m.kernel_lacks == ["a", "b"] and [s for s, _ in m.other] == ["c"]


def test_fuse_drivers_need_their_binary_and_dev_fuse(machine, tmp_path: Path) -> None:
    fs, path = machine
    assert availability(DRIVERS["ntfs-3g"], fs, path).available
    missing = availability(DRIVERS["fuse2fs"], fs, path)
    assert missing == missing.__class__(
        False, "fuse2fs not found; apt-get install fuse2fs", "binary"
    )
    (tmp_path / "dev" / "fuse").unlink()
    gone = availability(DRIVERS["ntfs-3g"], fs, path)
    assert (gone.available, gone.reason) == (False, "/dev/fuse is missing; modprobe fuse")
    assert gone.lacks == "fuse"


def test_fuse_driver_without_fuse_in_the_kernel(tmp_path: Path) -> None:
    fs, path = _machine(tmp_path, "\text4\n", [], fuse=True, bins=["ntfs-3g"])
    av = availability(DRIVERS["ntfs-3g"], fs, path)
    assert not av.available and "no FUSE support" in av.reason
    assert ProcFS(str(tmp_path)).filesystems(nodev=False) == {"ext4"}


# -- who serves a mount --------------------------------------------------------------------------
def test_kernel_drivers_never_run_a_mount_helper() -> None:
    """Where ntfs-3g is installed /sbin/mount.ntfs is ntfs-3g: without -i, `mount -t ntfs`
    would run it and the kernel's ntfs would never be measured."""
    argv = DRIVERS["ntfs"].mount_argv("/dev/loop3", "/m", "windows_names")
    assert argv == ["mount", "-i", "-t", "ntfs", "-o", "windows_names", "/dev/loop3", "/m"]


def test_the_serving_proof_reads_the_mount_type_and_the_module_list(tmp_path: Path) -> None:
    fs, _ = _machine(tmp_path, "\tntfs\n\tfuseblk\n", [], fuse=True, bins=[])
    (tmp_path / "proc" / "modules").write_text(
        "ntfs 249856 1 - Live 0x0000000000000000\nloop 40960 2 - Live 0x0000000000000000\n"
    )
    assert serving_proof(DRIVERS["ntfs"], "ntfs", fs) == (
        "kernel ntfs (mount type ntfs; module ntfs loaded)"
    )
    # `mount -t ntfs` served by ntfs-3g's helper shows as fuseblk: refused, with the reason.
    with pytest.raises(ValueError, match="served by fuseblk, not the kernel's ntfs"):
        serving_proof(DRIVERS["ntfs"], "fuseblk", fs)
    # Built in: the type is the kernel's, no module is listed.
    (tmp_path / "proc" / "modules").write_text("loop 40960 2 - Live 0x0000000000000000\n")
    assert "built in" in serving_proof(DRIVERS["ntfs"], "ntfs", fs)
    assert serving_proof(DRIVERS["ntfs-3g"], "fuseblk", fs).startswith("fuse ntfs-3g")
    with pytest.raises(ValueError, match="not through FUSE"):
        serving_proof(DRIVERS["ntfs-3g"], "ntfs3", fs)


def test_ntfs_declares_its_mount_options() -> None:
    opts = DRIVERS["ntfs"].known_options
    assert {"windows_names", "disable_sparse", "acl", "discard", "iocharset="} <= set(opts)
    from click.testing import CliRunner

    from fsbench.cli.app import cli

    out = CliRunner().invoke(cli, ["list", "drivers", "--json"])
    assert out.exit_code == 0, out.output
    listed = {r["name"]: r["options"] for r in json.loads(out.output)}
    assert listed["ntfs"] == list(opts) and listed["ext4"] == []
    # Each is a valid subject as written (`ntfs:windows_names`, `ntfs:iocharset=utf8`).
    for opt in opts:
        spec = parse_subject("ntfs:" + (opt + "utf8" if opt.endswith("=") else opt))
        assert spec.driver.name == "ntfs" and spec.options
