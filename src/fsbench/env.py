"""Environment capture (stored with every run) and the doctor checks."""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from fsbench import __version__
from fsbench.lab.drivers import DRIVERS, SBIN_PATH, availability, driver_version
from fsbench.lab.formats import FORMATS
from fsbench.schema import Environment

# Tools later workloads need; doctor lists each with the Debian package that provides it.
TOOLS: dict[str, tuple[tuple[str, ...], str, str]] = {
    # name: (version argv, package, what it is for)
    "fio": (("--version",), "fio", "the I/O engine of every micro workload"),
    "xxhsum": (("--version",), "xxhash", "reference for the tree-hash workload"),
    "losetup": (("--version",), "util-linux", "attaches every image through a loop device"),
    "mount": (("--version",), "mount", "mounts kernel drivers"),
    "blkid": (("--version",), "util-linux", "checks a device for data before formatting"),
    "cc": (("--version",), "build-essential", "the compile workload"),
    "make": (("--version",), "make", "the compile workload"),
    "nginx": (("-v",), "nginx-light", "the web-serve workload's HTTP server"),
    "wrk": (("--version",), "wrk", "the web-serve workload's load client"),
    "bpftrace": (("--version",), "bpftrace", "the kernel trace probes (FUSE, block, sched, ...)"),
    # mkfs tools: their versions decide the on-disk layout every driver is measured on.
    "mkfs.ext4": (("-V",), "e2fsprogs", "formats ext4 images"),
    "mkfs.ext2": (("-V",), "e2fsprogs", "formats ext2 images"),
    "mkfs.xfs": (("-V",), "xfsprogs", "formats xfs images"),
    "mkfs.btrfs": (("--version",), "btrfs-progs", "formats btrfs images"),
    "mkntfs": (("--version",), "ntfs-3g", "formats NTFS images"),
    "mkfs.exfat": (("-V",), "exfatprogs", "formats exFAT images"),
    "mkfs.vfat": (("--help",), "dosfstools", "formats FAT images"),
}

SYSCTLS = [
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/dirty_bytes",
    "vm/dirty_background_bytes",
    "vm/dirty_expire_centisecs",
    "vm/dirty_writeback_centisecs",
    "vm/swappiness",
    "vm/vfs_cache_pressure",
]

_VER = re.compile(r"\d+\.\d+[\w.+~-]*")


def tool_path(name: str) -> str | None:
    return shutil.which(name, path=SBIN_PATH + ":" + os.environ.get("PATH", ""))


def tool_version(name: str) -> str | None:
    path = tool_path(name)
    if path is None:
        return None
    args = TOOLS.get(name, (("--version",), "", ""))[0]
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "present (version unknown)"
    for line in (out.stdout + out.stderr).splitlines():
        m = _VER.search(line)
        if m:
            return line.strip()
    return "present (version unknown)"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def read_sysctls() -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        try:
            out[name.replace("/", ".")] = Path("/proc/sys", name).read_text().strip()
        except OSError:
            continue
    return out


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters/page_reporting_order")


def memory_notes() -> list[str]:
    """What on this machine makes memory-bound results erratic, and how to stop it.

    Free page reporting (virtio-balloon) hands freed memory back to the hypervisor; touching it
    again is up to 10x slower. Page cache emptied for a cold read, or a file deleted on tmpfs,
    is freed and reused all the time in a benchmark, so results swing with it.
    """
    notes = []
    try:
        order = int(PAGE_REPORTING.read_text())
    except (OSError, ValueError):
        return notes
    if order <= 10:  # MAX_PAGE_ORDER on x86: blocks of this order or larger are reported
        notes.append(
            f"free page reporting is on (order {order}): freed memory goes back to the "
            f"hypervisor and is slow to reuse, so RAM-bound samples vary; fsbench compare "
            f"holds it off during its runs (unless --no-tune); to stop it for good: "
            f"echo 11 > {PAGE_REPORTING}"
        )
    return notes


def cpu_caches() -> dict[str, int]:
    """CPU cache sizes in bytes by level ({"L1d": ..., "L2": ..., "L3": ...}) of cpu0."""
    out: dict[str, int] = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (d / "level").read_text().strip()
            kind = (d / "type").read_text().strip()
            size = (d / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + ({"Data": "d", "Instruction": "i"}.get(kind, ""))
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1:], 1)
        try:
            out[name] = int(size.rstrip("KMG")) * mult
        except ValueError:
            continue
    return out


def capture(tools: list[str] | None = None) -> Environment:
    names = tools if tools is not None else ["fio", "losetup"]
    versions = {n: tool_version(n) for n in names}
    env = Environment(
        kernel=platform.release(),
        cpu_model=cpu_model(),
        cpus=os.cpu_count() or 0,
        memory_bytes=psutil.virtual_memory().total,
        fio_version=versions.get("fio"),
        tools=versions,
        sysctl=read_sysctls(),
        hostname=socket.gethostname(),
        python=sys.version.split()[0],
        fsbench_version=__version__,
    )
    env.cpu_caches = cpu_caches()  # type: ignore[attr-defined]
    env.notes = memory_notes()  # type: ignore[attr-defined]
    return env


def doctor() -> dict[str, Any]:
    """What this machine can do: formats, drivers, tools, root, /dev/fuse, loop devices."""
    drivers = []
    for d in DRIVERS.values():
        av = availability(d)
        drivers.append(
            {
                "name": d.name,
                "fs": d.fs,
                "kind": d.kind,
                "description": d.description,
                "available": av.available,
                "version": driver_version(d) if av.available else None,
                "reason": av.reason or None,
            }
        )
    formats = []
    for f in FORMATS.values():
        path = tool_path(f.tool)
        formats.append(
            {
                "name": f.name,
                "mkfs": list(f.mkfs),
                "available": path is not None,
                "reason": None if path else f"{f.tool} not found; apt-get install {f.package}",
            }
        )
    tools = []
    for name, (_, package, purpose) in TOOLS.items():
        version = tool_version(name)
        tools.append(
            {
                "name": name,
                "available": version is not None,
                "version": version,
                "purpose": purpose,
                "install": None if version else f"apt-get install {package}",
            }
        )
    loop_ok = os.path.exists("/dev/loop-control")
    from fsbench.probes import trace as ktrace

    status = ktrace.availability()
    probes = [
        {"name": p.name, "tracepoints": list(p.tracepoints), "yields": p.yields,
         "status": status.get(p.name, "unknown")}
        for p in ktrace.PROBES
    ]  # fmt: skip
    return {
        "notes": memory_notes(),
        "root": os.geteuid() == 0,
        "fuse": os.path.exists("/dev/fuse"),
        "loop": loop_ok,
        "kernel": platform.release(),
        "formats": formats,
        "drivers": drivers,
        "tools": tools,
        "trace_probes": probes,
    }
