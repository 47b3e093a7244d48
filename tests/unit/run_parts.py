"""Parts of the synthetic runs the report's tests build: a subject by its id (driver, format
and kind as the lab would record them), and fsbench run as a command the way a user runs it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from fsbench.records.schema import Subject

# driver -> (on-disk format, kind); a driver not listed is a kernel driver of its own format.
_DRIVERS = {
    "ntfs-3g": ("ntfs", "fuse"),
    "lowntfs-3g": ("ntfs", "fuse"),
    "fuse2fs": ("ext4", "fuse"),
    "exfat-fuse": ("exfat", "fuse"),
    "ntfs3": ("ntfs", "kernel"),
}


def subject(sid: str, **fields: Any) -> Subject:
    """Subject 'ntfs-3g' or 'fuse2fs:ro' with its driver, format and kind filled in."""
    driver = sid.split(":", 1)[0]
    fs, kind = _DRIVERS.get(driver, (driver, "kernel"))
    return Subject(id=sid, driver=driver, fs=fs, kind=kind, **fields)


def fsbench_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`fsbench ARGS` in a child process (stdin closed), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "fsbench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
