"""Fetching a Debian kernel whose image package is split (7.x: linux-image meta -> linux-binary,
linux-modules, linux-base): the parts read from the meta's Depends (a real `apt-cache show`
captured from unstable), each fetched at its pinned version, unpacked with the real dpkg into one
tree, recorded, and checked on reuse. apt itself is replaced (no network): its downloads are
small .debs built here with the real dpkg-deb."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fsbench.errors import EnvironmentProblem
from fsbench.vm import kernels
from fsbench.vm.kernels import (
    KNOWN,
    control_fields,
    kernel_features,
    listing,
    load_cached,
    resolve,
    split_parts,
)

FIXTURE = Path(__file__).parent / "fixtures" / "apt-show-linux-image-7.2.13.txt"
META = "linux-image-7.2.13+deb14-amd64"
REL = "7.2.13+deb14-amd64"
V = "7.2.13-1"

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")


def test_split_parts_come_from_the_meta_packages_depends() -> None:
    show = FIXTURE.read_text()
    assert control_fields(show)["Version"] == V
    assert split_parts(show) == [
        (f"linux-base-{REL}", V),
        (f"linux-binary-{REL}", V),
        (f"linux-modules-{REL}", V),
    ]
    # 6.12's image package holds the kernel itself: nothing to follow.
    whole = "Package: linux-image-6.12.9+deb12-amd64-unsigned\nVersion: 6.12.9-1\n"
    assert split_parts(whole + "Depends: kmod, linux-base (>= 4.3~)\n") == []


def test_an_unpinned_part_is_refused() -> None:
    with pytest.raises(EnvironmentProblem, match="not pinned"):
        split_parts(f"Package: {META}\nDepends: linux-binary-{REL}\n")


def _deb(out: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    tree = out.parent / f"tree-{name}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: test <t@example.org>\nDescription: test part\n"
    )
    for rel, data in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(data)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(tree), str(out)],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(tree)


# Where 7.2.13's packages put their files (merged /usr: everything below usr/lib/modules/REL).
MODS = f"usr/lib/modules/{REL}"
PARTS = {
    f"linux-binary-{REL}": {f"{MODS}/vmlinuz": b"\x7fnot really a bzImage"},
    f"linux-modules-{REL}": {
        f"{MODS}/kernel/fs/ntfs/ntfs.ko.xz": b"ntfs",
        f"{MODS}/kernel/fs/exfat/exfat.ko.xz": b"exfat",
        f"{MODS}/kernel/fs/fat/vfat.ko.xz": b"vfat",
        f"{MODS}/kernel/fs/fuse/fuse.ko.xz": b"fuse",
        f"{MODS}/modules.builtin": b"kernel/fs/ext4/ext4.ko\n",
    },
    f"linux-base-{REL}": {
        f"{MODS}/config": b"CONFIG_NTFS_FS=m\n# CONFIG_NTFS3_FS is not set\n"
        b"CONFIG_FUSE_IO_URING=y\nCONFIG_FUSE_PASSTHROUGH=y\n"
    },
}


class FakeApt:
    """apt-get/apt-cache as unstable answered them; everything else runs for real."""

    def __init__(self, wrong_version: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.wrong_version = wrong_version
        self.real = kernels._run

    def __call__(self, argv: list[str], cwd: Path | None = None) -> str:
        self.calls.append(argv)
        tool, rest = argv[0], [a for a in argv[1:] if not a.startswith("-o") and "=" not in a]
        if tool == "apt-get" and argv[-1] == "update":
            return ""
        if tool == "apt-cache" and "pkgnames" in argv:
            return f"{META}\n{META}-dbg\nlinux-image-amd64\nlinux-image-6.1.0-1-amd64\n"
        if tool == "apt-cache" and "show" in argv:
            assert argv[-1] == META
            return FIXTURE.read_text()
        if tool == "apt-get" and "download" in argv:
            assert cwd is not None
            for pin in argv[argv.index("download") + 1 :]:
                name, _, version = pin.partition("=")
                if self.wrong_version and name.startswith("linux-modules-"):
                    version = "7.2.12-1"
                _deb(cwd / f"{name}_{version}_amd64.deb", name, version, PARTS[name])
            return ""
        assert tool in ("dpkg", "dpkg-deb"), rest
        return self.real(argv, cwd)


def test_a_split_kernel_is_fetched_part_by_part_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake = FakeApt()
    monkeypatch.setattr(kernels, "_run", fake)
    k = resolve("debian-sid")
    assert k.release == REL
    assert k.image.endswith(f"{MODS}/vmlinuz") and Path(k.image).is_file()
    assert k.modules is not None and k.modules.endswith(MODS)
    assert k.packages == {META: V, **{name: V for name in PARTS}}
    assert k.source == f"{META} {V} (sid)"
    downloads = [c for c in fake.calls if "download" in c]
    assert len(downloads) == 1 and sorted(downloads[0][-3:]) == sorted(f"{n}={V}" for n in PARTS)
    assert {"ntfs", "exfat", "vfat", "ntfs-3g"} <= set(k.drivers()) and "ntfs3" not in k.drivers()
    assert kernel_features(k) == ["FUSE over io_uring", "FUSE passthrough"]
    # No .deb is kept: the unpacked tree and its digest are.
    assert not list((tmp_path / "cache").rglob("*.deb"))
    # Reuse: no apt, the digest checked; a changed tree is refused.
    fake.calls.clear()
    assert resolve("debian-sid") == k and fake.calls == []
    row = next(r for r in listing() if r["name"] == "debian-sid")
    assert row["cached"] and row["packages"] == k.packages and row["release"] == REL
    Path(k.modules or "", "kernel/fs/ntfs/ntfs.ko.xz").write_bytes(b"changed")
    with pytest.raises(EnvironmentProblem, match="does not match its recorded sha256"):
        load_cached("debian-sid")


def test_a_download_of_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(kernels, "_run", FakeApt(wrong_version=True))
    with pytest.raises(EnvironmentProblem, match=r"7\.2\.12-1"):
        resolve("debian-sid")
    assert not (tmp_path / "cache" / "fsbench" / "kernels" / "debian-sid" / "root").exists()


def test_doctor_names_what_an_unfetched_kernel_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    row = next(r for r in listing() if r["name"] == "debian-sid")
    assert not row["cached"]
    assert row["features"] == ["FUSE over io_uring", "FUSE passthrough"]
    # What it adds is what its record names, less what this host mounts already.
    assert set(row["adds"]) <= set(KNOWN["debian-sid"].adds)
