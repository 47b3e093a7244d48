"""Aged images made once and kept: $XDG_CACHE_HOME/fsbench/aged/<key>.img and <key>.json.

The key covers everything that decides the aged bytes: format, mkfs argv, profile, seed, image
size, the reference driver with its version and mount options, the tools' versions and the
aging code's own version. An entry is used only when its image's XXH3-128 digest, computed
while it is copied into the run, equals the one recorded when it was made; otherwise the entry
is deleted and the image aged again. An entry is written under temporary names inside a
`fsbench-aging-*` directory named in the run's state record, then renamed into place (the
description first, the image last), so an interrupted run leaves no half-aged image under a
valid name, and `release` removes the temporary directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from fsbench.aging import measure
from fsbench.aging.formats import AGED_FORMATS, supported
from fsbench.aging.recipe import PROFILES, reference_driver
from fsbench.errors import LabError
from fsbench.lab import loops, mounts
from fsbench.lab.drivers import Driver, driver_version
from fsbench.lab.state import StateRecord
from fsbench.lab.subject import AGED_DIR
from fsbench.lab.system import run
from fsbench.probes import processes

CODE_VERSION = 2  # bump when the aging workload would write anything differently (2: tree)
_CHUNK = 8 * 1024 * 1024
_ZERO = bytes(_CHUNK)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fsbench" / "aged"


@dataclass(frozen=True)
class Recipe:
    """Everything that decides an aged image's bytes; its digest names the cache entry."""

    fs: str
    profile: str
    seed: int
    size: int
    driver: str
    driver_version: str | None
    mount_options: str
    mkfs: tuple[str, ...]
    tools: tuple[tuple[str, str | None], ...]

    def fields(self) -> dict[str, Any]:
        p = PROFILES[self.profile]
        return {
            "fs": self.fs,
            "profile": [p.name, p.utilization, p.churn],
            "seed": self.seed,
            "size": self.size,
            "driver": self.driver,
            "driver_version": self.driver_version,
            "mount_options": self.mount_options,
            "mkfs": list(self.mkfs),
            "tools": dict(self.tools),
            "code": CODE_VERSION,
        }

    @property
    def key(self) -> str:
        text = json.dumps(self.fields(), sort_keys=True)
        return f"{self.fs}-{self.profile}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def recipe(fs: str, profile: str, seed: int, size: int) -> tuple[Recipe, Driver]:
    fmt = AGED_FORMATS.get(fs)
    if fmt is None:
        raise LabError(f"--age: {fs} images cannot be aged (aging is defined for {supported()})")
    driver = reference_driver(fs)
    if driver is None:
        raise LabError(f"--age: no driver on this machine can age {fs} images")
    tools = tuple((t, tool_version(t)) for t in fmt.tools)
    opts = fmt.mount_options if driver.kind == "kernel" else ""
    r = Recipe(fs, profile, seed, size, driver.name, driver_version(driver), opts, fmt.mkfs, tools)
    return r, driver


_VERSION_ARGS = {"mkfs.ext4": ("-V",)}


def tool_version(name: str) -> str | None:
    """The tool's first line naming a version (its own banner), None when it is missing."""
    args = _VERSION_ARGS.get(name, ("--version",))
    try:
        proc = run([name, *args], timeout=10, check=False)
    except LabError:
        return None
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    return next((ln for ln in lines if any(c.isdigit() for c in ln)), None)


# -- the cache ------------------------------------------------------------------------------------
def lookup(key: str) -> dict[str, Any] | None:
    meta, image = cache_root() / f"{key}.json", cache_root() / f"{key}.img"
    if not (meta.is_file() and image.is_file()):
        return None
    try:
        return json.loads(meta.read_text())
    except (OSError, ValueError):
        return None


def forget(key: str) -> None:
    for suffix in (".img", ".json"):
        (cache_root() / f"{key}{suffix}").unlink(missing_ok=True)


def copy_hashing(src: Path, dst: Path, sparse: bool) -> str:
    """Copy src to dst and return src's XXH3-128. `sparse` leaves zero chunks as holes (the
    cache on disk); RAM images get every byte written (first touch is slow and erratic)."""
    h = xxhash.xxh3_128()
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while chunk := fi.read(_CHUNK):
            h.update(chunk)
            if sparse and chunk == _ZERO[: len(chunk)]:
                fo.seek(len(chunk), os.SEEK_CUR)
            else:
                fo.write(chunk)
        fo.truncate()
    return h.hexdigest()


