"""Where images live: `ram` (default), `file:DIR`, `device:PATH`, or `dir:PATH` (no lab at all),
and how they are laid there: every byte of each image written before anything is measured, so
no sample pays for the memory or blocks an image receives (ram: first-touch of pages; a disk:
the host allocating blocks), and images made together are dealt them alike."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from fsbench.errors import UsageError
from fsbench.units import size_text

_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
# ASCII digits only; "iB"/"B" only after a unit letter ("1G", "1GiB", "1GB"; not "1b").
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?)?\s*$", re.IGNORECASE | re.ASCII)


def parse_size(text: str) -> int:
    """'512M', '1G', '1.5GiB', '4096' -> bytes (binary units, as dd and fio use)."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise UsageError(f"bad size {text!r}; write a number with K, M, G or T, e.g. 1G")
    value = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if value <= 0:
        raise UsageError(f"bad size {text!r}: must be more than zero")
    return value


format_size = size_text  # one size formatter for everything (fsbench.units)


@dataclass(frozen=True)
class Backing:
    kind: str  # ram | file | device | dir
    path: str | None = None

    def describe(self) -> str:
        return self.kind if self.path is None else f"{self.kind}:{self.path}"

    @property
    def note(self) -> str:
        return {
            "ram": "images are files in /dev/shm attached through loop devices: the 'device' is "
            "a loop over memory, so results show driver and CPU cost, not disk speed",
            "file": "images are files on the file system holding them, written in full, "
            "attached through loop devices with direct I/O (not cached twice) and dealt out to "
            "the subjects again before every round, each written afresh from its pristine image "
            "(where an image lies varies inside every interval): results include that file "
            "system and its disk",
            "device": "a real block device (formatted, or with --read-only mounted read-only "
            "through a read-only loop device and checked for writes)",
            "dir": "an existing directory: nothing was formatted or mounted by fsbench",
        }[self.kind]


def parse_backing(text: str) -> Backing:
    kind, sep, path = text.partition(":")
    if kind == "ram" and not sep:
        return Backing("ram")
    if kind in ("file", "device", "dir") and sep and path:
        p = Path(path)
        if kind == "file" and not p.is_dir():
            raise UsageError(f"file:{path}: not a directory; give a directory to hold the images")
        if kind == "dir" and not p.is_dir():
            raise UsageError(f"dir:{path}: not a directory")
        if kind == "device" and not p.is_block_device():
            raise UsageError(f"device:{path}: not a block device")
        return Backing(kind, str(p.resolve()))
    raise UsageError(f"bad backing {text!r}; use ram, file:DIR, device:/dev/X or dir:PATH")


# -- laying images on their backing -------------------------------------------------------
_CHUNK = 8 * 1024 * 1024


def fill_zeros(path: Path, size: int) -> None:
    """Write the whole image once: first-touch of RAM pages is slow and erratic on these
    machines, so a sparse image in /dev/shm would measure the allocator, not the driver."""
    fill_interleaved([path], size)


def fill_interleaved(paths: list[Path], size: int) -> None:
    """Write zeros over every image a chunk of each at a time, so the memory the allocator
    hands out is dealt to all images alike: RAM is not uniform on these VMs, and an image
    written whole first reads slower for as long as it lives (docs/internals.md#measurements)."""
    buf = bytes(_CHUNK)
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) for p in paths]
    try:
        off = 0
        while off < size:
            n = min(_CHUNK, size - off)
            for fd in fds:
                os.pwrite(fd, buf[:n] if n < _CHUNK else buf, off)
            off += n
    finally:
        for fd in fds:
            os.close(fd)


def settle(image: Path | str) -> None:
    """A disk-backed image written back and dropped from the host's page cache: every image
    starts a run alike (none of the copy's writeback left to land in a sample), and a cold
    read of a loop over it reads the disk (lab/cold.py)."""
    fd = os.open(image, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def copy_over(src: Path, dst: Path) -> None:
    """Copy src into dst's pages without truncating it (cp would free them and allocate anew),
    so a RAM image keeps the memory fill_interleaved dealt it."""
    with open(src, "rb") as f, open(dst, "r+b") as g:
        while chunk := f.read(_CHUNK):
            g.write(chunk)
