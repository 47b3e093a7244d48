"""How much of a file or block device sits in the page cache (mincore over an mmap).

System-wide Cached in /proc/meminfo moves with everything else on the machine; the residency of
the one device under test does not, so it is what proves O_DIRECT honoured or not: a FUSE
daemon that reads its device through the page cache fills the device's cache even when the
application asked for O_DIRECT.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

import numpy as np

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_PAGE = mmap.PAGESIZE
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(path: str) -> int | None:
    """Bytes of `path` in the page cache, or None when it cannot be read (no permission)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.lseek(fd, 0, os.SEEK_END)  # block devices report their size here too
        if size == 0:
            return 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            return None
        try:
            vec = np.zeros((size + _PAGE - 1) // _PAGE, dtype=np.uint8)
            if _libc.mincore(addr, size, vec.ctypes.data) != 0:
                return None
            return int(np.count_nonzero(vec & 1)) * _PAGE
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)
