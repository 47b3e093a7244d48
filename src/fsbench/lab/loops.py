"""Loop devices: every image is attached through one, for every driver, so device counters
from /sys/block/loopN/stat are comparable between kernel and FUSE drivers."""

from __future__ import annotations

import json
from pathlib import Path

from fsbench.errors import LabError
from fsbench.lab.system import run
from fsbench.probes.procfs import ProcFS

# Every loop device a run attaches reads ahead the same: the kernel's default for a new block
# device (VM_READAHEAD_PAGES). A loop device keeps its queue settings after detach, so one an
# earlier user left at 2,560 KiB read cold files in 2 MiB windows while the others used
# 128 KiB ones: the A/A runs found the first subject's cold read systematically apart.
READ_AHEAD_KB = 128


def attach(image: Path, read_only: bool = False, sysfs: str = "/sys") -> str:
    argv = ["losetup", "--find", "--show"]
    if read_only:
        argv.append("--read-only")
    device = run([*argv, str(image)]).stdout.strip()
    set_read_ahead(device, READ_AHEAD_KB, sysfs)
    return device


def set_read_ahead(device: str, kib: int, sysfs: str = "/sys") -> None:
    knob = Path(sysfs, "block", Path(device).name, "queue", "read_ahead_kb")
    try:
        knob.write_text(f"{kib}\n")
    except OSError as e:
        detach(device)  # a device that reads ahead differently would bias its subject
        raise LabError(f"cannot set {knob} to {kib}: {e.strerror or e}") from e


def read_ahead_kb(device: str, sysfs: str = "/sys") -> int | None:
    try:
        return int(Path(sysfs, "block", Path(device).name, "queue", "read_ahead_kb").read_text())
    except (OSError, ValueError):
        return None


def detach(device: str, procfs: ProcFS | None = None) -> str | None:
    """Detach a loop device; None when done (or when it is no longer attached: a loop with
    autoclear goes by itself once its last user unmounts, and losetup then fails with
    ENXIO), else why not (losetup's words)."""
    proc = run(["losetup", "-d", device], check=False)
    if proc.returncode == 0:
        return None
    if Path(device).name not in (procfs or ProcFS()).loop_backing_files():
        return None  # gone already: detached is what was asked
    return proc.stderr.strip() or f"exit {proc.returncode}"


def list_loops() -> list[tuple[str, str]]:
    """(device, backing file) of every attached loop device."""
    proc = run(["losetup", "--json", "--list", "--output", "NAME,BACK-FILE"], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    data = json.loads(proc.stdout)
    return [
        (d["name"], (d.get("back-file") or "").removesuffix(" (deleted)"))
        for d in data.get("loopdevices", [])
    ]
