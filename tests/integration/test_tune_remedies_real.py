"""The remedies table against the real drivers: every mount option a remedy names is one its
driver accepts, proven by mounting a small image with it (one lab per format, each remedy a
subject) and finding the mount in /proc/self/mountinfo."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest
from conftest import MiB, RunDirs, fsbench, mount_at, release_leftovers

from fsbench.fuse import transports
from fsbench.lab.backing import Backing
from fsbench.lab.drivers import DRIVERS, Driver, availability
from fsbench.lab.formats import FORMATS
from fsbench.lab.lab import Lab
from fsbench.lab.loops import Knob, current, mount_bdi, queue_path, read_ahead_kb
from fsbench.lab.subject import parse_subject, with_lab_changes
from fsbench.tune.remedies import REMEDIES
from fsbench.tune.session import candidate_spec
from fsbench.tune.subjects import transport_driver

pytestmark = pytest.mark.root


def subjects_by_format() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in REMEDIES.values():
        for name in r.drivers:
            if r.option_names():
                d = DRIVERS[name]
                out.setdefault(d.fs, []).append(f"{name}:{','.join(r.option_names())}")
    return {fs: list(dict.fromkeys(ids)) for fs, ids in out.items()}


CASES = subjects_by_format()


def skip_without_drivers(drivers: list[Driver], what: str) -> NoReturn:
    """Skip a test none of whose drivers is available here. Not applicable (a skip strict CI
    lets through, in conftest's words) only when every one is a kernel driver this kernel
    lacks; a FUSE daemon or a build missing is what CI installs, so its skip fails there."""
    lacking = {d.name: availability(d) for d in drivers}
    said = "; ".join(f"{n}: {a.reason}" for n, a in lacking.items())
    if all(a.lacks == "kernel" for a in lacking.values()):
        pytest.skip(f"not applicable here: no driver of {what} in this kernel ({said})")
    pytest.skip(f"no driver of {what} available ({said})")


def test_the_table_names_options_for_the_drivers_here() -> None:
    # The formats whose drivers this machine has (CI installs them all): each one tested below.
    assert {"ntfs", "ext4", "exfat", "xfs", "btrfs"} <= set(CASES)


@pytest.mark.parametrize("fs", sorted(CASES))
def test_every_remedy_option_mounts(dirs: RunDirs, fs: str) -> None:
    specs = [parse_subject(s) for s in CASES[fs]]
    # A driver this host lacks (ntfs3, exfat in the kernel) is for another host's tune.
    specs = [s for s in specs if availability(s.driver).available]
    if not specs:
        skip_without_drivers([s.driver for s in map(parse_subject, CASES[fs])], fs)
    size = max(FORMATS[fs].min_size, 32 * MiB)
    refused = []
    with Lab(dirs.run_id, Backing("ram"), size, tune_memory=False) as lab:
        lab.check(specs)
        for s in lab.prepare(specs):
            try:
                lab.mount(s)
            except Exception as e:  # the driver's own words: which option it refused
                refused.append(f"{s.spec.id}: {e}")
                continue
            assert mount_at(s.mountpoint) is not None, s.spec.id
            lab.unmount(s)
    assert refused == []
    dirs.assert_released()


def test_the_lab_makes_a_subjects_own_mkfs_and_device_settings(dirs: RunDirs) -> None:
    """A tune candidate's lab change, made for it alone and undone: its own image formatted
    with its mkfs options (exFAT's cluster size, read from the boot sector), read_ahead_kb on
    its loop device and on its FUSE mount's bdi; the untuned subject beside it keeps the lab's,
    and the loop device's setting is put back before it is detached."""
    plain = parse_subject("exfat-fuse")
    av = availability(plain.driver)
    if not av.available:  # a package CI installs: strict CI fails this skip, as it should
        pytest.skip(f"exfat-fuse not available: {av.reason}")
    made = with_lab_changes(
        plain, ("-c", "1M"), (Knob("device", "read_ahead_kb", "1024"),
                              Knob("mount", "read_ahead_kb", "2048"))
    )  # fmt: skip
    said = "mkfs -c 1M, loop read_ahead_kb=1024, FUSE bdi read_ahead_kb=2048"
    assert made.id == f"exfat-fuse ({said})"
    with Lab(dirs.run_id, Backing("ram"), 32 * MiB, tune_memory=False) as lab:
        lab.check([plain, made])
        a, b = lab.prepare([plain, made])
        assert b.mkfs_command is not None and b.mkfs_command[-3:-1] == ["-c", "1M"]
        for s in (a, b):
            assert s.image is not None
            boot = s.image.read_bytes()[:512]  # BytesPerSectorShift, SectorsPerClusterShift
            s.events.append(f"cluster {1 << (boot[108] + boot[109])}")
            lab.mount(s)
        # 4 KiB: mkfs.exfat's own choice for a 32 MiB volume.
        assert "cluster 4096" in a.events and "cluster 1048576" in b.events
        assert read_ahead_kb(a.device or "") == 128 and read_ahead_kb(b.device or "") == 1024
        bdis = [mount_bdi(s.mountpoint) for s in (a, b)]
        assert [int((p / "read_ahead_kb").read_text()) for p in bdis if p] == [128, 2048]
        lab.remount(b)  # a cold read's remount: the mount's bdi is new, and set again
        assert int((mount_bdi(b.mountpoint) / "read_ahead_kb").read_text()) == 2048  # type: ignore[operator]
        loop = b.device or ""
    assert read_ahead_kb(loop) == 128  # put back before the loop device was released
    dirs.assert_released()


# A remedy that needs a larger volume (ext4's 256 MiB journal) has a test of its own below.
LAB_MADE = [
    r for r in REMEDIES.values() if r.kind in ("mkfs-option", "block-device") and not r.min_volume
]


@pytest.mark.parametrize("name", [r.name for r in LAB_MADE])
def test_every_lab_made_remedy_is_made_and_mounts(dirs: RunDirs, name: str) -> None:
    """Each mkfs or block-device remedy of the table, made by the lab for its first driver
    available here (its mkfs options accepted, its settings written) and mounted."""
    r = REMEDIES[name]
    here = [d for d in r.drivers if availability(DRIVERS[d]).available]
    if not here:
        skip_without_drivers([DRIVERS[d] for d in r.drivers], name)
    spec = candidate_spec(parse_subject(here[0]), r)
    assert spec.mkfs or spec.knobs
    with Lab(dirs.run_id, Backing("ram"), max(FORMATS[spec.driver.fs].min_size, 32 * MiB),
             tune_memory=False) as lab:  # fmt: skip
        lab.check([spec])
        (s,) = lab.prepare([spec])
        lab.mount(s)
        assert mount_at(s.mountpoint) is not None
        for k in spec.knobs:
            where = mount_bdi(s.mountpoint) if k.where == "mount" else None
            path = where / k.name if where else queue_path(s.device or "", k.name)
            assert current(path) == k.value, (name, str(path))
    dirs.assert_released()


# What the kernel shows in /proc/self/mountinfo for an option it applied (the superblock's
# options): proof the driver took the change, not just that the mount succeeded.
SHOWN = {"allocsize=16m": "allocsize=16384k"}
KERNEL_FS = [
    r for r in REMEDIES.values() if r.kind == "mount-option" and r.drivers[0] in ("ext4", "xfs",
                                                                                  "btrfs")
]  # fmt: skip


@pytest.mark.parametrize("name", [r.name for r in KERNEL_FS])
def test_every_kernel_fs_remedy_is_applied_by_its_driver(dirs: RunDirs, name: str) -> None:
    """Each mount option of a kernel file system's remedy mounted on a real loop device, and
    shown by the kernel among the superblock's options."""
    r = REMEDIES[name]
    for driver in r.drivers:
        spec = candidate_spec(parse_subject(driver), r)
        size = max(FORMATS[spec.driver.fs].min_size, 32 * MiB, r.min_volume)
        with Lab(dirs.run_id, Backing("ram"), size, tune_memory=False) as lab:
            lab.check([spec])
            (s,) = lab.prepare([spec])
            lab.mount(s)
            m = mount_at(s.mountpoint)
            assert m is not None, spec.id
            shown = set(m.options.split(","))
            for o in r.option_names():
                assert SHOWN.get(o, o) in shown, (spec.id, o, m.options)
        dirs.assert_released()


def test_the_larger_journal_is_made_at_mkfs(dirs: RunDirs) -> None:
    """ext4's 256 MiB journal: its own image, formatted with it (dumpe2fs reads the size
    back), mounted; the untuned image beside it keeps mke2fs's own."""
    r = REMEDIES["ext4 journal 256 MiB"]
    plain = parse_subject("ext4")
    spec = candidate_spec(plain, r)
    with Lab(dirs.run_id, Backing("ram"), r.min_volume, tune_memory=False) as lab:
        lab.check([plain, spec])
        a, b = lab.prepare([plain, spec])
        sizes = []
        for s in (a, b):
            lab.mount(s)
            assert mount_at(s.mountpoint) is not None
            out = subprocess.run(["dumpe2fs", "-h", s.device or ""], capture_output=True,
                                 text=True, check=True).stdout  # fmt: skip
            # "Total journal size:" (e2fsprogs 1.46+), "Journal size:" before
            sizes += [x.split(":")[1].strip() for x in out.splitlines()
                      if x.removeprefix("Total ").lower().startswith("journal size:")]  # fmt: skip
    assert sizes[1] == "256M" and sizes[0] != "256M", sizes
    dirs.assert_released()


TRANSPORT = [r for r in REMEDIES.values() if r.kind == "transport"]


def test_every_transport_remedy_runs_over_its_transport(tmp_path: Path, state_dir: Path) -> None:
    """Each transport remedy's candidate for each daemon it names that this machine has, in one
    real `fsbench compare`: every subject mounted and measured over the transport it names."""
    specs = {}
    for r in TRANSPORT:
        for name in r.drivers:
            plain = parse_subject(name)
            d = DRIVERS[transport_driver(plain, r)]
            if availability(d).available and transports.kernel_status(r.change).available:
                specs[candidate_spec(plain, r).id] = r.change
    if not specs:
        pytest.skip("not applicable here: no daemon or kernel here offers a transport remedy")
    out = tmp_path / "out"
    try:
        res = fsbench(
            "compare", *specs, "--size", "64M", "--scale", "0.1", "--workloads",
            "seq-write/fsync", "--repeat", "1", "--warmup", "0", "--min-sample-time", "0.01",
            "--no-integrity", "--out", str(out), "--db", str(tmp_path / "results.db"),
            timeout=600,
        )  # fmt: skip
    finally:
        release_leftovers(state_dir)
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "results.json").read_text())
    got = {s["id"]: s["transport"] for s in doc["subjects"]}
    assert {i: got.get(i) for i in specs} == specs
    assert all(r["status"] == "ok" for r in doc["results"]), doc["results"]
