"""What a mounted file system really does, probed on it rather than assumed from the driver
record: O_DIRECT, fallocate, FIEMAP, SEEK_HOLE/SEEK_DATA, reflink, copy_file_range, user
extended attributes, POSIX permissions, case sensitivity, sparse files, name length and file
size limits.

Each probe is a few system calls on small files in a scratch directory that is removed
afterwards (Python's os/fcntl and the libc wrappers that do not emulate: glibc's
posix_fallocate writes zeros where the file system has no fallocate, `fallocate(2)` does not).
The answers are `Feature` records in a fixed order, for results.json and every renderer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import shutil
import struct
import time
from collections.abc import Callable
from typing import Any

from fsbench.probes.pagecache import resident_bytes
from fsbench.probes.procfs import ProcFS
from fsbench.records.schema import FEATURES, Feature

KiB = 1024
MiB = 1024 * KiB
PROBE_DIR = ".fsbench-semantics"

# ioctl numbers from <linux/fs.h>: _IOWR('f', 11, struct fiemap) and _IOW(0x94, 9, int).
FS_IOC_FIEMAP = 0xC020660B
FICLONE = 0x40049409
_FIEMAP_HEADER = "=QQIIII"  # fm_start, fm_length, fm_flags, fm_mapped_extents, count, reserved

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
_NOT_SUPPORTED = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.ENOTTY, errno.EINVAL}


def _err(e: OSError) -> str:
    return errno.errorcode.get(e.errno or 0, str(e.errno))


def _refused(e: OSError, what: str) -> Feature:
    if e.errno in _NOT_SUPPORTED or e.errno in (errno.EXDEV, errno.EPERM):
        return Feature(supported=False, detail=f"{what}: {_err(e)}")
    return Feature(supported=None, detail=f"{what} failed: {_err(e)} ({e.strerror})")


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def probe_fallocate(d: str) -> Feature:
    path = os.path.join(d, "fallocate")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _libc.fallocate(fd, 0, 0, MiB) != 0:
            e = ctypes.get_errno()
            return _refused(OSError(e, os.strerror(e)), "fallocate(1 MiB)")
        size = os.fstat(fd).st_size
        return Feature(supported=True, detail=f"fallocate(1 MiB) gave a {size} B file")
    finally:
        os.close(fd)


def probe_fiemap(d: str) -> Feature:
    path = os.path.join(d, "fiemap")
    _write_file(path, b"x" * (64 * KiB))
    buf = bytearray(struct.pack(_FIEMAP_HEADER, 0, 2**64 - 1, 1, 0, 0, 0))  # FIEMAP_FLAG_SYNC
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    except OSError as e:
        return _refused(e, "FS_IOC_FIEMAP")
    finally:
        os.close(fd)
    extents = struct.unpack(_FIEMAP_HEADER, bytes(buf))[3]
    return Feature(supported=True, detail=f"{extents} extent(s) mapped for 64 KiB")


def probe_sparse(d: str, fs_bytes: int) -> tuple[Feature, Feature]:
    """Sparse files (a size past the free space costs no blocks) and SEEK_HOLE/SEEK_DATA."""
    path = os.path.join(d, "sparse")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    size = max(2 * fs_bytes, 64 * MiB)
    try:
        try:
            os.write(fd, b"d" * (4 * KiB))
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError as e:
            # Without sparse files the size must be allocated: more than the volume holds.
            sparse = Feature(
                supported=False,
                detail=f"extending to {size // MiB} MiB (twice the volume): {_err(e)}",
            )
            return sparse, _seek_hole(fd, 4 * KiB, sparse_ok=False)
        used = os.fstat(fd).st_blocks * 512
        sparse = Feature(
            supported=used < size // 4,
            detail=f"{size // MiB} MiB file (twice the volume) uses {used // KiB} KiB",
        )
        return sparse, _seek_hole(fd, size, sparse_ok=bool(sparse.supported))
    finally:
        os.close(fd)


def _seek_hole(fd: int, size: int, sparse_ok: bool) -> Feature:
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
        data = os.lseek(fd, 0, os.SEEK_DATA)
    except OSError as e:
        return _refused(e, "lseek(SEEK_HOLE)")
    if hole < size:
        return Feature(supported=True, detail=f"first hole at {hole} B, data at {data} B")
    why = "" if sparse_ok else " (no sparse files)"
    # The kernel's generic answer: the whole file is data, the only hole is at its end.
    return Feature(supported=False, detail=f"accepted, reports no holes{why}")


def probe_clone(d: str) -> tuple[Feature, Feature]:
    src, dst, dst2 = (os.path.join(d, n) for n in ("clone-src", "clone-dst", "cfr-dst"))
    data = os.urandom(64 * KiB)
    _write_file(src, data)
    s = os.open(src, os.O_RDONLY)
    t = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        fcntl.ioctl(t, FICLONE, s)
        reflink = Feature(supported=True, detail="FICLONE shared 64 KiB")
    except OSError as e:
        reflink = _refused(e, "FICLONE")
    finally:
        os.close(t)
    t = os.open(dst2, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n = os.copy_file_range(s, t, len(data), 0, 0)
        os.lseek(t, 0, os.SEEK_SET)
        ok = n == len(data) and os.read(t, len(data)) == data
        differs = "" if ok else ", content differs"
        cfr = Feature(supported=ok, detail=f"copied {n} of {len(data)} B{differs}")
    except OSError as e:
        cfr = _refused(e, "copy_file_range")
    finally:
        os.close(t)
        os.close(s)
    return reflink, cfr


def probe_xattr(d: str) -> Feature:
    path = os.path.join(d, "xattr")
    _write_file(path, b"x")
    try:
        os.setxattr(path, "user.fsbench", b"probe")
        got = os.getxattr(path, "user.fsbench")
    except OSError as e:
        return _refused(e, "setxattr(user.fsbench)")
    if got != b"probe":
        return Feature(supported=False, detail=f"set 'probe', read back {got!r}")
    return Feature(supported=True, detail="user.fsbench set and read back")


def probe_chmod(d: str) -> Feature:
    path = os.path.join(d, "chmod")
    _write_file(path, b"x")
    seen = []
    for mode in (0o600, 0o640):
        try:
            os.chmod(path, mode)
        except OSError as e:
            return _refused(e, f"chmod {mode:04o}")
        seen.append(os.stat(path).st_mode & 0o7777)
    if seen == [0o600, 0o640]:
        return Feature(supported=True, detail="chmod 0600 then 0640 both took")
    return Feature(
        supported=False,
        detail=f"chmod accepted, the file system ignores it (asked 0600, 0640; mode stayed "
        f"{', '.join(f'{m:04o}' for m in seen)})",
    )


def probe_case(d: str) -> Feature:
    path = os.path.join(d, "CaseProbe")
    _write_file(path, b"x")
    if os.path.exists(os.path.join(d, "caseprobe")):
        return Feature(supported=False, detail="'caseprobe' finds 'CaseProbe'")
    return Feature(supported=True, detail="'caseprobe' does not find 'CaseProbe'")


def probe_name_max(d: str) -> Feature:
    """statvfs's f_namemax, confirmed by creating a name that long. No longer name is tried:
    fuse2fs 1.47.0 answers one with ENOENT and writes a zero-length directory entry that
    e2fsck then reports as damage (the probe must not damage what it probes)."""
    namemax = os.statvfs(d).f_namemax
    limit = min(namemax, 1024)
    try:
        _write_file(os.path.join(d, "n" * limit), b"")
    except OSError as e:
        return Feature(
            supported=None,
            value=namemax,
            detail=f"statvfs says {namemax}; a {limit}-byte name: {_err(e)}",
        )
    return Feature(supported=True, value=namemax, detail=f"statvfs; a {limit}-byte name created")


def probe_max_file_size(d: str, sparse: bool, deadline_s: float = 5.0) -> Feature:
    """The largest size ftruncate accepts, by bisection (to 4 KiB): cheap only where files can
    be sparse, so elsewhere it is not probed."""
    if not sparse:
        return Feature(supported=None, detail="not probed: no sparse files (would allocate)")
    path = os.path.join(d, "maxsize")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.monotonic()

    def fits(n: int) -> bool:
        try:
            os.ftruncate(fd, n)
            return True
        except OSError:
            return False

    try:
        lo, hi = 4 * KiB, 2**63 - 1
        if fits(hi):
            return Feature(supported=True, value=hi, detail="ftruncate to 2^63-1 B accepted")
        if not fits(lo):
            return Feature(supported=None, detail="ftruncate to 4 KiB refused")
        while hi - lo > 4 * KiB and time.monotonic() - t0 < deadline_s:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        os.ftruncate(fd, 0)
        return Feature(supported=True, value=lo, detail=f"ftruncate accepts {lo} B, not {hi} B")
    finally:
        os.close(fd)


def probe_o_direct(d: str, device_cache: Callable[[], int | None]) -> Feature:
    """Write 4 MiB with O_DIRECT and watch the device's page cache: a driver whose daemon
    writes its device through the cache (ntfs-3g) accepts O_DIRECT but fills it."""
    path = os.path.join(d, "odirect")
    n = 4 * MiB
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    except OSError as e:
        return _refused(e, "open(O_DIRECT)")
    buf = mmap.mmap(-1, n)  # page-aligned, as O_DIRECT wants
    buf.write(b"\xa5" * n)
    try:
        before = device_cache()
        try:
            written = os.write(fd, buf)
            os.fsync(fd)
        except OSError as e:
            return _refused(e, "O_DIRECT write")
        after = device_cache()
    finally:
        os.close(fd)
        buf.close()
    if before is None or after is None:
        return Feature(supported=None, detail="O_DIRECT accepted; device cache not readable")
    growth = after - before
    if growth > n // 2:
        return Feature(
            supported=False,
            detail=f"accepted, but the device's page cache grew {growth // KiB} KiB for "
            f"{written // KiB} KiB written",
        )
    grew = f"device cache grew {growth // KiB} KiB"
    return Feature(supported=True, detail=f"{written // KiB} KiB written, {grew}")


def probe(
    root: str, device_cache: Callable[[], int | None], read_only: bool = False
) -> dict[str, Feature]:
    """Every feature of the file system `root` lives on; files go in a scratch directory."""
    out: dict[str, Feature] = {}
    if read_only:
        st = os.statvfs(root)
        skip = Feature(supported=None, detail="not probed: mounted read-only")
        out = {k: skip for k in FEATURES}
        out["name_max"] = Feature(value=st.f_namemax, detail="from statvfs (read-only)")
        return out
    d = os.path.join(root, PROBE_DIR)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)  # and root, for a directory target's scratch directory
    st = os.statvfs(d)
    try:
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("o_direct", lambda: probe_o_direct(d, device_cache)),
            ("fallocate", lambda: probe_fallocate(d)),
            ("fiemap", lambda: probe_fiemap(d)),
            ("sparse_files", lambda: probe_sparse(d, st.f_blocks * st.f_frsize)),
            ("reflink", lambda: probe_clone(d)),
            ("xattr_user", lambda: probe_xattr(d)),
            ("posix_permissions", lambda: probe_chmod(d)),
            ("case_sensitive", lambda: probe_case(d)),
            ("name_max", lambda: probe_name_max(d)),
        ]
        for key, fn in steps:
            try:
                got = fn()
            except OSError as e:
                got = Feature(supported=None, detail=f"probe failed: {_err(e)} ({e.strerror})")
            if key == "sparse_files" and isinstance(got, tuple):
                out["sparse_files"], out["seek_hole"] = got
            elif key == "reflink" and isinstance(got, tuple):
                out["reflink"], out["copy_file_range"] = got
            elif isinstance(got, tuple):
                out[key] = got[0]
            else:
                out[key] = got
        try:
            out["max_file_size"] = probe_max_file_size(
                d, bool(out.get("sparse_files", Feature()).supported)
            )
        except OSError as e:
            out["max_file_size"] = Feature(supported=None, detail=f"probe failed: {_err(e)}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {k: out.get(k, Feature(detail="not probed")) for k in FEATURES}


def o_direct_measured(results: list[Any], subject: str) -> Feature | None:
    """What the run's own O_DIRECT samples proved (merge.verify_cache), if it had any."""
    for res in results:
        if res.subject != subject or res.status != "ok":
            continue
        if res.cache == "direct":
            return Feature(supported=True, detail=f"measured by {res.workload}: direct verified")
        if res.cache == "direct-not-honored":
            return Feature(
                supported=False, detail=f"measured by {res.workload}: the device's cache filled"
            )
    return None


