"""xfs against itself, fresh and aged, in one run: identical copies of one image (same UUID)
mount side by side (`nouuid`, shown in the effective options), and `--age` ages xfs through
its format record (fixed mkfs bytes, its own free-space probe)."""

from __future__ import annotations

from pathlib import Path

import pytest
import xxhash
from conftest import fsbench_released, need_drivers

from fsbench.aging.formats import AGED_FORMATS
from fsbench.lab.system import run

pytestmark = pytest.mark.root
MiB = 1024 * 1024


def _made(path: Path) -> str:
    """An image made by the aged format's recipe (mkfs, then its settle step): its digest."""
    fmt = AGED_FORMATS["xfs"]
    with open(path, "wb") as f:
        f.truncate(320 * MiB)
    run([*fmt.mkfs, str(path)], timeout=60)
    assert fmt.settle is not None
    fmt.settle(str(path))
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MiB):
            h.update(chunk)
    return h.hexdigest()


def test_xfs_compared_with_itself_fresh_and_aged(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_drivers("xfs")
    # Two images made a second apart are byte-identical: mkfs's times are fixed after it.
    first = _made(tmp_path / "a.img")
    run(["sleep", "1.1"])
    assert _made(tmp_path / "b.img") == first
    for p in tmp_path.glob("*.img"):
        p.unlink()

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ran = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", "xfs", "xfs:noatime", "--age", "none,light", "--size", "320M",
        "--workloads", "seq-read/aged", "--repeat", "2", "--warmup", "0",
        "--min-sample-time", "0", "--no-trace",
    )  # fmt: skip
    doc = ran.doc
    subjects = {s["id"]: s for s in doc["subjects"]}
    ids = ["xfs", "xfs:noatime", "xfs (aged:light)", "xfs:noatime (aged:light)"]
    assert set(subjects) == set(ids)
    for sid in ids:
        opts = subjects[sid]["effective_mount_options"].split(",")
        assert subjects[sid]["status"] == "ok" and "nouuid" in opts, subjects[sid]
        assert ("noatime" in opts) == ("noatime" in sid), opts
    measured = {r["subject"] for r in doc["results"] if r["status"] == "ok" and r["samples"]}
    assert measured == set(ids)

    # One aging, both drivers' subjects a copy of it, probed through xfs's own record.
    aged = subjects["xfs (aged:light)"]["aging"]
    assert aged == subjects["xfs:noatime (aged:light)"]["aging"]
    assert not aged["reused"] and aged["reference_driver"] == "xfs"
    assert aged["recipe"]["mkfs"] == list(AGED_FORMATS["xfs"].mkfs)
    assert 0.4 < aged["utilization"] < 0.8 and aged["files"]["files"] > 100
    assert aged["free_space"]["free_extents"] >= 1 and aged["free_space"]["free_bytes"] > 0
