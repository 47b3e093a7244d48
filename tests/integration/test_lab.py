"""The lab on real loop devices and mounts: lifecycle order, mount options, FUSE daemons,
identical images, and making a subject cold."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    MiB,
    RunDirs,
    alive,
    cmdline,
    loop_backing,
    mount_at,
    need_drivers,
    wait_until,
)

from fsbench.errors import EnvironmentProblem
from fsbench.lab import loops, state
from fsbench.lab.backing import Backing
from fsbench.lab.integrity import Guard
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import parse_subject, with_lab_changes
from fsbench.probes.pagecache import resident_bytes
from fsbench.records.schema import Subject
from fsbench.schedule.targets import LabMounted, Rotation

pytestmark = pytest.mark.root

SIZE = 64 * MiB


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            h.update(chunk)
    return h.hexdigest()


def device_read_bytes(s: LabSubject) -> int:
    """Bytes the subject's loop device has delivered so far (sectors read x 512)."""
    fields = Path(f"/sys/block/{s.block_device}/stat").read_text().split()
    return int(fields[2]) * 512


def write_file(path: str, size: int) -> bytes:
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return data


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize(
    ("subject", "twin", "fstype"),
    [
        ("ext4:noatime", "ext4", "ext4"),
        ("ntfs-3g:big_writes,noatime", "ntfs-3g", "fuseblk"),
    ],
)
def test_lifecycle_options_daemon_and_identical_images(
    dirs: RunDirs, subject: str, twin: str, fstype: str
) -> None:
    specs = [parse_subject(subject), parse_subject(twin)]
    need_drivers(*{s.driver.name for s in specs})
    fuse = specs[0].driver.kind == "fuse"
    with Lab(dirs.run_id, Backing("ram"), SIZE) as lab:
        lab.check(specs)
        subs = lab.prepare(specs)
        a, b = subs
        assert [s.spec.id for s in subs] == [subject, twin]
        for s in subs:
            assert s.events == ["format", "copy", "attach"]
            assert s.image is not None and s.image.parent == Path(dirs.image_dir)
            assert os.path.getsize(s.image) == SIZE
            # Each subject's own copy, attached through its own loop device.
            assert loop_backing(s.device) == str(s.image)
            assert mount_at(s.mountpoint) is None
            # Every device reads ahead the same, whatever an earlier user left on it.
            assert loops.read_ahead_kb(s.device) == loops.READ_AHEAD_KB
        assert a.device != b.device and a.image != b.image
        # The copies of one format are byte-identical before anything mounts them.
        assert sha256(a.image) == sha256(b.image)
        # The pristine image is gone once copied.
        assert sorted(p.name for p in Path(dirs.image_dir).iterdir()) == sorted(
            [a.image.name, b.image.name]
        )

        for s in subs:
            lab.mount(s)
            assert s.events[-1] == "mount"
            m = mount_at(s.mountpoint)
            assert m is not None, f"{s.spec.id} not in /proc/self/mountinfo"
            assert m.fstype == fstype
            assert m.source == s.device
            assert s.entry is not None and s.entry.mountpoint == s.mountpoint
            assert os.path.isdir(s.workdir)

        # The requested option is in effect, the twin (no options) does not have it.
        assert "noatime" in m_opts(a)
        assert "noatime" in a.entry.effective_options.split(",")
        assert "noatime" not in m_opts(b)

        if fuse:
            assert a.daemon_pid and b.daemon_pid
            # Each subject found its own daemon (two of one driver, side by side).
            assert a.daemon_pid != b.daemon_pid
            for s in subs:
                argv = cmdline(s.daemon_pid)
                assert alive(s.daemon_pid)
                assert "ntfs-3g" in Path(argv[0]).name
                assert s.mountpoint in argv and s.device in argv
            # big_writes is a FUSE flag, not a mount option: mountinfo cannot show it, so check
            # that it reached the driver.
            assert "big_writes" in ",".join(cmdline(a.daemon_pid))
            assert "big_writes" not in ",".join(cmdline(b.daemon_pid))
        else:
            assert a.daemon_pid is None and b.daemon_pid is None

        # Unmounting one subject leaves the other mounted (and its daemon running).
        old_pid = a.daemon_pid
        lab.unmount(a)
        assert a.events == ["format", "copy", "attach", "mount", "unmount"]
        assert mount_at(a.mountpoint) is None
        assert mount_at(b.mountpoint) is not None
        if fuse:
            assert wait_until(lambda: not alive(old_pid), 10), "daemon outlived its mount"
            assert alive(b.daemon_pid)
        # Both images still attached until the lab closes.
        assert loop_backing(a.device) == str(a.image)

    assert a.events == ["format", "copy", "attach", "mount", "unmount"]
    assert b.events == ["format", "copy", "attach", "mount", "unmount"]
    if fuse:
        assert wait_until(lambda: not alive(b.daemon_pid or 0), 10)
    for s in subs:
        assert loop_backing(s.device) != str(s.image)
        assert not s.image.exists()
    dirs.assert_released()


