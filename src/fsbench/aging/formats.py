"""The formats `--age` can age, one record each: how an image is made with fixed bytes, the
reference mount's options, and how layout and free space are read after aging.

Adding a format to `--age` is adding its record here (and its free-space reader to
aging/measure.py when the format has none yet).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsbench.aging import measure
from fsbench.lab.system import run


@dataclass(frozen=True)
class AgedFormat:
    """How a format is made reproducibly, aged and probed after aging."""

    mkfs: tuple[str, ...]  # the device is appended
    tools: tuple[str, ...]  # whose versions enter the cache key
    free_space: Callable[[str], dict[str, Any]]  # the unmounted device -> free-space record
    # Given to the reference driver (the kernel's) so the layout is made the same each time.
    mount_options: str = ""
    # After mkfs, on the device: fixes what mkfs leaves varying (times, ids) it has no flag for.
    settle: Callable[[str], None] | None = None
    # The unmounted device -> every file's extents; None: FIEMAP on the reference mount.
    layout: Callable[[str], measure.Layout] | None = None


def xfs_zero_times(device: str) -> None:
    """mkfs.xfs stamps its own inodes (root, realtime bitmap and summary) with the time and
    has no flag to fix it; two images otherwise differ in those inodes' times and CRCs (39
    bytes within one second, 48 across seconds). Zero the times; xfs_db recomputes the CRCs."""
    out = run(["xfs_db", "-r", "-c", "sb 0", "-c", "p rootino rbmino rsumino", device]).stdout
    inodes = re.findall(r"^\w+ = (\d+)$", out, re.M)
    if len(inodes) != 3:
        raise OSError(f"xfs_db did not name the root and realtime inodes of {device}: {out!r}")
    argv = ["xfs_db", "-x"]
    for ino in inodes:
        argv += ["-c", f"inode {ino}"]
        for ts in ("core.atime", "core.mtime", "core.ctime", "v3.crtime"):
            argv += ["-c", f"write {ts}.sec 0", "-c", f"write {ts}.nsec 0"]
    run([*argv, device])


_UUID = "6c1b2a36-0000-4000-8000-000000000001"  # fixed: two agings share every mkfs byte
_HASH_SEED = "6c1b2a36-0000-4000-8000-000000000002"
AGED_FORMATS: dict[str, AgedFormat] = {
    # E2FSPROGS_FAKE_TIME fixes mkfs's timestamps; -U and hash_seed its random ids; inode
    # tables and journal zeroed now, not by a kernel thread while the image is aged.
    # Mounted with blocks allocated in write() by the (pinned) writer, not by writeback
    # whenever and wherever it runs (nodelalloc; nodioread_nolock: written, not unwritten
    # extents converted at I/O completion), and no periodic journal commit (commit=3600): the
    # workload commits every SYNC_EVERY operations, so freed blocks become reusable at fixed
    # points.
    "ext4": AgedFormat(
        (
            "env", "E2FSPROGS_FAKE_TIME=1", "mkfs.ext4", "-q", "-F", "-L", "fsbench", "-U", _UUID,
            "-E", f"hash_seed={_HASH_SEED},lazy_itable_init=0,lazy_journal_init=0,nodiscard",
        ),
        ("mkfs.ext4",),  # e2freefrag has no version flag: it is e2fsprogs, like mkfs.ext4
        measure.e2_free,
        mount_options="nodelalloc,nodioread_nolock,commit=3600",
    ),
    # -m uuid fixes the ids; the times mkfs writes are zeroed after it (xfs_zero_times).
    "xfs": AgedFormat(
        ("mkfs.xfs", "-q", "-f", "-L", "fsbench", "-m", f"uuid={_UUID}"),
        ("mkfs.xfs", "xfs_db"),
        measure.xfs_free,
        settle=xfs_zero_times,
    ),
    # -T: time zero, which also makes mkntfs's serial number and GUIDs fixed (checked here:
    # two images were byte-identical). FUSE has no FIEMAP: the layout is read from $MFT.
    "ntfs": AgedFormat(
        ("mkntfs", "-Q", "-F", "-q", "-T", "-L", "fsbench"),
        ("mkntfs", "ntfscat"),
        measure.ntfs_free,
        layout=measure.ntfs_layout,
    ),
}  # fmt: skip


def supported() -> str:
    return ", ".join(AGED_FORMATS)
