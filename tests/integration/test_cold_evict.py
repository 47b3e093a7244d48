"""The cheap cold cache on real mounts: after `Lab.evict` (the file's pages and the device's
buffers, nothing else) a read of a file that was just read warm comes from the device again,
by the device's own counter, for a kernel driver and a FUSE driver; no remount, no freeze."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import MiB, RunDirs, need_drivers

from fsbench.lab.backing import Backing
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import parse_subject

pytestmark = pytest.mark.root

SIZE = 64 * MiB
FILE = 16 * MiB


def device_read_bytes(s: LabSubject) -> int:
    return int(Path(f"/sys/block/{s.block_device}/stat").read_text().split()[2]) * 512


def read_all(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(MiB):
            n += len(chunk)
    return n


@pytest.mark.parametrize("driver", ["ext4", "ntfs-3g"])
def test_an_evicted_file_is_read_from_the_device(dirs: RunDirs, driver: str) -> None:
    need_drivers(driver)
    specs = [parse_subject(driver)]
    with Lab(dirs.run_id, Backing("ram"), SIZE) as lab:
        lab.check(specs)
        (s,) = lab.prepare(specs)
        lab.mount(s)
        daemon, mount_id = s.daemon_pid, s.entry.mount_id if s.entry else None
        path = os.path.join(s.workdir, "data")
        with open(path, "wb") as f:
            f.write(os.urandom(FILE))  # dirty, not synced: the eviction must write it back
        before = device_read_bytes(s)
        assert read_all(path) == FILE
        warm = device_read_bytes(s) - before
        assert warm < FILE // 4, f"the warm read took {warm} B from the device"

        assert lab.evict(s) is None

        assert s.events[-1] == "evict" and "cold" not in s.events
        # The same mount and daemon: nothing was remounted.
        assert s.daemon_pid == daemon and s.entry is not None and s.entry.mount_id == mount_id
        before = device_read_bytes(s)
        assert read_all(path) == FILE
        cold = device_read_bytes(s) - before
        assert cold >= 0.9 * FILE, f"the evicted read took only {cold} B from the device"
    dirs.assert_released()


def test_a_workdir_of_many_files_is_left_to_the_full_method(dirs: RunDirs) -> None:
    need_drivers("ext4")
    specs = [parse_subject("ext4")]
    with Lab(dirs.run_id, Backing("ram"), SIZE) as lab:
        lab.check(specs)
        (s,) = lab.prepare(specs)
        lab.mount(s)
        for i in range(70):
            Path(s.workdir, f"f{i}").write_bytes(b"x")
        why = lab.evict(s)
        assert why is not None and "more than 64 files" in why
        assert "evict" not in s.events
    dirs.assert_released()
