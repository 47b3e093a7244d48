"""Measurement that explains, on real mounts: the FUSE daemon's CPU is seen, cold
reads are proven by the device, and O_DIRECT that a driver does not honour is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import fsbench, fsbench_released, need_drivers

pytestmark = pytest.mark.root


# Session scope: xdist may run other modules' tests on this worker between these, which
# would tear a module-scoped fixture down and run the compare again.
@pytest.fixture(scope="session")
def run_doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    need_drivers("ext4", "ntfs-3g")
    tmp = tmp_path_factory.mktemp("measure")
    ran = fsbench_released(
        tmp / "state", tmp / "out",
        "compare", "ext4", "ntfs-3g", "--size", "256M", "--repeat", "3", "--warmup", "0",
        "--min-sample-time", "0",
        "--workloads", "seq-write/fsync,seq-read/cold,rand-read/8k-direct",
        "--db", str(tmp / "db"),
        timeout=540,
    )  # fmt: skip
    return {**ran.doc, "_stdout": ran.stdout}


def _result(doc: dict, subject: str, workload: str, variant: str) -> dict:
    (res,) = [
        r
        for r in doc["results"]
        if r["subject"] == subject
        and r["workload"] == workload
        and r["params"]["variant"] == variant
    ]
    return res


def test_three_samples_with_intervals(run_doc: dict) -> None:
    for r in run_doc["results"]:
        assert r["status"] == "ok", r
        assert len(r["samples"]) == 3 and all(v > 0 for v in r["samples"])
        lo, hi = r["ci95"]
        assert lo <= r["median"] <= hi


def test_fuse_daemon_cpu_is_measured(run_doc: dict) -> None:
    ntfs = _result(run_doc, "ntfs-3g", "seq-write", "fsync")
    ext4 = _result(run_doc, "ext4", "seq-write", "fsync")
    assert ntfs["cpu"]["driver_s"] > 0
    assert ntfs["cpu"]["per_gib"]["driver"] > 0
    assert ext4["cpu"]["driver_s"] == 0  # a kernel driver has no daemon
    assert ext4["cpu"]["kernel_threads_s"] > 0  # loop/kworker/jbd2 did the work instead
    assert ntfs["cpu"]["per_gib_s"] > ext4["cpu"]["per_gib_s"]


def test_cold_reads_hit_the_device(run_doc: dict) -> None:
    for subject in ("ext4", "ntfs-3g"):
        r = _result(run_doc, subject, "seq-read", "cold")
        assert r["cache"] == "cold-verified"
        for s in r["sample_details"]:
            assert s["device"]["read_bytes"] >= 0.9 * s["bytes"]


def test_direct_io_is_checked(run_doc: dict) -> None:
    # ext4 honours O_DIRECT; ntfs-3g accepts it but its daemon reads the device through the
    # page cache, which the device's own cache residency shows.
    assert _result(run_doc, "ext4", "rand-read", "8k-direct")["cache"] == "direct"
    ntfs = _result(run_doc, "ntfs-3g", "rand-read", "8k-direct")
    assert ntfs["cache"] == "direct-not-honored"
    assert any(f.startswith("direct-not-honored") for f in ntfs["flags"])


def test_table_shows_ratio_and_cpu(run_doc: dict) -> None:
    out = run_doc["_stdout"]
    assert "vs ext4" in out and "CPU s/GiB" in out and "cold ✓" in out


def test_run_target_on_a_real_mount_is_made_cold_as_root(tmp_path: Path) -> None:
    """An existing directory on a block device: as root, fsbench drops caches and the device's
    read counter verifies the cold read (no lab: nothing formatted or mounted by fsbench)."""
    import subprocess

    need_drivers("ext4")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(256 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(img)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        subprocess.run(["mount", dev, str(mnt)], check=True)
        try:
            proc = fsbench(
                "run",
                "--target",
                str(mnt),
                "--workloads",
                "seq-read/cold",
                "--repeat",
                "1",
                "--warmup",
                "0",
                "--min-sample-time",
                "0",
                "--out",
                str(tmp_path / "out"),
                "--db",
                str(tmp_path / "db"),
            )
            assert proc.returncode == 0, proc.stderr
            doc = json.loads((tmp_path / "out" / "results.json").read_text())
            (res,) = doc["results"]
            assert res["cache"] == "cold-verified", res["flags"]
            assert sorted(p.name for p in mnt.iterdir()) == ["lost+found"]  # scratch removed
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
