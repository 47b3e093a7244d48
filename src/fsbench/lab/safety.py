"""Never be the thing that loses data: what is on a device, and whether it is in use.

A device that carries a file system or partition table is formatted only with --destroy-data;
a device in use (mounted, a partition of it mounted, swap, held by device-mapper) is refused
always.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from fsbench.errors import UsageError
from fsbench.lab.mounts import mountinfo
from fsbench.lab.system import run
from fsbench.probes.procfs import ProcFS


@dataclass
class DeviceInfo:
    path: str
    name: str  # kernel name: sdb1, loop3
    fstype: str | None = None
    label: str | None = None
    pttype: str | None = None  # a partition table
    in_use: list[str] = field(default_factory=list)  # why it is busy

    @property
    def signature(self) -> str | None:
        if self.fstype:
            label = f" labelled {self.label!r}" if self.label else ""
            article = "an" if self.fstype[0] in "aeiouxn" else "a"  # an ntfs, an xfs, an ext4
            return f"{article} {self.fstype} file system{label}"
        if self.pttype:
            return f"a {self.pttype} partition table"
        return None


def _blkid(path: str) -> dict[str, str]:
    # -p: probe the device itself, not blkid's cache, so a fresh signature is never missed.
    proc = run(["blkid", "-p", "-o", "export", path], check=False, timeout=30)
    out = {}
    for line in proc.stdout.splitlines():
        k, _, v = line.partition("=")
        if k:
            out[k] = v
    return out


def _related(name: str) -> set[str]:
    """The device, its partitions, and (for a partition) its parent disk."""
    fs = ProcFS()
    names = {name}
    names |= {
        os.path.basename(p)
        for p in fs.glob(f"sys/class/block/{name}/{name}*")
        if fs.exists(f"{p}/partition")
    }
    if fs.exists(f"sys/class/block/{name}/partition"):
        names.add(Path(os.path.realpath(fs.path(f"sys/class/block/{name}"))).parent.name)
    return names


def _dev_numbers(names: set[str]) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out["{}:{}".format(*ProcFS().block_dev(n))] = n
        except (OSError, ValueError):
            continue
    return out


def inspect(path: str) -> DeviceInfo:
    real = os.path.realpath(path)
    info = DeviceInfo(path=path, name=Path(real).name)
    probe = _blkid(real)
    info.fstype, info.label, info.pttype = (
        probe.get("TYPE"),
        probe.get("LABEL"),
        probe.get("PTTYPE"),
    )
    names = _related(info.name)
    numbers = _dev_numbers(names)
    for e in mountinfo():
        if e.major_minor in numbers:
            info.in_use.append(f"/dev/{numbers[e.major_minor]} is mounted on {e.mountpoint}")
        elif os.path.realpath(e.source) in {f"/dev/{n}" for n in names}:
            info.in_use.append(f"{e.source} is mounted on {e.mountpoint}")
    try:
        swaps = ProcFS().read("proc/swaps").splitlines()[1:]
    except OSError:
        swaps = []
    for line in swaps:
        dev = os.path.realpath(line.split()[0])
        if Path(dev).name in names:
            info.in_use.append(f"{dev} is in use as swap")
    for n in names:
        holders = [os.path.basename(h) for h in ProcFS().glob(f"sys/class/block/{n}/holders/*")]
        if holders:
            info.in_use.append(f"/dev/{n} is held by {', '.join(holders)}")
    return info


def check_for_format(path: str, destroy_data: bool) -> DeviceInfo:
    """Refuse to format a busy device, or one with data unless --destroy-data was given."""
    info = inspect(path)
    if info.in_use:
        raise UsageError(
            f"refusing to use {path}: {info.in_use[0]}; fsbench never touches a device in use"
        )
    if info.signature and not destroy_data:
        raise UsageError(
            f"{path} holds {info.signature}; benchmarking would format it and destroy its data. "
            f"Add --destroy-data to allow that, or --read-only to benchmark it as it is"
        )
    return info


def check_for_read_only(path: str, formats: set[str]) -> DeviceInfo:
    """A read-only benchmark needs an unmounted device whose format the subjects read."""
    info = inspect(path)
    if info.in_use:
        raise UsageError(f"refusing to use {path}: {info.in_use[0]}; unmount it first")
    if not info.fstype:
        raise UsageError(f"{path} holds no file system that blkid recognises; nothing to read")
    fs = {
        "ntfs": "ntfs",
        "ext4": "ext4",
        "ext3": "ext4",
        "ext2": "ext2",
        "xfs": "xfs",
        "btrfs": "btrfs",
        "exfat": "exfat",
        "vfat": "vfat",
    }.get(info.fstype, info.fstype)
    wrong = formats - {fs}
    if wrong:
        raise UsageError(
            f"{path} holds {info.signature}, but subjects read {', '.join(sorted(wrong))}; "
            f"choose drivers for {fs}"
        )
    return info
