"""One pristine image per format for every guest of a run: identical bytes across kernels.

Each guest's lab would format its own image, and mkfs writes a new volume serial, GUIDs and
timestamps each time: `ntfs@debian-sid ntfs3@debian-6.12` would compare copies of two different
images. So the host formats each fresh format once (the lab's own mkfs command, on a plain
file), records its sha256, and hands the directory to every guest read-only (`--rodir`); the
guest's lab copies it instead of formatting (lab.Lab.prepare, FSBENCH_PRISTINE_DIR). The
directory lives under the run's temporary path and is in a state record before it exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from fsbench.errors import EnvironmentProblem
from fsbench.host.apt import file_sha256
from fsbench.lab.formats import FORMATS
from fsbench.lab.lab import PRISTINE_MANIFEST as MANIFEST
from fsbench.lab.state import StateRecord
from fsbench.lab.system import SBIN_PATH
from fsbench.probes import processes


def images_dir(run_id: str) -> Path:
    return Path(tempfile.gettempdir()) / f"fsbench-{run_id}-vm-images"


def record(run_id: str) -> StateRecord:
    """The state record that owns the directory (release removes it, `cleanup` too)."""
    d = images_dir(run_id)
    rec = StateRecord(
        run_id=f"{run_id}-vm-images",
        pid=os.getpid(),
        pid_start=processes.start_time(os.getpid()),
        image_dir="",
        mount_dir="",
        temp_paths=[str(d)],
    )
    rec.save()
    return rec


def make(d: Path, formats: list[str], size: int) -> dict[str, dict]:
    """Format each of `formats` once in `d` (a file of `size` bytes each) and write the
    manifest the guests read: format -> {image, mkfs, sha256}."""
    d.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": SBIN_PATH}
    out: dict[str, dict] = {}
    for fs in formats:
        fmt = FORMATS[fs]
        image = d / f"{fs}.img"
        with image.open("wb") as f:
            f.truncate(size)
        argv = fmt.command(str(image))
        try:
            p = subprocess.run(
                argv, capture_output=True, text=True, timeout=300, check=False, env=env
            )
        except FileNotFoundError:
            raise EnvironmentProblem(
                f"{fmt.tool} is missing; apt-get install {fmt.package}"
            ) from None
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise EnvironmentProblem(f"formatting the guests' {fs} image failed: {last}")
        out[fs] = {"image": image.name, "mkfs": argv, "sha256": file_sha256(image)}
    (d / MANIFEST).write_text(json.dumps(out, indent=1))
    return out
