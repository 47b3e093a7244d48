"""ntfsck (ntfsprogs-plus) as NTFS's checker: the libc it needs read from its Depends, the
fetched files checked on reuse, and integrity choosing it over ntfsfix only when it is there.
No network: the fetched tree is laid out by hand as apt and dpkg would leave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsbench.host.apt import file_sha256
from fsbench.lab import integrity, ntfsck
from fsbench.lab.formats import FORMATS

SHOW = """Package: ntfsprogs-plus
Version: 1.0.0-5
Depends: libc6 (>= 2.38), libuuid1 (>= 2.16)
"""


def test_the_libc_it_needs_comes_from_its_depends() -> None:
    assert ntfsck.libc_pin(SHOW) == "2.38"
    assert ntfsck.libc_pin("Package: x\nDepends: libuuid1\n") is None


def _fetched(root: Path) -> Path:
    """A build directory as _fetch leaves it: the wrapper and its files, with their digests."""
    d = ntfsck.build_dir(root)
    files = {
        "ntfsck": d / "bin" / "ntfsck",
        "ntfsck.bin": d / "root" / "usr" / "sbin" / "ntfsck",
        "ld.so": d / "root" / ntfsck.LIBDIR / ntfsck.LOADER,
        "libc.so.6": d / "root" / ntfsck.LIBDIR / "libc.so.6",
    }
    for name, p in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"#!/bin/sh\necho {name}\n")
        p.chmod(0o755)
    record = ntfsck.Build(
        key=d.name,
        version="1.0.0-5",
        packages={"ntfsprogs-plus": "1.0.0-5", "libc6": "2.43-7"},
        daemons={k: str(v) for k, v in files.items()},
        daemon_sha256={k: file_sha256(v) for k, v in files.items()},
        log=str(d / "build.log"),
    )
    (d / "build.json").write_text(json.dumps(record.__dict__))
    return files["libc.so.6"]


def test_ntfsck_is_ntfs_checker_when_fetched_and_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ntfsck, "cache_root", lambda: tmp_path)
    # Not fetched: the format's own (ntfsfix -n).
    assert ntfsck.checker() is None
    assert integrity.checker_for("ntfs") is FORMATS["ntfs"].checker
    libc = _fetched(tmp_path)
    c = integrity.checker_for("ntfs")
    assert c is not None and c.argv[1:] == ("-n",) and c.argv[0].endswith("/bin/ntfsck")
    assert "1.0.0-5" in c.package and "2.43-7" in c.package
    assert integrity.checker_for("ext4") is FORMATS["ext4"].checker
    # A changed file (here unstable's libc it runs with) is not run: back to ntfsfix.
    libc.write_text("changed")
    assert integrity.checker_for("ntfs") is FORMATS["ntfs"].checker


def test_a_guest_never_fetches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ntfsck, "cache_root", lambda: tmp_path)
    monkeypatch.setenv("FSBENCH_IN_VM", "1")

    def no_network() -> None:
        raise AssertionError("a guest fetched")

    monkeypatch.setattr(ntfsck, "ensure", no_network)
    assert ntfsck.fetch_for({"ext4"}) is None
    assert "not fetched on the host" in (ntfsck.fetch_for({"ntfs"}) or "")
    _fetched(tmp_path)
    assert ntfsck.fetch_for({"ntfs"}) is None