def restore(key: str, digest: str, dst: Path, sparse: bool) -> bool:
    """Copy the cached image to dst; False (entry deleted, dst removed) on a digest mismatch."""
    got = copy_hashing(cache_root() / f"{key}.img", dst, sparse)
    if got == digest:
        return True
    dst.unlink(missing_ok=True)
    forget(key)
    return False


def store(key: str, image: Path, meta: dict[str, Any], record: StateRecord) -> str:
    """Put an aged image into the cache atomically; returns its digest."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f"fsbench-aging-{record.run_id}-{key}"
    record.temp_paths.append(str(tmp))
    record.save()  # named before it exists: release() removes it after any interruption
    tmp.mkdir(exist_ok=True)
    try:
        digest = copy_hashing(image, tmp / "image", sparse=True)
        meta = {**meta, "image_digest": digest}
        (tmp / "meta").write_text(json.dumps(meta, indent=1, sort_keys=True))
        os.replace(tmp / "meta", root / f"{key}.json")
        os.replace(tmp / "image", root / f"{key}.img")  # last: the entry is now whole
    finally:
        for p in tmp.iterdir() if tmp.exists() else []:
            p.unlink(missing_ok=True)
        if tmp.exists():
            tmp.rmdir()
        record.temp_paths.remove(str(tmp))
        record.save()
    return digest


# -- making one -----------------------------------------------------------------------------------
def _age_process(mountpoint: str, profile: str, seed: int, record: StateRecord) -> dict[str, Any]:
    """Run the workload in its own process group (see aging.PID_COLOUR), recorded in the state
    record so `release` kills it; its command line names the mount point as well."""
    argv = [sys.executable, "-m", "fsbench.aging.recipe", mountpoint, profile, str(seed)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    record.processes.append([proc.pid, processes.start_time(proc.pid)])
    record.save()
    try:
        out, err = proc.communicate(timeout=3600)
    except BaseException:
        with contextlib.suppress(OSError):  # the group: the forked child that ages too
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    finally:
        record.processes = [p for p in record.processes if p[0] != proc.pid]
        record.save()
    if proc.returncode != 0:
        raise LabError(f"aging {mountpoint} failed: {err.strip().splitlines()[-1:]}")
    return json.loads(out.strip().splitlines()[-1])


def make(
    r: Recipe,
    driver: Driver,
    image: Path,
    mount_dir: Path,
    record: StateRecord,
    on_step: Callable[[str], None],
) -> dict[str, Any]:
    """Format `image` (already allocated), age it through `driver`, probe it; its record."""
    t0 = time.monotonic()
    fmt = AGED_FORMATS[r.fs]
    dev = loops.attach(image)
    mp = mount_dir / f"aging-{r.fs}-{r.profile}"
    try:
        run([*r.mkfs, dev], timeout=600)
        if fmt.settle is not None:
            fmt.settle(dev)
        mp.mkdir(exist_ok=True)
        mounts.mount(driver.mount_argv(dev, str(mp), r.mount_options), str(mp))
        try:
            on_step(f"aging {r.fs} ({r.profile}, seed {r.seed}) through {driver.name}")
            workload = _age_process(str(mp), r.profile, r.seed, record)
            st = os.statvfs(mp)
            utilization = 1 - st.f_bfree / st.f_blocks
            t_tree = time.monotonic()
            tree = measure.record_tree(os.path.join(mp, AGED_DIR))
            tree_s = time.monotonic() - t_tree  # a probe's time, not the aging's
            layout = None
            if fmt.layout is None:
                layout = measure.layout_by_fiemap(os.path.join(mp, AGED_DIR))
        finally:
            pids = mounts.processes_mentioning(str(mp))
            mounts.unmount(str(mp), pids)
        aged_s = time.monotonic() - t0 - tree_s
        if layout is None:
            assert fmt.layout is not None
            layout = fmt.layout(dev)
        free = fmt.free_space(dev)
    finally:
        loops.detach(dev)
        if mp.exists():
            mp.rmdir()
    return {
        "profile": r.profile,
        "seed": r.seed,
        "key": r.key,
        "recipe": r.fields(),
        "reference_driver": driver.name,
        "reference_driver_version": r.driver_version,
        "mount_options": r.mount_options,
        "workload": workload,
        "utilization": round(utilization, 4),
        "files": layout.summary(),
        "free_space": free,
        "layout_digest": layout.digest(),
        "aging_seconds": round(aged_s, 2),
        "probe_seconds": round(time.monotonic() - t0 - aged_s, 2),
        "tree": tree,  # the lab keeps it off the subject's record (workloads/agedtree.py)
    }
