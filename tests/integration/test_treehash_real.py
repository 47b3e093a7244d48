"""tree-hash on real mounts: a kernel driver (ext4) and a FUSE driver (ntfs-3g), cold caches
verified by the device's read counter, the daemon's CPU seen, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fsbench_released

from fsbench.lab.drivers import DRIVERS, availability


def _need(*names: str) -> None:
    for name in names:
        av = availability(DRIVERS[name])
        if not av.available:
            pytest.skip(f"driver {name} not available: {av.reason}")


@pytest.mark.root
def test_tree_hash_on_ext4_and_ntfs3g(tmp_path: Path, state_dir: Path) -> None:
    _need("ext4", "ntfs-3g")
    out = tmp_path / "out"
    doc = fsbench_released(
        state_dir, out,
        "compare", "ext4", "ntfs-3g", "--workloads", "tree-hash", "--size", "256M",
        "--repeat", "1", "--warmup", "0", "--min-sample-time", "0",
        "--db", str(tmp_path / "db"),
        timeout=540,
    ).doc  # fmt: skip
    assert doc["status"] == "complete"
    assert {s["id"]: s["status"] for s in doc["subjects"]} == {"ext4": "ok", "ntfs-3g": "ok"}

    by = {(r["subject"], r["params"]["variant"]): r for r in doc["results"]}
    assert set(by) == {(s, v) for s in ("ext4", "ntfs-3g") for v in ("cold", "warm")}
    for (subject, variant), r in by.items():
        assert r["workload"] == "tree-hash"
        assert r["status"] == "ok", (subject, variant, r["error"])
        assert len(r["samples"]) == 1 and r["samples"][0] > 0, (subject, variant)
        (sample,) = r["sample_details"]
        # The whole generated tree was read, and every digest matched what was written
        # (otherwise the sample would have failed).
        iterations = sample["extra"].get("iterations", 1)
        assert sample["bytes"] == r["params"]["tree_bytes"] * iterations > 50 * 2**20
        assert sample["ops"] == r["params"]["files"] * iterations > 500
        assert sample["extra"]["cpu_share_of_wall"] > 0
        assert r["cpu"]["app_user_s"] + r["cpu"]["app_sys_s"] > 0
        if variant == "cold":
            assert r["cache"] == "cold-verified", (subject, r["cache"], r["flags"])
            assert sample["device"]["read_bytes"] >= 0.9 * sample["bytes"]
    # The FUSE daemon does the file system's work in its own process; ext4 has none.
    assert by[("ntfs-3g", "cold")]["cpu"]["driver_s"] > 0
    assert by[("ext4", "cold")]["cpu"]["driver_s"] == 0
