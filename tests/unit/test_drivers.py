"""Driver availability on canned machines: the kernel's file systems and module tree, /dev/fuse
and the binaries are a tree the test builds, so every verdict below is a fact of that tree."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from fsbench.lab.drivers import DRIVERS, availability
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


def test_fuse_drivers_need_their_binary_and_dev_fuse(machine, tmp_path: Path) -> None:
    fs, path = machine
    assert availability(DRIVERS["ntfs-3g"], fs, path).available
    missing = availability(DRIVERS["fuse2fs"], fs, path)
    assert missing == missing.__class__(False, "fuse2fs not found; apt-get install fuse2fs")
    (tmp_path / "dev" / "fuse").unlink()
    gone = availability(DRIVERS["ntfs-3g"], fs, path)
    assert (gone.available, gone.reason) == (False, "/dev/fuse is missing; modprobe fuse")


def test_fuse_driver_without_fuse_in_the_kernel(tmp_path: Path) -> None:
    fs, path = _machine(tmp_path, "\text4\n", [], fuse=True, bins=["ntfs-3g"])
    av = availability(DRIVERS["ntfs-3g"], fs, path)
    assert not av.available and "no FUSE support" in av.reason
    assert ProcFS(str(tmp_path)).filesystems(nodev=False) == {"ext4"}
