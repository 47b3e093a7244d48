"""Cold caches, two ways, both checked afterwards by the device's read counter (schedule/merge.py).

- **evict** (the default where it fits): the workload's files written back and dropped from
  the page cache (fdatasync, POSIX_FADV_DONTNEED), the block device's buffers flushed and
  invalidated (BLKFLSBUF), and, when the loop's backing file lives on a disk rather than in
  RAM, that file's pages too. It touches only the subject's own files and device.
- **full**: a global sync, for a journalled kernel file system a freeze and thaw (so its
  metadata blocks can go too), drop_caches, and for FUSE a remount (the daemon's own caches).

The full method cost ~55 % of an ext4 default run's measuring time around a 0.1 s read; the
eviction costs milliseconds. It leaves metadata the journal pins and a FUSE daemon's own
caches (inodes, runlists) in place, so it serves workloads that read a few large files,
where the data is what the device must deliver; a workdir of many files (tree hash, metadata,
small-file copy) gets the full method, and so does any subject and workload whose evicted read
failed the counter check (the sampler remembers it and says so in the sample's extra).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fsbench.errors import EnvironmentProblem
from fsbench.lab.backing import settle
from fsbench.lab.mounts import mountinfo
from fsbench.probes.pagecache import resident_bytes
from fsbench.probes.procfs import ProcFS

BLKFLSBUF = 0x1261  # <linux/fs.h>: write back and invalidate a block device's buffers
# More files than this under the workdir: their metadata is part of what a cold read costs,
# and only the full method empties it (a FUSE daemon's inode cache above all).
MAX_FILES = 64
# File systems whose files are the memory itself: nothing below them to evict.
_IN_MEMORY = ("tmpfs", "ramfs", "devtmpfs")


def workdir_files(workdir: str, limit: int = MAX_FILES) -> list[str] | str:
    """The regular files under `workdir`, or why evicting them one by one does not fit."""
    found: list[str] = []
    for dirpath, _dirs, files in os.walk(workdir):
        for f in files:
            p = os.path.join(dirpath, f)
            with contextlib.suppress(OSError):
                if os.path.isfile(p) and not os.path.islink(p):
                    found.append(p)
            if len(found) > limit:
                return f"more than {limit} files under the workdir: their metadata matters"
    return found


def evict_files(paths: list[str]) -> int:
    """Write back and drop each file's pages; the bytes still resident after (0 when evicted)."""
    left = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue  # removed since the walk: nothing of it to read cold
        try:
            os.fdatasync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left += resident_bytes(p) or 0
    return left


def flush_device(device: str) -> None:
    """BLKFLSBUF: the device's clean buffers invalidated (its file system synced first)."""
    fd = os.open(device, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, BLKFLSBUF)
    finally:
        os.close(fd)


def backing_of(device: str, procfs: ProcFS | None = None) -> str | None:
    """The file (or device) a loop device reads, None when `device` is not a loop."""
    return (procfs or ProcFS()).loop_backing_files().get(Path(device).name)


def in_memory(path: str) -> bool:
    """Whether `path` lives on a file system that is memory (its pages are the data)."""
    best = ""
    fstype = ""
    real = os.path.realpath(path)
    for e in mountinfo():
        mp = e.mountpoint.rstrip("/") or "/"
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, fstype = mp, e.fstype
    return fstype in _IN_MEMORY


def flush_backing(device: str) -> str | None:
    """The loop's backing store's cache dropped too, unless it is RAM; what was flushed."""
    back = backing_of(device)
    if back:
        back = back.removesuffix(" (deleted)")
    if not back or in_memory(back):
        return None
    if Path(back).is_block_device():
        flush_device(back)
        return back
    settle(back)
    return back


def evict(workdir: str, device: str | None) -> str | None:
    """The eviction; None when done, else why it did not make the files cold (then the full
    method is needed)."""
    files = workdir_files(workdir)
    if isinstance(files, str):
        return files
    if not device:
        return "no block device to flush"
    left = evict_files(files)
    try:
        flush_device(device)
        flush_backing(device)
    except OSError as e:
        return f"cannot flush {device}: {e.strerror or e}"
    if left:
        return f"{left} B of the files stayed in the page cache after POSIX_FADV_DONTNEED"
    return None


def drop_caches() -> None:
    os.sync()
    try:
        ProcFS().write("proc/sys/vm/drop_caches", "3\n")
    except OSError as e:
        raise EnvironmentProblem(f"cannot drop caches ({e}); run as root") from e


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them to the handlers that
    were in place. A handler swap, not a signal mask: a mask does not stop another thread from
    taking the signal and the main thread from raising in the middle of the block."""
    pending: list[int] = []
    old: dict[int, object] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, lambda signum, _frame: pending.append(signum))
    except ValueError:  # not the main thread: no handler of ours can interrupt it
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)