def prove_o_direct(subjects: list[Any], results: list[Any]) -> None:
    """Each subject's O_DIRECT as the run's own samples proved it, over what was probed at
    mount time (a probe writes a few blocks; the samples wrote the workloads')."""
    for rec in subjects:
        measured = o_direct_measured(results, rec.id)
        if rec.semantics is not None and measured is not None:
            rec.semantics["o_direct"] = measured


def capabilities(semantics: dict[str, Feature] | None, defaults: dict[str, Any]) -> dict[str, Any]:
    """The capabilities workloads read (metadata's chmod), from the probes where they answered."""
    caps = dict(defaults)
    if semantics:
        chmod = semantics.get("posix_permissions")
        if chmod is not None and chmod.supported is not None:
            caps["posix_permissions"] = chmod.supported
            caps["posix_permissions_detail"] = chmod.detail
    return caps


# Residency is read with mincore, one byte per page: bound the vector for huge real devices.
_MAX_RESIDENCY_DEVICE = 64 * 2**30


def device_cache_of(block_device: str | None) -> Callable[[], int | None]:
    """Bytes of the device (`loop3`) in the page cache, as a callable (None: cannot tell)."""

    def read() -> int | None:
        if not block_device:
            return None
        try:
            if ProcFS().block_bytes(block_device) > _MAX_RESIDENCY_DEVICE:
                return None
        except (OSError, ValueError):
            return None
        return resident_bytes(f"/dev/{block_device}")

    return read


def probe_semantics(
    root: str, block_device: str | None, read_only: bool = False
) -> dict[str, Feature]:
    """`probe`, never raising: a volume that refuses even a scratch directory says so."""
    try:
        return probe(root, device_cache_of(block_device), read_only)
    except OSError as e:
        why = Feature(supported=None, detail=f"not probed: {_err(e)} ({e.strerror})")
        return dict.fromkeys(FEATURES, why)
