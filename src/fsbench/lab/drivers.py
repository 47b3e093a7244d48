"""Drivers as data: which format each reads, how it mounts, how to see its daemon and version.

A driver is *available* when this machine can really mount with it: a kernel driver needs its
file-system type in /proc/filesystems or a loadable module; a FUSE driver needs its binary and
/dev/fuse. Capability flags let workloads declare what they need (chmod on vfat is unsupported).
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from fsbench.fuse import sourcebuild
from fsbench.fuse.fuse2fs import FUSE2FS
from fsbench.fuse.libfuse import LIBFUSE
from fsbench.fuse.sourcebuild import SourceBuild
from fsbench.lab.formats import FORMATS
from fsbench.lab.system import SBIN_PATH, tool
from fsbench.probes.procfs import ProcFS
from fsbench.records.choices import by_name
from fsbench.records.schema import Quirk, Unavailable


@dataclass(frozen=True)
class Driver:
    name: str
    fs: str  # the on-disk format it reads (a key of FORMATS)
    kind: str  # "kernel" or "fuse"
    description: str
    fstype: str = ""  # kernel: the type given to mount -t
    module: str = ""  # kernel: the module that provides it
    binary: str = ""  # fuse: the daemon started as `binary DEVICE MOUNTPOINT [-o opts]`
    version_args: tuple[str, ...] = ()  # fuse: argv appended to binary to print its version
    package: str = ""  # Debian package that provides it
    # Capabilities: what the file system behind this driver can do.
    posix_permissions: bool = True  # chmod/chown mean something
    symlinks: bool = True
    direct_io: bool = True  # O_DIRECT accepted (not necessarily honoured: probes check)
    max_file_size: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # FUSE transports the daemon can use (fuse/transports.py), each with the daemon arguments
    # that select it; a subject names one (`passthrough_hp:uring`). Empty: /dev/fuse only.
    transports: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # A daemon that serves a directory, not a device: the image is mounted with this kernel
    # driver first (beside the mount point) and the daemon exports that mount.
    lower: str = ""
    # The daemon is fsbench's own build from source (fuse/sourcebuild.py), not on PATH.
    built: SourceBuild | None = None
    # Options every mount carries so identical copies of one image mount side by side, each
    # subject's own added after them (xfs refuses a second file system with the same UUID:
    # nouuid, which the effective options then show). The image bytes stay identical.
    copies_options: str = ""
    in_default: bool = True  # compared when no subject is named
    # Known behaviours the explanation names when a result shows them (schema.Quirk).
    quirks: tuple[Quirk, ...] = ()
    # Mount options the driver documents, each usable as a subject (`ntfs:windows_names`).
    known_options: tuple[str, ...] = ()

    def transport_args(self, transport: str) -> tuple[str, ...]:
        return dict(self.transports).get(transport, ())

    @property
    def fmt(self):
        return FORMATS[self.fs]

    def mount_argv(
        self, device: str, mountpoint: str, options: str, transport: str = ""
    ) -> list[str]:
        """The mount command; for a driver with a `lower` one, `device` is the directory the
        daemon serves (lab/stacked.py mounts it)."""
        if self.kind == "kernel":
            # -i: never a /sbin/mount.TYPE helper. Where ntfs-3g is installed, mount.ntfs is
            # ntfs-3g, and `mount -t ntfs` would measure it instead of the kernel's ntfs.
            argv = ["mount", "-i", "-t", self.fstype]
            options = ",".join(o for o in (self.copies_options, options) if o)
            if options:
                argv += ["-o", options]
            return [*argv, device, mountpoint]
        daemon = self.binary_path() or self.binary
        argv = [daemon, *self.transport_args(transport), device, mountpoint]
        return [*argv, "-o", options] if options else argv

    def binary_path(self, path: str = SBIN_PATH) -> str | None:
        if self.built is not None:
            try:
                build = sourcebuild.load(self.built)
            except sourcebuild.BuildFailed:
                return None
            return build.daemons.get(self.binary) if build else None
        return shutil.which(self.binary, path=path) if self.binary else None


def built_daemons(drivers) -> list[str]:
    """The binaries of the daemons fsbench built among `drivers` (those built and verified
    now): what a USDT probe attaches to (probes/usdt.py)."""
    paths = [d.binary_path() for d in drivers if d.built]
    return list(dict.fromkeys(p for p in paths if p))


GiB = 1024**3
# ntfs-3g's own rule (both its FUSE front ends): big_writes is ignored on volumes under 4 GiB,
# so every WRITE request stays one 4 KiB page.
NTFS3G_BIG_WRITES = Quirk(
    op="WRITE",
    request_size=4096,
    image_below=4 * GiB,
    says="big_writes is ignored on volumes under 4 GiB; this image is {image}",
    brief="< 4 GiB: no big_writes",
)
_FAT_NOTE = "FAT has no POSIX permissions or symlinks; chmod is reported unsupported"

DRIVERS: dict[str, Driver] = by_name(
    Driver("ext4", "ext4", "kernel", "Linux ext4", fstype="ext4", module="ext4"),
    Driver("ext2", "ext2", "kernel", "Linux ext2 (via ext4 or ext2)", fstype="ext2", module="ext2"),
    Driver(
        "xfs", "xfs", "kernel", "Linux XFS", fstype="xfs", module="xfs", copies_options="nouuid"
    ),
    Driver("btrfs", "btrfs", "kernel", "Linux Btrfs", fstype="btrfs", module="btrfs"),
    Driver(
        "ntfs3",
        "ntfs",
        "kernel",
        "Paragon NTFS3 kernel driver (Linux 5.15+)",
        fstype="ntfs3",
        module="ntfs3",
    ),
    Driver(
        "ntfs",
        "ntfs",
        "kernel",
        "the new read-write in-kernel ntfs driver (Linux 7.1+; Debian's 7.x has it instead "
        "of ntfs3)",
        fstype="ntfs",
        module="ntfs",
        known_options=(
            *("uid=", "gid=", "umask=", "dmask=", "fmask=", "iocharset=", "errors="),
            *("show_sys_files", "case_sensitive", "nocase", "disable_sparse"),
            *("mft_zone_multiplier=", "preallocated_size=", "sys_immutable", "nohidden"),
            *("hide_dot_files", "windows_names", "acl", "discard"),
        ),
        notes=(
            "a dirty or hibernated volume mounts read-only; ntfsck -n (ntfsprogs-plus) is "
            "its checker",
        ),
    ),
    Driver(
        "exfat",
        "exfat",
        "kernel",
        "Linux exFAT kernel driver",
        fstype="exfat",
        module="exfat",
        posix_permissions=False,
        symlinks=False,
        notes=(_FAT_NOTE,),
    ),
    Driver(
        "vfat",
        "vfat",
        "kernel",
        "Linux FAT32 (vfat) kernel driver",
        fstype="vfat",
        module="vfat",
        posix_permissions=False,
        symlinks=False,
        max_file_size=4 * GiB - 1,
        notes=(_FAT_NOTE,),
    ),
    Driver(
        "ntfs-3g",
        "ntfs",
        "fuse",
        "NTFS-3G FUSE driver (high-level FUSE API)",
        binary="ntfs-3g",
        version_args=("--version",),
        package="ntfs-3g",
        notes=("single-threaded daemon; ignores big_writes on volumes < 4 GiB",),
        quirks=(NTFS3G_BIG_WRITES,),
    ),
    Driver(
        "lowntfs-3g",
        "ntfs",
        "fuse",
        "NTFS-3G FUSE driver (low-level FUSE API)",
        binary="lowntfs-3g",
        version_args=("--version",),
        package="ntfs-3g",
        quirks=(NTFS3G_BIG_WRITES,),
    ),
    Driver(
        "fuse2fs",
        "ext4",
        "fuse",
        "e2fsprogs' FUSE ext2/3/4 driver",
        binary="fuse2fs",
        version_args=("-V",),
        package="fuse2fs",
    ),
    Driver(
        "fuse2fs-3.18",
        "ext4",
        "fuse",
        "e2fsprogs 1.47.4's fuse2fs built here against libfuse 3.18: a real file system "
        "over FUSE's newer transports; dev-fuse (default), uring",
        binary="fuse2fs",
        package="e2fsprogs 1.47.4 (Debian unstable source, built by fsbench)",
        transports=(("dev-fuse", ()), ("uring", ("-o", "io_uring"))),
        built=FUSE2FS,
        in_default=False,
    ),
    Driver(
        "exfat-fuse",
        "exfat",
        "fuse",
        "exFAT FUSE driver",
        binary="mount.exfat-fuse",
        version_args=("-V",),
        package="exfat-fuse",
        posix_permissions=False,
        symlinks=False,
        notes=(_FAT_NOTE,),
    ),
    Driver(
        "passthrough_hp",
        "ext4",
        "fuse",
        "the FUSE floor: libfuse 3.18's passthrough_hp example serving a directory on ext4 "
        "(built here); transports dev-fuse (default), uring, passthrough",
        binary="passthrough_hp",
        package="fuse3 3.18 (Debian unstable source, built by fsbench)",
        transports=(
            ("dev-fuse", ("--nopassthrough",)),
            ("uring", ("--nopassthrough", "-o", "io_uring")),
            ("passthrough", ()),
        ),
        lower="ext4",
        built=LIBFUSE,
        in_default=False,
        notes=(
            "does almost nothing per request: what it costs is FUSE's transport; without "
            "passthrough it runs with the writeback cache (libfuse's example as shipped)",
        ),
    ),
)


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""  # why not, and what to do
    lacks: Unavailable | None = None  # what this machine lacks (schema.Unavailable)


def availability(driver: Driver, fs: ProcFS | None = None, path: str = SBIN_PATH) -> Availability:
    """Whether this machine can mount with `driver`; `fs` and `path` are where the kernel and
    the binaries are looked for (a canned tree in tests)."""
    fs = fs or ProcFS()
    if driver.kind == "kernel":
        if driver.fstype in fs.filesystems():
            return Availability(True)
        if fs.module_exists(driver.module, platform.release()):
            return Availability(True)
        return Availability(
            False,
            f"this kernel ({platform.release()}) has no {driver.fstype} file system: not in "
            f"/proc/filesystems and no {driver.module} module under /lib/modules; "
            f"use a kernel built with it",
            "kernel",
        )
    if driver.built is not None:
        why = sourcebuild.problem(driver.built)
        if why:
            return Availability(False, f"{driver.binary}: {why}", "build")
    elif driver.binary_path(path) is None:
        why = f"{driver.binary} not found; apt-get install {driver.package}"
        return Availability(False, why, "binary")
    if not fs.exists("/dev/fuse"):
        return Availability(False, "/dev/fuse is missing; modprobe fuse", "fuse")
    if not {"fuse", "fuseblk"} & fs.filesystems():
        return Availability(False, "the kernel has no FUSE support; modprobe fuse", "fuse")
    return Availability(True)


def serving_proof(driver: Driver, fstype: str, fs: ProcFS | None = None) -> str:
    """Who serves a mount, from the kernel's own lists: its type in /proc/self/mountinfo and,
    for a kernel driver, its module in /proc/modules (or built in: /proc/filesystems). Raises
    ValueError when the mount is not the driver's (`mount -t ntfs` run by ntfs-3g's
    mount.ntfs shows as fuseblk)."""
    fs = fs or ProcFS()
    if driver.kind != "kernel":
        if driver.kind == "fuse" and not fstype.startswith("fuse"):
            raise ValueError(f"{driver.name} mounted as type {fstype}, not through FUSE")
        return f"{driver.kind} {driver.binary or driver.name} (mount type {fstype})"
    if fstype != driver.fstype:
        raise ValueError(
            f"mount -t {driver.fstype} was served by {fstype}, not the kernel's {driver.fstype} "
            "(a mount helper ran instead)"
        )
    try:
        loaded = {ln.split()[0] for ln in fs.read("proc/modules").splitlines() if ln.strip()}
    except OSError:
        loaded = set()
    if driver.module in loaded:
        return f"kernel {driver.fstype} (mount type {fstype}; module {driver.module} loaded)"
    return f"kernel {driver.fstype} (mount type {fstype}; built in: no {driver.module} module)"


_VERSION_RE = re.compile(r"\d+\.\d+[\w.+~-]*")


def driver_version(driver: Driver) -> str | None:
    """A version string: the kernel release for kernel drivers, the daemon's own for FUSE."""
    if driver.kind == "kernel":
        try:
            version = ProcFS().read(f"sys/module/{driver.module}/version").strip()
            suffix = f" (module {version})"
        except OSError:
            suffix = ""
        return f"Linux {platform.release()}{suffix}"
    if driver.built is not None:
        return sourcebuild.version(driver.built, driver.binary)
    path = driver.binary_path()
    if path is None:
        return None
    try:
        out = tool([path, *driver.version_args], timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in (out.stdout + "\n" + out.stderr).splitlines()]
    versioned = [ln for ln in lines if _VERSION_RE.search(ln)]
    # fuse2fs also prints fusermount's version; the daemon's own line names it (or FUSE).
    own = [ln for ln in versioned if driver.binary.split(".")[0] in ln or ln.startswith("FUSE ")]
    return (own or versioned or [None])[0]
