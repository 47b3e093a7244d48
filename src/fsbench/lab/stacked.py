"""Mounting a driver that serves a directory (the FUSE floor, `Driver.lower`): the image is
mounted by the kernel driver first, at `<mount point>.lower` beside the subject's own mount
point (under the run's mount directory, so `release` finds both and unmounts the daemon's
first), and the daemon exports that directory. Unmounting takes both down, so a cold read's
remount drops the kernel file system's caches as well as the daemon's."""

from __future__ import annotations

import contextlib
import os

from fsbench.errors import LabError
from fsbench.lab import mounts
from fsbench.lab.drivers import DRIVERS, Driver, serving_proof


def lower_dir(mountpoint: str) -> str:
    return mountpoint.rstrip("/") + ".lower"


def mount(
    driver: Driver, device: str, mountpoint: str, options: str, transport: str = ""
) -> mounts.MountEntry:
    """Mount `driver` on `mountpoint` (its lower file system first when it has one); a mount
    some other driver serves is undone and refused (drivers.serving_proof)."""
    if not driver.lower:
        entry = mounts.mount(driver.mount_argv(device, mountpoint, options, transport), mountpoint)
        try:
            serving_proof(driver, entry.fstype)
        except ValueError as e:
            with contextlib.suppress(LabError):
                mounts.unmount(mountpoint, [])
            raise LabError(f"{driver.name}: {e}") from None
        return entry
    lower = DRIVERS[driver.lower]
    where = lower_dir(mountpoint)
    os.makedirs(where, exist_ok=True)
    read_only = "ro" in options.split(",")
    mounts.mount(lower.mount_argv(device, where, "ro" if read_only else ""), where)
    try:
        return mounts.mount(driver.mount_argv(where, mountpoint, options, transport), mountpoint)
    except LabError:
        with contextlib.suppress(LabError):
            mounts.unmount(where, [])
        raise


def unmount(
    driver: Driver, mountpoint: str, daemon_pids: list[int], timeout: float = 30.0
) -> list[str]:
    notes = mounts.unmount(mountpoint, daemon_pids, timeout=timeout)
    if driver.lower and mounts.find_mount(lower_dir(mountpoint)) is not None:
        notes += mounts.unmount(lower_dir(mountpoint), [], timeout=timeout)
    return notes
