"""RAM images are dealt memory alike: every image's pages are written a chunk of each at a
time, and the pristine is copied over those pages rather than into new ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsbench.lab import backing as lab


def test_fill_interleaved_deals_chunks_round_robin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lab, "_CHUNK", 4096)
    paths = [tmp_path / f"{i}.img" for i in range(3)]
    writes: list[tuple[int, int]] = []
    real = os.pwrite

    def pwrite(fd: int, data: bytes, off: int) -> int:
        writes.append((fd, off))
        return real(fd, data, off)

    monkeypatch.setattr(lab.os, "pwrite", pwrite)
    lab.fill_interleaved(paths, 3 * 4096 + 100)
    assert [os.path.getsize(p) for p in paths] == [3 * 4096 + 100] * 3
    assert all(p.read_bytes() == bytes(3 * 4096 + 100) for p in paths)
    # Offset by offset, every image gets its chunk before any image gets the next one.
    offsets = [off for _, off in writes]
    assert offsets == [o for o in (0, 4096, 8192, 12288) for _ in range(3)]
    assert len({fd for fd, _ in writes[:3]}) == 3


def test_copy_over_keeps_the_images_own_file(tmp_path: Path) -> None:
    src, dst = tmp_path / "pristine.img", tmp_path / "0.img"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    lab.fill_interleaved([dst], src.stat().st_size)
    lab.copy_over(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    # Never truncated (that would free the pages it was dealt): a shorter source leaves the
    # image's size and its tail as they were.
    (tmp_path / "short").write_bytes(b"x" * 10)
    lab.copy_over(tmp_path / "short", dst)
    assert dst.stat().st_size == src.stat().st_size
    assert dst.read_bytes()[:10] == b"x" * 10 and dst.read_bytes()[10:] == src.read_bytes()[10:]
