"""seq-read/cold on real mounts: its read() loop reads the whole file from the device (the
loop device's read counter), and the result's params name that reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fsbench_released, need_drivers

MiB = 1024 * 1024


@pytest.mark.root
def test_cold_read_loop_reads_from_the_device(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("ext4", "ntfs-3g")
    doc = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", "ext4", "ntfs-3g", "--workloads", "seq-read/cold", "--size", "256M",
        "--repeat", "1", "--warmup", "0", "--min-sample-time", "0", "--no-trace",
        "--db", str(tmp_path / "db"),
        timeout=120,
    ).doc  # fmt: skip
    by = {r["subject"]: r for r in doc["results"]}
    assert set(by) == {"ext4", "ntfs-3g"}
    for subject, r in by.items():
        assert r["status"] == "ok", (subject, r["error"])
        p = r["params"]
        assert (p["reader"], p["engine"], p["block_size"]) == ("read() loop", "native", "1M")
        (sample,) = r["sample_details"]
        size = p["file_size"]
        assert sample["bytes"] == size > 50 * MiB and sample["ops"] == size // MiB
        # Cold: every byte read came through the device (ntfs-3g's daemon reads a little more:
        # its metadata), and the runner verified it.
        assert size <= sample["device"]["read_bytes"] < size * 1.1, (subject, sample["device"])
        assert r["cache"] == "cold-verified", (subject, r["cache"], r["flags"])
