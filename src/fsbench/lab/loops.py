"""Loop devices: every image is attached through one, for every driver, so device counters
from /sys/block/loopN/stat are comparable between kernel and FUSE drivers."""

from __future__ import annotations

import json
from pathlib import Path

from fsbench.lab.system import run
from fsbench.probes.procfs import ProcFS


def attach(image: Path, read_only: bool = False) -> str:
    argv = ["losetup", "--find", "--show"]
    if read_only:
        argv.append("--read-only")
    return run([*argv, str(image)]).stdout.strip()


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
