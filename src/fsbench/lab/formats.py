"""On-disk formats as data: how to make one, and the smallest image it accepts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    name: str
    mkfs: tuple[str, ...]  # argv before the device; the device path is appended
    tool: str  # the binary that must exist to format it
    package: str  # the Debian package that provides the tool
    min_size: int  # bytes; smaller images are refused before anything is created

    def command(self, device: str) -> list[str]:
        return [*self.mkfs, device]


MiB = 1024 * 1024


# Options chosen so every format is made the same way each run (reproducible images) and
# without slow steps that do not change the result (mkntfs -Q skips zeroing, -F accepts files).
def _fmt(name: str, argv: str, package: str, min_mib: int) -> Format:
    parts = tuple(argv.split())
    return Format(name, parts, parts[0], package, min_mib * MiB)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        _fmt("ext4", "mkfs.ext4 -q -F -L fsbench", "e2fsprogs", 8),
        _fmt("ext2", "mkfs.ext2 -q -F -L fsbench", "e2fsprogs", 8),
        _fmt("xfs", "mkfs.xfs -q -f -L fsbench", "xfsprogs", 300),
        _fmt("btrfs", "mkfs.btrfs -q -f -L fsbench", "btrfs-progs", 128),
        _fmt("ntfs", "mkntfs -Q -F -q -L fsbench", "ntfs-3g", 8),
        _fmt("exfat", "mkfs.exfat -L fsbench", "exfatprogs", 8),
        _fmt("vfat", "mkfs.vfat -F 32 -n FSBENCH", "dosfstools", 40),
    ]
}
