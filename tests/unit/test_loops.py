"""loops.detach: a loop that went by itself (autoclear after the last unmount) is detached, not
a failure; one still attached that losetup cannot free is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fsbench.errors import LabError
from fsbench.lab import loops
from fsbench.probes.procfs import ProcFS


def _losetup_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
        msg = f"losetup: {argv[-1]}: detach failed: No such device or address\n"
        return subprocess.CompletedProcess(argv, 1, "", msg)

    monkeypatch.setattr(loops, "run", run)


def test_a_loop_gone_by_itself_is_detached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _losetup_fails(monkeypatch)
    (tmp_path / "sys/block/loop3/loop").mkdir(parents=True)
    (tmp_path / "sys/block/loop3/loop/backing_file").write_text("/dev/shm/other.img\n")
    assert loops.detach("/dev/loop7", ProcFS(str(tmp_path))) is None


def test_a_loop_still_attached_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _losetup_fails(monkeypatch)
    (tmp_path / "sys/block/loop7/loop").mkdir(parents=True)
    (tmp_path / "sys/block/loop7/loop/backing_file").write_text("/dev/shm/x.img (deleted)\n")
    why = loops.detach("/dev/loop7", ProcFS(str(tmp_path)))
    assert why is not None and "No such device or address" in why


def test_attach_sets_the_same_read_ahead_on_every_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loop device keeps its queue settings after detach: one left at 2,560 KiB by an earlier
    # user must read ahead like the others.
    queue = tmp_path / "block/loop0/queue"
    queue.mkdir(parents=True)
    (queue / "read_ahead_kb").write_text("2560\n")

    def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, "/dev/loop0\n", "")

    monkeypatch.setattr(loops, "run", run)
    assert loops.attach(Path("/dev/shm/x.img"), sysfs=str(tmp_path)) == "/dev/loop0"
    assert loops.read_ahead_kb("/dev/loop0", str(tmp_path)) == loops.READ_AHEAD_KB == 128


def test_a_device_whose_read_ahead_cannot_be_set_is_detached_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "/dev/loop5\n", "")

    monkeypatch.setattr(loops, "run", run)
    with pytest.raises(LabError, match="read_ahead_kb"):
        loops.attach(Path("/dev/shm/x.img"), sysfs=str(tmp_path))  # no such queue dir
    assert calls[-1] == ["losetup", "-d", "/dev/loop5"]


def test_a_loop_that_cannot_use_direct_io_is_detached_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """file: backing asks for direct I/O; a host file system refusing O_DIRECT would leave a
    buffered loop, whose image the host caches and writes back on its own schedule."""
    calls: list[list[str]] = []
    (tmp_path / "block/loop2/queue").mkdir(parents=True)
    (tmp_path / "block/loop2/queue/read_ahead_kb").write_text("128\n")
    (tmp_path / "block/loop2/loop").mkdir()
    dio = tmp_path / "block/loop2/loop/dio"

    def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "/dev/loop2\n", "")

    monkeypatch.setattr(loops, "run", run)
    dio.write_text("1\n")
    assert loops.attach(tmp_path / "x.img", sysfs=str(tmp_path), direct_io=True)
    assert "--direct-io=on" in calls[-1]
    dio.write_text("0\n")
    with pytest.raises(LabError, match="could not use direct I/O"):
        loops.attach(tmp_path / "x.img", sysfs=str(tmp_path), direct_io=True)
    assert calls[-1] == ["losetup", "-d", "/dev/loop2"]
    # Other backings keep the buffered loop they were measured with.
    loops.attach(Path("/dev/shm/x.img"), sysfs=str(tmp_path))
    assert "--direct-io=on" not in calls[-1]
