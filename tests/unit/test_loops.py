"""loops.detach: a loop that went by itself (autoclear after the last unmount) is detached, not
a failure; one still attached that losetup cannot free is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

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
