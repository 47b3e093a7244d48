"""Loop devices: every image is attached through one, for every driver, so device counters
from /sys/block/loopN/stat are comparable between kernel and FUSE drivers."""

from __future__ import annotations

import json
from pathlib import Path

from fsbench.lab.system import run


def attach(image: Path, read_only: bool = False) -> str:
    argv = ["losetup", "--find", "--show"]
    if read_only:
        argv.append("--read-only")
    return run([*argv, str(image)]).stdout.strip()


def detach(device: str) -> str | None:
    """Detach a loop device; None when done, else why not (losetup's words)."""
    proc = run(["losetup", "-d", device], check=False)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"exit {proc.returncode}")


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
