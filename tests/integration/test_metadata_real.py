"""The metadata workload on real drivers: ext4 (kernel), ntfs-3g and exfat-fuse (FUSE).

chmod is where drivers differ in kind, not only in speed: ext4 and ntfs-3g -o permissions change
modes; exFAT has no POSIX permissions (its drivers declare it); and exfat-fuse, like ntfs-3g
without -o permissions, returns success from chmod while the mode stays 0777 — reported
`unsupported` with that reason, never as a (fast) chmod rate.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fsbench, fsbench_released, mount_at, wait_until

from fsbench.lab.drivers import DRIVERS, availability

MiB = 1024 * 1024
# --scale 0.2 of the default 10,000 files: every variant, check and unsupported verdict as at
# full size, in a fifth of the time; a FUSE daemon's stat work still shows as its CPU.
SCALE = "0.2"
FILES = 2_000


def need(*drivers: str) -> None:
    for name in drivers:
        av = availability(DRIVERS[name])
        if not av.available:
            pytest.skip(f"driver {name} not available: {av.reason}")


def _results(doc: dict) -> dict[tuple[str, str], dict]:
    out = {(r["subject"], r["params"]["variant"]): r for r in doc["results"]}
    assert len(out) == len(doc["results"]), "two results with one identity"
    return out


def _assert_ok(r: dict) -> None:
    key = (r["subject"], r["params"]["variant"])
    assert r["status"] == "ok", (key, r["error"])
    assert (r["workload"], r["unit"], r["metric"]) == ("metadata", "ops/s", "ops")
    assert r["samples"] and all(v > 0 for v in r["samples"]), key
    for s in r["sample_details"]:
        # A sample may be several iterations (each at least as long as a sample must last).
        assert s["ops"] == FILES * s["extra"].get("iterations", 1) and s["bytes"] == 0, key
        lat = s["extra"]["lat_us"]
        assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"], key
        assert s["extra"]["failed"] == 0


def _compare(tmp_path: Path, state_dir: Path, *subjects: str, workloads: str) -> dict:
    doc = fsbench_released(
        state_dir, tmp_path / "out",
        "compare", *subjects, "--workloads", workloads, "--size", "256M", "--scale", SCALE,
        "--repeat", "1", "--warmup", "0", "--min-sample-time", "0",
        "--db", str(tmp_path / "db"),
        timeout=540,  # under pytest's 600 s cap, so a hang fails here with fsbench's stderr
    ).doc  # fmt: skip
    assert all(s["status"] == "ok" for s in doc["subjects"]), doc["subjects"]
    return doc


@pytest.mark.root
def test_compare_ext4_and_ntfs3g(tmp_path: Path, state_dir: Path) -> None:
    need("ext4", "ntfs-3g")
    doc = _compare(
        tmp_path,
        state_dir,
        "ext4",
        "ntfs-3g",
        "ntfs-3g:permissions",
        workloads="metadata/create-flat,metadata/stat-flat,metadata/chmod-flat",
    )
    results = _results(doc)
    subjects = ("ext4", "ntfs-3g", "ntfs-3g:permissions")
    assert set(results) == {
        (s, v) for s in subjects for v in ("create-flat", "stat-flat", "chmod-flat")
    }
    for key, r in results.items():
        if key != ("ntfs-3g", "chmod-flat"):
            _assert_ok(r)
    # ntfs-3g maps no permissions unless asked (-o permissions): chmod succeeds and does nothing.
    ignored = results[("ntfs-3g", "chmod-flat")]
    assert ignored["status"] == "unsupported", ignored
    assert "ignores it" in ignored["error"] and not ignored["samples"]
    # With -o permissions it really changes modes (verified by the workload after each sample).
    perm = "ntfs-3g:permissions"
    assert results[(perm, "chmod-flat")]["params"]["modes"] == "0644<->0600"

    # A FUSE driver's work shows as daemon CPU, a kernel driver has none. Over the three
    # workloads: at --scale 0.2 a stat-flat sample takes ~20 ms, its daemon CPU one 10 ms tick
    # or none (CI once read 0.0); the three together ~60 ms.
    def driver_s(subject: str) -> float:
        return sum(r["cpu"]["driver_s"] for (s, _), r in results.items() if s == subject)

    assert driver_s(perm) > 0
    assert driver_s("ext4") == 0


@pytest.mark.root
def test_exfat_fuse_chmod_is_unsupported(tmp_path: Path, state_dir: Path) -> None:
    need("exfat-fuse")
    doc = _compare(
        tmp_path, state_dir, "exfat-fuse", workloads="metadata/stat-flat,metadata/chmod-flat"
    )
    results = _results(doc)
    _assert_ok(results[("exfat-fuse", "stat-flat")])
    chmod = results[("exfat-fuse", "chmod-flat")]
    assert chmod["status"] == "unsupported", chmod
    assert "POSIX permissions" in chmod["error"]
    assert not chmod["samples"]


@pytest.fixture
def exfat_fuse_mount(tmp_path: Path) -> Iterator[Path]:
    """An exFAT image mounted by exfat-fuse by hand (it needs a block device: a loop)."""
    need("exfat-fuse")
    image, mnt = tmp_path / "exfat.img", tmp_path / "mnt"
    with open(image, "wb") as f:
        f.truncate(128 * MiB)
    subprocess.run(["mkfs.exfat", str(image)], check=True, capture_output=True)
    mnt.mkdir()
    loop = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        subprocess.run(
            [DRIVERS["exfat-fuse"].binary_path() or "mount.exfat-fuse", loop, str(mnt)],
            check=True,
            capture_output=True,
        )
        try:
            yield mnt
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
            assert wait_until(lambda: mount_at(str(mnt)) is None, 10)
    finally:
        subprocess.run(["losetup", "--detach", loop], check=True)
    backing = Path(f"/sys/block/{Path(loop).name}/loop/backing_file")
    assert not backing.exists() or str(image) not in backing.read_text()


@pytest.mark.root
def test_exfat_fuse_ignores_chmod_and_a_directory_run_says_so(
    tmp_path: Path, exfat_fuse_mount: Path
) -> None:
    """A directory target declares no capabilities, so the workload has to find out itself:
    exfat-fuse returns 0 from chmod and the mode stays 0777."""
    out = tmp_path / "out"
    res = fsbench(
        "run",
        "--target",
        str(exfat_fuse_mount),
        "--workloads",
        "metadata/chmod-flat,metadata/stat-flat",
        "--scale",
        SCALE,
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--min-sample-time",
        "0",
        "--out",
        str(out),
        "--db",
        str(tmp_path / "db"),
        timeout=540,
    )
    assert res.returncode == 0, res.stderr
    results = _results(json.loads((out / "results.json").read_text()))
    subject = str(exfat_fuse_mount)
    chmod = results[(subject, "chmod-flat")]
    assert chmod["status"] == "unsupported", chmod
    # The semantics probe's own words: chmod accepted, the mode did not change.
    assert "ignores it" in chmod["error"] and "0777" in chmod["error"]
    _assert_ok(results[(subject, "stat-flat")])
    # The scratch directory is gone: nothing of fsbench is left on the volume.
    assert list(exfat_fuse_mount.iterdir()) == []
