"""The lab's side of aged images: refuse what cannot be aged before anything exists, and give
`Lab.prepare` a pristine aged image per format and profile — copied from the cache when its
digest checks out, aged through the reference driver otherwise (aging/imagecache.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsbench.aging import imagecache
from fsbench.aging.formats import AGED_FORMATS, supported
from fsbench.aging.recipe import NONE, reference_driver
from fsbench.errors import EnvironmentProblem, UsageError

if TYPE_CHECKING:
    from fsbench.lab.subject import SubjectSpec


def aged_check(specs: list[SubjectSpec], backing: str) -> None:
    aged = [s for s in specs if s.age != NONE]
    if not aged:
        return
    if backing == "device":
        raise UsageError("--age ages an image: use --backing ram or file:DIR, not device:")
    for s in aged:
        if s.driver.fs not in AGED_FORMATS:
            raise UsageError(
                f"--age: {s.driver.fs} images cannot be aged yet (aging is defined for "
                f"{supported()}); leave {s.driver.name} out or use --age none"
            )
        if reference_driver(s.driver.fs) is None:
            raise EnvironmentProblem(f"--age: no driver on this machine can age {s.driver.fs}")


def aged_image(lab: Any, fs: str, age: str, pristine: Path) -> tuple[list[str], dict[str, Any]]:
    """Fill `pristine` with the aged image of (fs, age, the lab's seed and size): the mkfs
    argv that made it and the aging record the subjects carry. `lab` is the calling
    lab.Lab (its record, seed, size, backing, _allocate and on_step)."""
    assert lab.record is not None
    r, driver = imagecache.recipe(fs, age, lab.age_seed, lab.size)
    mkfs = [*r.mkfs, "<image>"]
    sparse = lab.backing.kind != "ram"
    t0 = time.monotonic()
    note = None
    meta = imagecache.lookup(r.key)
    if meta is not None and meta.get("image_digest"):
        lab.on_step(f"copying the cached aged {fs} image ({age})")
        if imagecache.restore(r.key, meta["image_digest"], pristine, sparse):
            return mkfs, {**meta, "reused": True, "setup_seconds": _since(t0)}
        note = "the cached aged image failed its digest check: deleted and aged again"
    lab._allocate(pristine)
    rec = imagecache.make(r, driver, pristine, Path(lab.record.mount_dir), lab.record, lab.on_step)
    digest = imagecache.store(r.key, pristine, rec, lab.record)
    return mkfs, {
        **rec,
        "image_digest": digest,
        "reused": False,
        "setup_seconds": _since(t0),
        "note": note,
    }


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 2)