def m_opts(s: LabSubject) -> list[str]:
    m = mount_at(s.mountpoint)
    assert m is not None
    return m.options.split(",")


def test_make_cold_fuse_remounts_with_a_new_daemon(dirs: RunDirs) -> None:
    need_drivers("ntfs-3g")
    specs = [parse_subject("ntfs-3g")]
    with Lab(dirs.run_id, Backing("ram"), SIZE) as lab:
        lab.check(specs)
        (s,) = lab.prepare(specs)
        lab.mount(s)
        first = s.daemon_pid
        assert first is not None and alive(first)
        path = os.path.join(s.workdir, "data")
        data = write_file(path, 8 * MiB)

        lab.make_cold(s)

        assert s.events == ["format", "copy", "attach", "mount", "unmount", "mount", "cold"]
        assert s.daemon_pid is not None and s.daemon_pid != first
        assert alive(s.daemon_pid)
        assert s.mountpoint in cmdline(s.daemon_pid)
        assert wait_until(lambda: not alive(first), 10), "the old daemon survived the remount"
        m = mount_at(s.mountpoint)
        assert m is not None and m.fstype == "fuseblk"
        # Nothing of the old mount's caches is left: the data comes from the device again.
        before = device_read_bytes(s)
        assert read_file(path) == data
        assert device_read_bytes(s) - before >= 8 * MiB
    dirs.assert_released()


def test_make_cold_kernel_drops_caches_without_remount(dirs: RunDirs) -> None:
    need_drivers("ext4")
    specs = [parse_subject("ext4")]
    with Lab(dirs.run_id, Backing("ram"), SIZE) as lab:
        lab.check(specs)
        (s,) = lab.prepare(specs)
        lab.mount(s)
        mount_id = s.entry.mount_id
        path = os.path.join(s.workdir, "data")
        data = write_file(path, 16 * MiB)

        # Warm: the file was just written, so reading it does not touch the device.
        before = device_read_bytes(s)
        assert read_file(path) == data
        warm = device_read_bytes(s) - before
        assert warm < 1 * MiB, f"warm read hit the device for {warm} bytes"

        lab.make_cold(s)

        assert s.events == ["format", "copy", "attach", "mount", "cold"]
        m = mount_at(s.mountpoint)
        assert m is not None and s.entry.mount_id == mount_id  # same mount: no remount
        before = device_read_bytes(s)
        assert read_file(path) == data
        cold = device_read_bytes(s) - before
        assert cold >= 16 * MiB, f"cold read took only {cold} bytes from the device"
    dirs.assert_released()


@pytest.fixture
def on_disk(run_id: str, state_dir: Path, disk_dir: Path) -> Iterator[tuple[Path, RunDirs]]:
    """A directory on a disk for file: backing (conftest's disk_dir) and the run's directories
    in it; whatever the test left is released after it."""
    holder = disk_dir
    d = RunDirs(run_id, str(holder / f"fsbench-{run_id}"), f"/run/fsbench/fsbench-{run_id}",
                str(state_dir / f"{run_id}.json"))  # fmt: skip
    try:
        yield holder, d
    finally:
        if d.leftovers():
            state.release(state.StateRecord(run_id, 0, d.image_dir, d.mount_dir, path=d.record))


