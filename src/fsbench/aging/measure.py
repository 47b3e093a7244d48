"""What aging did to an image: utilization, file fragmentation (extents per file) and
free-space fragmentation, each from the most direct source the format offers.

- ext4 (and any file system with FIEMAP on its reference mount): FS_IOC_FIEMAP per file on the
  mount; free space from `e2freefrag` on the unmounted device.
- ntfs: FUSE has no FIEMAP, so both come from the unmounted volume itself: each file's $DATA
  runlist decoded from $MFT, and the cluster bitmap ($Bitmap), both read with `ntfscat`.

The per-file extent maps also give the *layout digest*: XXH128 over every file's path (or MFT
record), size and physical extents — what two agings with the same profile and seed must
reproduce even where timestamps make the image bytes differ (docs/aging.md).
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from fsbench.lab.system import run

FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
_HEADER = "=QQIIII"  # fm_start, fm_length, fm_flags, fm_mapped_extents, fm_extent_count, resvd
_EXTENT = "=QQQQQIIII"  # logical, physical, length, reserved64[2], flags, reserved[3]
_HSIZE, _ESIZE = struct.calcsize(_HEADER), struct.calcsize(_EXTENT)
_BATCH = 128
_LAST, _SYNC = 0x1, 0x1  # FIEMAP_EXTENT_LAST, FIEMAP_FLAG_SYNC
MiB = 1024 * 1024

Extents = list[tuple[int, int]]  # (physical byte offset, length), physically adjacent merged


@dataclass
class Layout:
    """Every aged file's extents, keyed by its path or MFT record number."""

    files: dict[str, tuple[int, Extents]] = field(default_factory=dict)  # key -> (size, extents)

    def digest(self) -> str:
        h = xxhash.xxh3_128()
        for key in sorted(self.files):
            size, ext = self.files[key]
            h.update(f"{key}\0{size}\0{ext}\n".encode())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        counts = np.array([len(e) for _, e in self.files.values() if e], dtype=float)
        out: dict[str, Any] = {
            "files": len(self.files),
            "files_without_extents": int(sum(1 for _, e in self.files.values() if not e)),
        }
        if counts.size:
            out |= {
                "extents_per_file_mean": round(float(counts.mean()), 3),
                "extents_per_file_p90": float(np.percentile(counts, 90)),
                "extents_per_file_max": int(counts.max()),
                "fragmented_share": round(float((counts > 1).mean()), 4),
            }
        return out


def _merge(extents: Iterable[tuple[int, int]]) -> Extents:
    out: Extents = []
    for phys, length in extents:
        if out and out[-1][0] + out[-1][1] == phys:
            out[-1] = (out[-1][0], out[-1][1] + length)
        else:
            out.append((phys, length))
    return out


def fiemap(path: str) -> Extents:
    """The file's physical extents (FS_IOC_FIEMAP, synced first), adjacent ones merged."""
    raw: list[tuple[int, int]] = []
    start = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            buf = bytearray(_HSIZE + _BATCH * _ESIZE)
            struct.pack_into(_HEADER, buf, 0, start, 2**64 - 1 - start, _SYNC, 0, _BATCH, 0)
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            n = struct.unpack_from(_HEADER, buf, 0)[3]
            last = False
            for i in range(n):
                at = _HSIZE + i * _ESIZE
                lg, ph, ln, _r1, _r2, flags, *_ = struct.unpack_from(_EXTENT, buf, at)
                raw.append((ph, ln))
                start = lg + ln
                last = bool(flags & _LAST)
            if n < _BATCH or last:
                break
    finally:
        os.close(fd)
    return _merge(raw)


def layout_by_fiemap(root: str) -> Layout:
    out = Layout()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            p = os.path.join(dirpath, name)
            out.files[os.path.relpath(p, root)] = (os.lstat(p).st_size, fiemap(p))
    return out


# -- free space -----------------------------------------------------------------------------------
def free_summary(runs_bytes: np.ndarray, total_free: int) -> dict[str, Any]:
    """Free-space fragmentation from the free extents' sizes in bytes."""
    if runs_bytes.size == 0:
        return {"free_extents": 0, "free_bytes": 0}
    big = runs_bytes[runs_bytes >= MiB].sum()
    return {
        "free_extents": int(runs_bytes.size),
        "free_bytes": int(total_free),
        "free_extent_mean_bytes": int(runs_bytes.mean()),
        "free_extent_max_bytes": int(runs_bytes.max()),
        "free_in_extents_ge_1mib": round(float(big / max(1, total_free)), 4),
    }


_RANGE = re.compile(r"^\s*(\d+)([KMGT])\.\.\.\s*\S+\s*:\s*(\d+)\s+(\d+)\s+[\d.]+%")
_UNIT = {"K": 1024, "M": MiB, "G": 1024 * MiB, "T": 1024**4}


