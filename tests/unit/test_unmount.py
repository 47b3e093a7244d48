"""lab/mounts.unmount when nothing is mounted there any more: the daemons it was given are
stopped all the same (a FUSE daemon left after its mount went), and nothing is noted."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fsbench.lab import mounts
from fsbench.probes import processes


def test_a_mountpoint_no_longer_mounted_still_has_its_daemon_stopped(tmp_path: Path) -> None:
    daemon = subprocess.Popen(["sleep", "60"])
    try:
        assert mounts.find_mount(str(tmp_path)) is None
        assert mounts.unmount(str(tmp_path), [daemon.pid], timeout=5) == []
        assert daemon.wait(timeout=10) is not None
        assert not processes.running(daemon.pid)
    finally:
        daemon.kill()
        daemon.wait()


def test_nothing_to_stop_and_nothing_mounted_is_quiet(tmp_path: Path) -> None:
    assert mounts.unmount(str(tmp_path), [], timeout=5) == []
