"""On-disk formats as data: how to make one, the smallest image it accepts, and how to check
one read-only (the format's own checker, run on the unmounted image after the workloads)."""

from __future__ import annotations

from dataclasses import dataclass

from fsbench.records.choices import by_name


@dataclass(frozen=True)
class Checker:
    """A read-only consistency check: `argv` + the device; exit 0 means clean."""

    argv: tuple[str, ...]
    version_argv: tuple[str, ...]  # prints the checker's version
    package: str
    covers: str  # what it looks at, said plainly (shown beside its verdict)
    # Progress and banner lines that say nothing about the volume's state.
    noise: tuple[str, ...] = ()

    def command(self, device: str) -> list[str]:
        return [*self.argv, device]


_E2FSCK = Checker(
    ("e2fsck", "-fn"),
    ("e2fsck", "-V"),
    "e2fsprogs",
    "all metadata, forced: superblock, inodes, extent trees, directories, link counts, "
    "bitmaps and group summaries (passes 1-5); not file contents",
    ("e2fsck ", "Pass ", "Using EXT2FS", "/dev/"),
)


@dataclass(frozen=True)
class Format:
    name: str
    mkfs: tuple[str, ...]  # argv before the device; the device path is appended
    tool: str  # the binary that must exist to format it
    package: str  # the Debian package that provides the tool
    min_size: int  # bytes; smaller images are refused before anything is created
    checker: Checker | None = None

    def command(self, device: str) -> list[str]:
        return [*self.mkfs, device]


MiB = 1024 * 1024


# Options chosen so every format is made the same way each run (reproducible images) and
# without slow steps that do not change the result (mkntfs -Q skips zeroing, -F accepts files).
def _fmt(name: str, argv: str, package: str, min_mib: int, checker: Checker | None) -> Format:
    parts = tuple(argv.split())
    return Format(name, parts, parts[0], package, min_mib * MiB, checker)


FORMATS: dict[str, Format] = by_name(
    # Inode tables and journal written now, once in the pristine image: lazily, ext4lazyinit
    # writes ~32 MB in the background for ~2 s after every mount, inside the first samples.
    _fmt(
        "ext4",
        "mkfs.ext4 -q -F -L fsbench -E lazy_itable_init=0,lazy_journal_init=0",
        "e2fsprogs",
        8,
        _E2FSCK,
    ),
    _fmt("ext2", "mkfs.ext2 -q -F -L fsbench", "e2fsprogs", 8, _E2FSCK),
    _fmt(
        "xfs",
        "mkfs.xfs -q -f -L fsbench",
        "xfsprogs",
        300,
        Checker(
            ("xfs_repair", "-n"),
            ("xfs_repair", "-V"),
            "xfsprogs",
            "all metadata, no-modify mode: AG headers, free-space and inode btrees, inodes, "
            "directories, link counts; not file contents",
            ("Phase ", "        - ", "No modify flag set"),
        ),
    ),
    _fmt(
        "btrfs",
        "mkfs.btrfs -q -f -L fsbench",
        "btrfs-progs",
        128,
        Checker(
            ("btrfs", "check", "--readonly"),
            ("btrfs", "--version"),
            "btrfs-progs",
            "superblock, root, extent, chunk, fs and checksum trees, free-space cache; "
            "data checksums are not verified",
            ("Opening filesystem", "Checking filesystem", "UUID:", "[", "found ", "total "),
        ),
    ),
    _fmt(
        "ntfs",
        "mkntfs -Q -F -q -L fsbench",
        "ntfs-3g",
        8,
        Checker(
            ("ntfsfix", "-n"),
            ("ntfsfix", "--version"),
            "ntfs-3g",
            "little: ntfsfix -n only checks that the volume mounts in libntfs-3g (boot "
            "sector, $MFT loads), that $MFT and $MFTMirr agree, the backup boot sector and "
            "the dirty flag; no directory, index, bitmap or cross-link check (no chkdsk or "
            "ntfsck here) — fsbench's digest check is the rest of the evidence",
            ("Mounting volume... OK", "Processing of", "Checking the alternate", "NTFS "),
        ),
    ),
    _fmt(
        "exfat",
        "mkfs.exfat -L fsbench",
        "exfatprogs",
        8,
        Checker(
            ("fsck.exfat", "-n"),
            ("fsck.exfat", "-V"),
            "exfatprogs",
            "boot region and its checksum, FAT chains, allocation bitmap, upcase table, "
            "directory entries and their checksums; not file contents",
            ("exfatprogs version", "/dev/"),
        ),
    ),
    _fmt(
        "vfat",
        "mkfs.vfat -F 32 -n FSBENCH",
        "dosfstools",
        40,
        Checker(
            ("fsck.vfat", "-n"),
            ("fsck.vfat", "-n", "/dev/null"),  # its banner is its version; no -V flag
            "dosfstools",
            "boot sector, both FATs (compared), cluster chains, directory entries; "
            "not file contents",
            ("fsck.fat ", "/dev/"),
        ),
    ),
)