def parse_e2freefrag(text: str) -> dict[str, Any]:
    """e2freefrag's summary and histogram -> the common free-space record."""
    block = int(re.search(r"Blocksize:\s*(\d+)", text).group(1))  # type: ignore[union-attr]
    free_blocks = int(re.search(r"Free blocks:\s*(\d+)", text).group(1))  # type: ignore[union-attr]
    n = int(re.search(r"Num\. free extent:\s*(\d+)", text).group(1))  # type: ignore[union-attr]
    mx = re.search(r"Max\. free extent:\s*(\d+)\s*KB", text)
    big = 0
    for line in text.splitlines():
        m = _RANGE.match(line)
        if m and int(m.group(1)) * _UNIT[m.group(2)] >= MiB:
            big += int(m.group(4))
    free = free_blocks * block
    return {
        "free_extents": n,
        "free_bytes": free,
        "free_extent_mean_bytes": free // n if n else 0,
        "free_extent_max_bytes": int(mx.group(1)) * 1024 if mx else 0,
        "free_in_extents_ge_1mib": round(big / max(1, free_blocks), 4),
    }


def bitmap_free_runs(bitmap: bytes, clusters: int) -> np.ndarray:
    """Lengths (in clusters) of the runs of clear bits among the first `clusters` bits
    (LSB first, as NTFS's $Bitmap stores them)."""
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")[:clusters]
    free = np.concatenate(([0], (bits == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(free))
    return edges[1::2] - edges[0::2]


# -- NTFS: $MFT runlists and $Bitmap ------------------------------------------------------------
@dataclass(frozen=True)
class NtfsGeometry:
    cluster: int
    record: int
    clusters: int


def ntfs_geometry(boot: bytes) -> NtfsGeometry:
    sector = struct.unpack_from("<H", boot, 0x0B)[0]
    cluster = sector * boot[0x0D]
    total_sectors = struct.unpack_from("<Q", boot, 0x28)[0]
    per = struct.unpack_from("<b", boot, 0x40)[0]
    record = cluster * per if per > 0 else 1 << -per
    return NtfsGeometry(cluster, record, total_sectors * sector // cluster)


def _fixup(rec: bytearray) -> bool:
    """Undo the update sequence (each sector's last two bytes). ntfscat hands $MFT over with
    it already undone, which shows as sector ends that do not carry the sequence number."""
    usa_ofs, usa_count = struct.unpack_from("<HH", rec, 4)
    if usa_ofs + 2 * usa_count > len(rec) or (usa_count - 1) * 512 > len(rec):
        return False
    usn = rec[usa_ofs : usa_ofs + 2]
    if any(rec[i * 512 - 2 : i * 512] != usn for i in range(1, usa_count)):
        return True  # already undone
    for i in range(1, usa_count):
        rec[i * 512 - 2 : i * 512] = rec[usa_ofs + 2 * i : usa_ofs + 2 * i + 2]
    return True


def decode_runlist(data: bytes, off: int) -> list[tuple[int, int]]:
    """Mapping pairs -> [(lcn, length in clusters)]; sparse runs are left out."""
    runs, lcn = [], 0
    while off < len(data) and data[off]:
        head = data[off]
        nl, no = head & 0x0F, head >> 4
        length = int.from_bytes(data[off + 1 : off + 1 + nl], "little")
        if no:
            lcn += int.from_bytes(data[off + 1 + nl : off + 1 + nl + no], "little", signed=True)
            runs.append((lcn, length))
        off += 1 + nl + no
    return runs


FIRST_USER_RECORD = 24  # records 0-23 are the volume's own ($MFT ... reserved)


def parse_mft(mft: bytes, geo: NtfsGeometry) -> Layout:
    """Each user file's unnamed $DATA runlist (extension records folded into their base)."""
    runs: dict[int, list[tuple[int, int, int]]] = {}  # base record -> [(vcn, lcn, len)]
    sizes: dict[int, int] = {}
    for no in range(len(mft) // geo.record):
        rec = bytearray(mft[no * geo.record : (no + 1) * geo.record])
        if rec[:4] != b"FILE" or not _fixup(rec):
            continue
        flags = struct.unpack_from("<H", rec, 0x16)[0]
        base = struct.unpack_from("<Q", rec, 0x20)[0] & 0xFFFFFFFFFFFF
        owner = base or no
        if not flags & 0x1 or flags & 0x2 or owner < FIRST_USER_RECORD:
            continue
        off = struct.unpack_from("<H", rec, 0x14)[0]
        while off + 16 <= len(rec):
            kind, length = struct.unpack_from("<II", rec, off)
            if kind == 0xFFFFFFFF or length == 0:
                break
            if kind == 0x80 and rec[off + 9] == 0:  # unnamed $DATA
                if rec[off + 8]:  # non-resident
                    vcn = struct.unpack_from("<Q", rec, off + 0x10)[0]
                    mp = struct.unpack_from("<H", rec, off + 0x20)[0]
                    if vcn == 0:
                        sizes[owner] = struct.unpack_from("<Q", rec, off + 0x30)[0]
                    pairs = decode_runlist(bytes(rec[off : off + length]), mp)
                    v = vcn
                    for lcn, n in pairs:
                        runs.setdefault(owner, []).append((v, lcn, n))
                        v += n
                else:
                    sizes[owner] = struct.unpack_from("<I", rec, off + 0x10)[0]
                    runs.setdefault(owner, [])
            off += length
    out = Layout()
    for owner, rs in runs.items():
        ext = _merge((lcn * geo.cluster, n * geo.cluster) for _v, lcn, n in sorted(rs))
        out.files[f"mft{owner}"] = (sizes.get(owner, 0), ext)
    return out


def _ntfscat(device: str, inode: int) -> bytes:
    proc = subprocess.run(
        ["ntfscat", "-f", "-i", str(inode), device], capture_output=True, timeout=300
    )
    if proc.returncode != 0:
        raise OSError(f"ntfscat -i {inode} {device}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def _ntfs_geometry_of(device: str) -> NtfsGeometry:
    with open(device, "rb") as f:
        return ntfs_geometry(f.read(512))


def ntfs_layout(device: str) -> Layout:
    """Each user file's runlist from $MFT (record 0), on the unmounted volume."""
    return parse_mft(_ntfscat(device, 0), _ntfs_geometry_of(device))


def ntfs_free(device: str) -> dict[str, Any]:
    """Free runs from the cluster bitmap ($Bitmap, record 6), on the unmounted volume."""
    geo = _ntfs_geometry_of(device)
    runs = bitmap_free_runs(_ntfscat(device, 6), geo.clusters) * geo.cluster
    return free_summary(runs, int(runs.sum()))


_FREESP_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s*$")


def parse_xfs_freesp(text: str, block: int = 4096) -> dict[str, Any]:
    """xfs_db's `freesp -s` histogram (sizes in fs blocks) -> the common free-space record.

    The histogram has no exact maximum; its largest row's upper bound stands in for it.
    """
    bs = re.search(r"^blocksize = (\d+)", text, re.M)
    block = int(bs.group(1)) if bs else block
    n = int(re.search(r"total free extents\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    free_blocks = int(re.search(r"total free blocks\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    big = top = 0
    for line in text.splitlines():
        m = _FREESP_ROW.match(line)
        if not m:
            continue
        lo, hi, blocks = int(m.group(1)), int(m.group(2)), int(m.group(4))
        top = max(top, hi)
        if lo * block >= MiB:
            big += blocks
    free = free_blocks * block
    return {
        "free_extents": n,
        "free_bytes": free,
        "free_extent_mean_bytes": free // n if n else 0,
        "free_extent_max_bytes": top * block,
        "free_in_extents_ge_1mib": round(big / max(1, free_blocks), 4),
    }


def e2_free(device: str) -> dict[str, Any]:
    return parse_e2freefrag(run(["e2freefrag", device], timeout=300).stdout)


def xfs_free(device: str) -> dict[str, Any]:
    """Read-only, on the unmounted device: the block size and the free-extent histogram."""
    cmd = ["xfs_db", "-r", "-c", "sb 0", "-c", "p blocksize", "-c", "freesp -s", device]
    return parse_xfs_freesp(run(cmd, timeout=300).stdout)


# -- the tree aging left --------------------------------------------------------------------------
def record_tree(root: str) -> dict[str, Any]:
    """Every directory and file the aging left under root, for the workloads that read them
    (workloads/agedtree.py): files in walk order with their size and XXH3-128 (read on the
    reference mount, so every driver's reads are checked against the reference's)."""
    from fsbench._xxhtree import hash_files
    from fsbench.treehash.manifest import default_threads, walk_tree

    paths, errors = walk_tree(root)
    if errors:
        raise OSError(errors[0][1], f"listing the aged tree: {os.strerror(errors[0][1])}")
    files = []
    for p, (dig, size, err) in zip(paths, hash_files(paths, default_threads()), strict=True):
        if err:
            raise OSError(err, f"reading {p}: {os.strerror(err)}")
        files.append([os.path.relpath(p, root), size, dig])
    dirs = sorted(
        os.path.relpath(os.path.join(d, s), root) for d, subs, _ in os.walk(root) for s in subs
    )
    return {"dirs": dirs, "files": files}
