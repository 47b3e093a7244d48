"""Remedies as data: each record is one change that may close a gap the explanation names.

A remedy names the drivers it applies to, the explanation factors it addresses (`Factor.name`
of a probe: "fuse WRITE", "wake-ups", "cpu", ...), the change itself (a mount option, another
FUSE transport, a CPU placement, an mkfs option, a block-device setting, another driver in the
kernel), what it requires (a volume of at least some size, a daemon built here, a kernel with the
driver), its safety class and where it is documented. `fsbench tune` reads this table only;
adding a remedy is adding a record.

Safety classes: `safe` changes nothing a program can see; `trades-durability` may lose or
tear recent writes on power loss; `changes-semantics` changes what programs see (atime,
mtime, checksums). Only `safe` remedies are measured without `--allow-unsafe`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsbench.lab.loops import Knob
from fsbench.records.choices import by_name

GiB = 1024**3
SAFE, DURABILITY, SEMANTICS = "safe", "trades-durability", "changes-semantics"
SAFETY_WORDS = {
    SAFE: "safe",
    DURABILITY: "UNSAFE: trades durability on power loss",
    SEMANTICS: "UNSAFE: changes what programs see",
}
# What a change is; each kind says how the candidate subject and the command to use it are made.
KINDS = (
    "mount-option",
    "transport",
    "placement",
    "mkfs-option",
    "block-device",
    "io-size",
    "kernel-driver",
)
# Kinds this lab can make a candidate of; the others are listed and skipped with the reason.
MEASURABLE = set(KINDS)
NOT_MEASURABLE: dict[str, str] = {}

FUSE_LIBFUSE2 = ("fuse2fs", "exfat-fuse")  # Debian 12's builds link libfuse 2.9
FUSE_ALL = ("ntfs-3g", "lowntfs-3g", "fuse2fs", "fuse2fs-3.18", "exfat-fuse")
NTFS3G = ("ntfs-3g", "lowntfs-3g")
# Every driver whose volume is a block device (the lab's loop device): the FUSE daemons above
# and the kernel's disk file systems.
ON_DEVICE = (*FUSE_ALL, "ext4", "ext2", "xfs", "btrfs")
# Every cost a FUSE daemon adds: its requests of any kind ("fuse *": fuse WRITE, fuse GETXATTR,
# ...), the daemon's own time in each, the wake-ups and switches between it and the application.
FUSE_COSTS = ("fuse *", "daemon split", "wake-ups", "context switches", "cpu")


@dataclass(frozen=True)
class Remedy:
    name: str
    drivers: tuple[str, ...]
    factors: tuple[str, ...]  # explanation factor names (Factor.name) it addresses; "fuse *": any
    kind: str  # one of KINDS
    change: str  # the mount option(s), transport, placement or mkfs option
    says: str  # what it does, in a line
    safety: str = SAFE
    source: str = ""
    min_volume: int = 0  # bytes the volume must have for the change to take effect
    driver: str = ""  # transport remedies: the driver that offers it (a build of fsbench's)
    where: str = "device"  # block-device remedies: its loop device, or its FUSE mount's bdi
    replaces: str = ""  # io-size remedies: the record size it replaces (change: "bs=8k")
    # kernel-driver remedies (change: the driver): the kernel (vm/kernels.py's KNOWN) that has
    # it, booted in a VM where this host's kernel lacks it
    kernel: str = ""

    def option_names(self) -> list[str]:
        """The mount options the change names (for the check that the driver accepts them)."""
        return [o for o in self.change.split(",") if o] if self.kind == "mount-option" else []

    def mkfs_args(self) -> tuple[str, ...]:
        return tuple(self.change.split()) if self.kind == "mkfs-option" else ()

    def knobs(self) -> tuple[Knob, ...]:
        """The block-device settings it makes (lab/loops.py)."""
        if self.kind != "block-device":
            return ()
        pairs = [p.partition("=") for p in self.change.split(",") if p]
        return tuple(Knob(self.where, k, v) for k, _, v in pairs)


REMEDIES: dict[str, Remedy] = by_name(
    Remedy(
        "big_writes",
        NTFS3G,
        ("fuse WRITE", "context switches", "wake-ups", "cpu"),
        "mount-option",
        "big_writes",
        "WRITE requests up to 128 KiB instead of one 4 KiB page each",
        source="ntfs-3g(8); ignored below a 4 GiB volume (ntfs-3g's own rule)",
        min_volume=4 * GiB,
    ),
    Remedy(
        "delay_mtime",
        NTFS3G,
        ("fuse WRITE", "cpu"),
        "mount-option",
        "delay_mtime",
        "a file's mtime written when it is closed (or every 60 s), not at each write",
        SEMANTICS,
        "ntfs-3g(8)",
    ),
    Remedy(
        "noatime (FUSE)",
        NTFS3G,
        ("fuse READ", "fuse GETATTR", "cpu"),
        "mount-option",
        "noatime",
        "no access-time update when a file is read",
        SEMANTICS,
        "ntfs-3g(8)",
    ),
    Remedy(
        "FUSE readahead 1 MiB",
        FUSE_ALL,
        ("readahead", "fuse READ"),
        "block-device",
        "read_ahead_kb=1024",
        "the FUSE mount's own readahead (its bdi, /sys/class/bdi/MAJ:MIN[-fuseblk]) at 1 MiB "
        "instead of 128 KiB: more READ requests in flight on a sequential read",
        source="Documentation/ABI/testing/sysfs-class-bdi; fs/fuse/inode.c (ra_pages)",
        where="mount",
    ),
    Remedy(
        "max_readahead",
        FUSE_LIBFUSE2,
        ("readahead", "fuse READ"),
        "mount-option",
        "max_readahead=1048576",
        "the kernel may read ahead up to 1 MiB per request instead of libfuse's 128 KiB",
        source="fuse(8), libfuse 2 options (fuse2fs --helpfull)",
    ),
    Remedy(
        "splice",
        FUSE_LIBFUSE2,
        ("cpu", "fuse WRITE", "fuse READ"),
        "mount-option",
        "splice_read,splice_write,splice_move",
        "request data moved through pipes with splice(2) instead of copied by the daemon",
        source="fuse(8), libfuse 2 options (fuse2fs --helpfull)",
    ),
    Remedy(
        "placement same",
        FUSE_ALL,
        ("wake-ups", "context switches", "fuse WRITE", "fuse READ"),
        "placement",
        "same",
        "the application and the FUSE daemon on one CPU: no wake-up crosses CPUs",
        source="sched_setaffinity(2), taskset(1); docs/placement.md",
    ),
    Remedy(
        "io_uring transport",
        ("fuse2fs", "fuse2fs-3.18", "passthrough_hp"),
        ("fuse WRITE", "fuse READ", "wake-ups", "context switches"),
        "transport",
        "uring",
        "FUSE over io_uring (per-CPU rings) instead of /dev/fuse: a daemon of libfuse 3.18 "
        "built here (fuse2fs: e2fsprogs 1.47.4's, which offers it)",
        source="libfuse 3.18 README (io_uring); Linux 6.14+ filesystems/fuse-io-uring.rst",
        driver="fuse2fs-3.18",  # the daemon that serves it when the subject's own cannot
    ),
    Remedy(
        "passthrough transport",
        ("passthrough_hp",),
        ("fuse WRITE", "fuse READ", "wake-ups", "context switches", "cpu"),
        "transport",
        "passthrough",
        "reads and writes go to the backing file in the kernel and never reach the daemon "
        "(FUSE passthrough: Linux 6.9+, libfuse 3.17+, a privileged daemon)",
        source="Linux Documentation/filesystems/fuse-passthrough.rst; libfuse 3.17 ChangeLog",
    ),
    Remedy(
        "exfat cluster 1 MiB",
        ("exfat-fuse", "exfat"),
        ("fuse WRITE", "block write", "cpu"),
        "mkfs-option",
        "-c 1M",
        "1 MiB clusters instead of mkfs.exfat's 32 KiB (volumes of 256 MiB-32 GiB): fewer "
        "allocation-bitmap and FAT updates per byte written",
        source="mkfs.exfat(8) --cluster-size",
    ),
    Remedy(
        "read_ahead_kb",
        ON_DEVICE,
        ("readahead", "block read"),
        "block-device",
        "read_ahead_kb=1024",
        "the device reads ahead 1 MiB instead of 128 KiB (blockdev --setra): a FUSE daemon's "
        "reads of the device, a kernel file system's reads of its files",
        source="Documentation/ABI/stable/sysfs-block (queue/read_ahead_kb), blockdev(8)",
    ),
    Remedy(
        "scheduler mq-deadline",
        ON_DEVICE,
        ("block write", "block read"),
        "block-device",
        "scheduler=mq-deadline",
        "the device's I/O scheduler mq-deadline instead of none (loop devices' default)",
        source="Documentation/block/deadline-iosched.rst; sysfs-block (queue/scheduler)",
    ),
    Remedy(
        "records 8 KiB",
        ON_DEVICE,
        # Every cost paid per request or per write() call halves with twice the record.
        (
            "fuse WRITE",
            "fuse READ",
            "fuse GETXATTR",
            "wake-ups",
            "context switches",
            "cpu",
            "block write",
            "block read",
        ),
        "io-size",
        "bs=8k",
        "the application reads and writes 8 KiB records instead of 4 KiB: half the requests per "
        "byte (measured as the workload's 8 KiB variant beside its 4 KiB one, same subject)",
        source="fio(1) bs=, dd(1) bs=: the application's own buffer size",
        replaces="4k",
    ),
    # Another driver for the same volume: no request crosses to a daemon. What programs see
    # differs (docs/tune.md, measured by the semantics probe in one VM): ntfs3 keeps the mode
    # chmod sets where ntfs-3g shows 0777 whatever is set, honours O_DIRECT and fallocate, and
    # makes no sparse files; the kernel's exfat shows 0755 where exfat-fuse shows 0777.
    Remedy(
        "ntfs3 kernel driver",
        NTFS3G,
        FUSE_COSTS,
        "kernel-driver",
        "ntfs3",
        "the kernel's ntfs3 driver instead of the FUSE daemon: no request leaves the kernel",
        SEMANTICS,
        "Documentation/filesystems/ntfs3.rst; ntfs-3g(8) (permissions, streams_interface)",
        kernel="debian-6.12",
    ),
    Remedy(
        "exfat kernel driver",
        ("exfat-fuse",),
        FUSE_COSTS,
        "kernel-driver",
        "exfat",
        "the kernel's exfat driver instead of the FUSE daemon: no request leaves the kernel",
        SEMANTICS,
        "Documentation/filesystems/exfat.rst (fs/exfat); mount.exfat-fuse(8) (umask)",
        kernel="debian-6.12",
    ),
    Remedy(
        "noatime",
        ("ext4", "xfs", "btrfs"),
        ("block write", "writeback"),
        "mount-option",
        "noatime",
        "no access-time update when a file is read",
        SEMANTICS,
        "mount(8)",
    ),
    Remedy(
        "data=writeback",
        ("ext4",),
        ("block write", "writeback", "cpu"),
        "mount-option",
        "data=writeback",
        "data not ordered before the journal commit of its metadata",
        DURABILITY,
        "ext4(5)",
    ),
    Remedy(
        "commit=60",
        ("ext4", "btrfs"),
        ("block write", "writeback"),
        "mount-option",
        "commit=60",
        "the journal committed every 60 s instead of 5 s (btrfs: 30 s)",
        DURABILITY,
        "ext4(5), btrfs(5)",
    ),
    Remedy(
        "nobarrier",
        ("ext4",),
        ("block write", "writeback"),
        "mount-option",
        "nobarrier",
        "no cache flushes at journal commits",
        DURABILITY,
        "ext4(5)",
    ),
    # btrfs (btrfs(5), Documentation/filesystems/btrfs.rst)
    Remedy(
        "btrfs compress zstd:1",
        ("btrfs",),
        ("block write", "write amplification", "writeback"),
        "mount-option",
        "compress=zstd:1",
        "data compressed with zstd at level 1 as it is written: fewer bytes to the device where "
        "the data compresses (none where it does not: btrfs gives up on a file's first "
        "incompressible write)",
        source="btrfs(5) compress=; zstd level 1 the cheapest (btrfs(5) 'COMPRESSION')",
    ),
    Remedy(
        "btrfs space_cache=v2",
        ("btrfs",),
        ("block write", "writeback", "cpu"),
        "mount-option",
        "space_cache=v2",
        "the free-space tree instead of v1's per-block-group cache files written at every "
        "commit (the default since btrfs-progs 5.15's mkfs; said explicitly for older images)",
        source="btrfs(5) space_cache=v2; btrfs-progs 5.15 release notes (free-space-tree default)",
    ),
    Remedy(
        "btrfs ssd",
        ("btrfs",),
        ("block write", "write amplification"),
        "mount-option",
        "ssd",
        "the SSD allocation scheme (clustered, less seeking-minded) on a device the kernel "
        "reports as rotational (a loop device over a file does)",
        source="btrfs(5) ssd, nossd, ssd_spread",
    ),
    Remedy(
        "btrfs nodatacow",
        ("btrfs",),
        ("block write", "write amplification", "writeback", "cpu"),
        "mount-option",
        "nodatacow",
        "new files' data overwritten in place, without copy-on-write, data checksums or "
        "compression: no checksums, so a torn or corrupted block is never detected",
        DURABILITY,
        "btrfs(5) nodatacow (implies nodatasum; disables compression)",
    ),
    Remedy(
        "btrfs nodatasum",
        ("btrfs",),
        ("cpu", "block write", "writeback"),
        "mount-option",
        "nodatasum",
        "no checksums of new files' data: less CPU and metadata per write, and corruption of "
        "that data is never detected (scrub cannot repair it)",
        DURABILITY,
        "btrfs(5) nodatasum",
    ),
    # ext4 (ext4(5), Documentation/admin-guide/ext4.rst)
    Remedy(
        "ext4 journal_async_commit",
        ("ext4",),
        ("block write", "writeback"),
        "mount-option",
        "data=writeback,journal_async_commit",
        "the commit block written without waiting for the descriptor blocks (journal checksums "
        "on); the kernel refuses it with data=ordered, so data is not ordered before its "
        "metadata either",
        DURABILITY,
        "ext4(5) journal_async_commit; fs/ext4/super.c: 'can't mount with "
        "journal_async_commit in data=ordered mode'",
    ),
    Remedy(
        "ext4 journal 256 MiB",
        ("ext4",),
        ("block write", "writeback"),
        "mkfs-option",
        "-J size=256",
        "a 256 MiB journal at mkfs instead of mke2fs's 64 MiB for a 1 GiB volume: fewer "
        "checkpoints forced by a full journal under sustained metadata writes",
        source="mke2fs(8) -J size=; ext2fs_default_journal_size (e2fsprogs lib/ext2fs/mkjournal.c)",
        min_volume=1 * GiB,
    ),
    # xfs (xfs(5))
    Remedy(
        "xfs allocsize 16 MiB",
        ("xfs",),
        ("block write", "write amplification", "writeback"),
        "mount-option",
        "allocsize=16m",
        "speculative preallocation of 16 MiB past a growing file's end instead of the dynamic "
        "default: larger, fewer extents for streaming writes",
        source="xfs(5) allocsize=",
    ),
    Remedy(
        "xfs log buffers",
        ("xfs",),
        ("block write", "writeback"),
        "mount-option",
        "logbufs=8,logbsize=256k",
        "more and larger in-memory log buffers",
        source="xfs(5)",
    ),
)


def applies_to(remedy: Remedy, driver: str) -> bool:
    return driver in remedy.drivers


def addresses(remedy: Remedy, factor: str) -> bool:
    """Whether the remedy addresses an explanation factor (a name, or a "prefix *" of names)."""
    return any(
        factor == f or (f.endswith(" *") and factor.startswith(f[:-1])) for f in remedy.factors
    )


def host_has(driver: str) -> bool:
    from fsbench.lab.drivers import DRIVERS, availability

    return availability(DRIVERS[driver]).available


def vm_kernel(r: Remedy) -> str:
    """The kernel a VM must boot to measure the remedy ("" on this host): a kernel-driver
    remedy whose driver this host's kernel lacks."""
    if r.kind != "kernel-driver" or not r.kernel:
        return ""
    return "" if host_has(r.change) else r.kernel


def unsafe(remedy: Remedy) -> bool:
    return remedy.safety != SAFE


def resized(r: Remedy, workload: str) -> str | None:
    """An io-size remedy's workload: the same workload's variant with the larger records
    (`rand-write/4k-buffered` -> `rand-write/8k-buffered`), when the registry has it."""
    from fsbench.registry import WORKLOADS

    name, _, variant = workload.partition("/")
    old = f"{r.replaces}-"
    if r.kind != "io-size" or not r.replaces or not variant.startswith(old):
        return None
    new = f"{name}/{r.change.partition('=')[2]}-{variant[len(old) :]}"
    return new if new in WORKLOADS else None
