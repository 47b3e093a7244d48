"""Loop devices: every image is attached through one, for every driver, so device counters
from /sys/block/loopN/stat are comparable between kernel and FUSE drivers.

Settings made for one subject only (`fsbench tune`'s block-device remedies, a `Knob`): its loop
device's queue (`device`: read_ahead_kb, scheduler, ...) or the readahead of its FUSE mount's
own backing device (`mount`: the bdi a FUSE mount gets, /sys/class/bdi/MAJ:MIN[-fuseblk]). A loop
device's old value is recorded (and saved) before the change and put back before the device is
detached (`state.release`, which `fsbench cleanup` also runs): a loop device keeps its queue
settings after detach, and the next user would inherit them. A mount's bdi lives and dies with
the mount, so it is set again after every mount (a FUSE cold read remounts).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fsbench.errors import LabError, UsageError
from fsbench.lab.system import run
from fsbench.probes.procfs import ProcFS

# Every loop device a run attaches reads ahead the same: the kernel's default for a new block
# device (VM_READAHEAD_PAGES). A loop device keeps its queue settings after detach, so one an
# earlier user left at 2,560 KiB read cold files in 2 MiB windows while the others used
# 128 KiB ones: the A/A runs found the first subject's cold read systematically apart.
READ_AHEAD_KB = 128


def attach(
    image: Path, read_only: bool = False, sysfs: str = "/sys", direct_io: bool = False
) -> str:
    """A loop device over `image`. `direct_io` (an image on a disk's file system): the loop
    reads and writes the file with O_DIRECT, so the host's page cache neither holds the image
    a second time nor writes it back on its own schedule. Identical ext4 subjects writing
    through buffered loops ran apart for a whole run in 2 of 3 runs (ANOVA p 0.006, 0.026),
    through direct ones in none of 3 (docs/verdicts.md, "Setups")."""
    argv = ["losetup", "--find", "--show"]
    if read_only:
        argv.append("--read-only")
    if direct_io:
        argv.append("--direct-io=on")
    device = run([*argv, str(image)]).stdout.strip()
    set_read_ahead(device, READ_AHEAD_KB, sysfs)
    if direct_io and not uses_direct_io(device, sysfs):
        detach(device)
        raise LabError(
            f"the loop device over {image} could not use direct I/O (the file system holding "
            "it refused O_DIRECT); put the images on a disk file system (ext4, xfs, btrfs)"
        )
    return device


def uses_direct_io(device: str, sysfs: str = "/sys") -> bool:
    try:
        return Path(sysfs, "block", Path(device).name, "loop", "dio").read_text().strip() == "1"
    except OSError:
        return False


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


# -- a subject's own settings ---------------------------------------------------------------------
class _Record(Protocol):  # state.StateRecord (which imports this module)
    restore: dict[str, str]
    path: str

    def save(self) -> None: ...


class _Spec(Protocol):  # subject.SubjectSpec (which imports this module)
    id: str
    age: str
    mkfs: tuple[str, ...]
    knobs: tuple[Knob, ...]
    driver: Any


WHERE = {"device": "its loop device", "mount": "its FUSE mount's bdi"}
# The settings a subject may ask for, where each lives: nothing else is written.
ALLOWED = {
    "device": ("read_ahead_kb", "scheduler", "nr_requests", "max_sectors_kb"),
    "mount": ("read_ahead_kb",),
}
_VALUE_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


@dataclass(frozen=True)
class Knob:
    where: str  # "device" or "mount"
    name: str  # a file of /sys/block/DEV/queue/ (device) or of the bdi (mount)
    value: str

    def __post_init__(self) -> None:
        if self.name not in ALLOWED.get(self.where, ()):
            raise UsageError(f"no {self.where} setting {self.name!r} (known: "
                             f"{', '.join(ALLOWED.get(self.where, ()))})")  # fmt: skip
        if not _VALUE_RE.fullmatch(self.value):
            raise UsageError(f"bad value {self.value!r} for {self.name}")

    @property
    def text(self) -> str:
        return f"{'loop' if self.where == 'device' else 'FUSE bdi'} {self.name}={self.value}"


def queue_path(device: str, name: str, sysfs: str = "/sys") -> Path:
    return Path(sysfs, "block", Path(device).name, "queue", name)


def current(path: Path) -> str:
    """A sysfs value as it can be written back: the scheduler file lists every scheduler with
    the chosen one in brackets ("[none] mq-deadline")."""
    text = path.read_text().strip()
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else text


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(f"{value}\n")
    except OSError as e:
        raise LabError(f"cannot set {path} to {value}: {e.strerror or e}") from e
    if current(path) != value:
        raise LabError(f"{path} reads {current(path)!r} after writing {value!r}")


def set_device(rec: _Record, device: str, knobs: tuple[Knob, ...], sysfs: str = "/sys") -> None:
    """The subject's loop device settings, each old value saved in the record first."""
    for k in knobs:
        if k.where != "device":
            continue
        path = queue_path(device, k.name, sysfs)
        rec.restore.setdefault(str(path), current(path))
        rec.save()
        _write(path, k.value)


def restore_device(rec: _Record, device: str, sysfs: str = "/sys") -> list[str]:
    """Put back what `set_device` changed on one loop device, before it is detached."""
    notes = []
    prefix = f"{queue_path(device, '', sysfs)}".rstrip("/") + "/"
    for path in [p for p in rec.restore if p.startswith(prefix)]:
        value = rec.restore[path]
        try:
            Path(path).write_text(f"{value}\n")
        except OSError as e:
            notes.append(f"could not restore {path} = {value}: {e.strerror or e}")
            continue
        del rec.restore[path]
        notes.append(f"restored {path} = {value}")
    if notes and rec.path:
        rec.save()
    return notes


def mount_bdi(mountpoint: str, sysfs: str = "/sys") -> Path | None:
    """The bdi of a FUSE mount: named by the mount's device number, `-fuseblk` for fuseblk."""
    dev = os.stat(mountpoint).st_dev
    base = f"{os.major(dev)}:{os.minor(dev)}"
    for name in (f"{base}-fuseblk", base):
        p = Path(sysfs, "class", "bdi", name)
        if p.is_dir():
            return p
    return None


def set_mount(mountpoint: str, knobs: tuple[Knob, ...], sysfs: str = "/sys") -> None:
    mine = [k for k in knobs if k.where == "mount"]
    if not mine:
        return
    bdi = mount_bdi(mountpoint, sysfs)
    if bdi is None:
        raise LabError(f"no bdi for the mount {mountpoint} under {sysfs}/class/bdi")
    for k in mine:
        _write(bdi / k.name, k.value)


def check_subjects(specs: Sequence[_Spec], backing: str) -> None:
    """A subject's own mkfs options and block-device settings need its own fresh loop image."""
    for s in specs:
        if not (s.mkfs or s.knobs):
            continue
        if backing == "device":
            raise UsageError(f"{s.id}: mkfs options and device settings of its own need an "
                             "image of its own; not with --backing device:")  # fmt: skip
        if s.age != "none":
            raise UsageError(f"{s.id}: an aged image is made with the format's own mkfs")
        if any(k.where == "mount" for k in s.knobs) and s.driver.kind != "fuse":
            raise UsageError(f"{s.id}: a mount's own bdi is a FUSE mount's")