def test_file_backing_images_are_written_in_full_and_settled(
    run_id: str, on_disk: tuple[Path, RunDirs]
) -> None:
    """On a disk, identical subjects ran apart for a whole run while the host cached and
    allocated their images: every image is written in full, identical, starts with nothing of
    it dirty or cached on the host, and is attached with direct I/O."""
    need_drivers("ext4")
    holder, d = on_disk
    specs = [parse_subject("ext4"), parse_subject("ext4:noatime")]
    steps: list[str] = []
    with Lab(run_id, Backing("file", str(holder)), SIZE, on_step=steps.append) as lab:
        lab.check(specs)
        a, b = lab.prepare(specs)
        assert steps == [f"writing 2 image(s) of 64 MiB in full in {holder}"]
        for s in (a, b):
            assert s.image is not None and s.image.parent == Path(d.image_dir)
            st = os.stat(s.image)
            assert st.st_size == SIZE
            assert st.st_blocks * 512 >= SIZE, f"{s.image}: holes left for the host"
            assert (resident_bytes(str(s.image)) or 0) == 0, "the copy is still cached"
            assert loop_backing(s.device) == str(s.image)
            # Not cached twice, nor written back on the host's own schedule.
            assert loops.uses_direct_io(s.device), f"{s.device}: a buffered loop"
        assert sha256(a.image) == sha256(b.image)
        lab.mount(a)
        assert mount_at(a.mountpoint) is not None
    d.assert_released()


def test_file_backing_deals_the_images_out_again_every_round(
    run_id: str, on_disk: tuple[Path, RunDirs]
) -> None:
    """Where an image lies on the disk stayed with its subject and split identical subjects
    (docs/verdicts.md, "Setups"): before every round after the first the images are dealt out
    again, each written afresh from its subject's pristine image (of its own format), its loop
    still direct and its loop settings moved with the subject, the integrity set on it again."""
    need_drivers("ext4", "ext2")
    holder, d = on_disk
    ra = loops.Knob("device", "read_ahead_kb", "256")
    specs = [parse_subject("ext4"), with_lab_changes(parse_subject("ext4"), knobs=(ra,)),
             parse_subject("ext2")]  # fmt: skip
    with Lab(run_id, Backing("file", str(holder)), SIZE) as lab:
        lab.check(specs)
        subjects = lab.prepare(specs)
        guard = Guard()
        targets = []
        for ls in subjects:
            rec = Subject(
                id=ls.spec.id, driver=ls.spec.driver.name, fs=ls.spec.driver.fs, kind="kernel"
            )
            guard.before_mount(ls, rec)
            lab.mount(ls)
            guard.after_mount(ls, read_only=False)
            os.makedirs(ls.workdir, exist_ok=True)
            Path(ls.workdir, "from-round-1").write_bytes(b"x" * 4096)
            targets.append(LabMounted(lab, ls, rec, MiB))
        rotation = Rotation(lab, targets, guard, seed=7)
        first = {ls.spec.id: ls.image for ls in subjects}
        moved = set()
        ids = {ls.spec.id for ls in subjects}
        for rep in (1, 2, 3, 4):
            assert rotation(rep, ids) == {}
            images = [ls.image for ls in subjects]
            assert len(set(images)) == 3  # a permutation: each image dealt once
            for ls in subjects:
                moved |= {ls.spec.id} if ls.image != first[ls.spec.id] else set()
                assert ls.mounted and loop_backing(ls.device) == str(ls.image)
                assert loops.uses_direct_io(ls.device)
                assert mount_at(ls.mountpoint).fstype == ls.spec.driver.fs  # its own format
                assert not Path(ls.workdir, "from-round-1").exists()
                want = "256" if ls.spec.knobs else str(loops.READ_AHEAD_KB)
                assert str(loops.read_ahead_kb(ls.device)) == want, ls.spec.id
        assert moved, "no subject was ever dealt another image"
        # A subject the round does not sample (settled) keeps its image, mount and files.
        kept = subjects[2]
        Path(kept.workdir, "still-here").write_bytes(b"y")
        image, mount = kept.image, kept.entry
        for rep in (5, 6):
            assert rotation(rep, ids - {kept.spec.id}) == {}
            assert kept.image == image and kept.entry == mount
            assert Path(kept.workdir, "still-here").exists()
            assert {ls.image for ls in subjects[:2]} == set(images) - {image}
        assert len(rotation.dealt) == 7  # the first round's and six more
        assert all(w.expected and w.set_error is None for w in guard.watches.values())
    d.assert_released()


def test_file_backing_refuses_images_the_disk_cannot_hold(
    run_id: str, state_dir: Path, tmp_path: Path
) -> None:
    """Written in full, the images need their space up front: refused before anything is made."""
    need_drivers("ext4")
    free = shutil.disk_usage(tmp_path).free
    size = free // 2 + 64 * MiB  # two subjects and a pristine cannot fit
    with Lab(run_id, Backing("file", str(tmp_path)), size) as lab:
        with pytest.raises(EnvironmentProblem, match="is free there"):
            lab.check([parse_subject("ext4"), parse_subject("ext4")])
        assert not list(Path(lab.record.image_dir).glob("*.img"))
