"""Parsing what the user types: subjects (driver[:mount-options]), sizes and backings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsbench.errors import EXIT_USAGE, UsageError
from fsbench.lab.backing import Backing, format_size, parse_backing, parse_size
from fsbench.lab.drivers import DRIVERS
from fsbench.lab.subject import parse_subject, parse_subjects

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


# --- parse_subject: accepted -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "driver", "options", "subject_id"),
    [
        ("ext4", "ext4", "", "ext4"),
        ("  ext4  ", "ext4", "", "ext4"),  # surrounding blanks are not part of the id
        ("ext4:noatime", "ext4", "noatime", "ext4:noatime"),
        (
            "ext4:noatime,data=ordered",
            "ext4",
            "noatime,data=ordered",
            "ext4:noatime,data=ordered",
        ),
        # "-" inside a value, and the value of a forbidden word's *neighbour*, are fine.
        ("ext4:errors=remount-ro", "ext4", "errors=remount-ro", "ext4:errors=remount-ro"),
        # Only the first ':' separates driver from options; SELinux contexts hold more.
        (
            "ext4:context=system_u:object_r:tmp_t:s0",
            "ext4",
            "context=system_u:object_r:tmp_t:s0",
            "ext4:context=system_u:object_r:tmp_t:s0",
        ),
        (
            "ntfs-3g:uid=1000,gid=1000,big_writes",
            "ntfs-3g",
            "uid=1000,gid=1000,big_writes",
            "ntfs-3g:uid=1000,gid=1000,big_writes",
        ),
        ("btrfs:compress=zstd:3", "btrfs", "compress=zstd:3", "btrfs:compress=zstd:3"),
        ("exfat-fuse", "exfat-fuse", "", "exfat-fuse"),
        ("lowntfs-3g:x-gvfs-hide", "lowntfs-3g", "x-gvfs-hide", "lowntfs-3g:x-gvfs-hide"),
    ],
)
def test_parse_subject_accepts(text: str, driver: str, options: str, subject_id: str) -> None:
    spec = parse_subject(text)
    assert spec.driver is DRIVERS[driver]
    assert spec.options == options
    assert spec.id == subject_id


def test_every_registered_driver_parses_by_its_own_name() -> None:
    for name, driver in DRIVERS.items():
        spec = parse_subject(name)
        assert (spec.id, spec.driver, spec.options) == (name, driver, "")


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("ext4", "ext4"),
        ("ext4:noatime", "ext4_noatime"),
        ("ntfs-3g:uid=1000,gid=1000", "ntfs-3g_uid_1000_gid_1000"),
        ("ext4:context=system_u:object_r:tmp_t:s0", "ext4_context_system_u_object_r_tmp_t_s0"),
    ],
)
def test_slug_is_safe_as_a_file_name(text: str, slug: str) -> None:
    got = parse_subject(text).slug
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", got)
    # Readable prefix; ids that needed cleaning also carry a short hash of the id.
    assert got == slug if slug == text else got.startswith(slug + "-") and len(got) == len(slug) + 7


# --- parse_subject: refused --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty subject ''"),
        ("   ", "empty subject '   '"),
        (":noatime", "empty subject ':noatime'"),
        ("foo", "unknown driver 'foo'"),
        ("EXT4", "unknown driver 'EXT4'"),  # driver names are case-sensitive
        ("ext4 noatime", "unknown driver 'ext4 noatime'"),
        ("ext4:a b", "bad mount option 'a b' in subject 'ext4:a b'"),
        ('ext4:"a b"', "bad mount option '\"a b\"'"),
        ('ext4:"a"', "bad mount option '\"a\"'"),
        ("ext4:a;b", "bad mount option 'a;b'"),
        ("ext4:$(id)", "bad mount option '$(id)'"),
        ("ext4:`id`", "bad mount option '`id`'"),
        ("ext4:-o", "bad mount option '-o'"),
        ("ext4:=x", "bad mount option '=x'"),
        ("ext4:x=a b", "bad mount option 'x=a b'"),
        ("ext4:noatime,,nodiratime", "bad mount option ''"),
        ("ext4:noatime,", "bad mount option ''"),
        ("ext4:,noatime", "bad mount option ''"),
        ("ext4:ro", "mount option 'ro' in 'ext4:ro' is managed by fsbench itself"),
        ("ext4:rw", "mount option 'rw' in 'ext4:rw' is managed by fsbench itself"),
        ("ext4:ro=1", "mount option 'ro=1' in 'ext4:ro=1' is managed by fsbench itself"),
        ("ext4:noatime,remount", "mount option 'remount'"),
        ("ext4:loop=/dev/loop0", "mount option 'loop=/dev/loop0'"),
        ("ext4:bind", "mount option 'bind'"),
        ("ext4:move", "mount option 'move'"),
        ("ext4:defaults", "mount option 'defaults'"),
    ],
)
def test_parse_subject_refuses(text: str, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_subject(text)
    assert message in str(exc.value)
    assert exc.value.exit_code == EXIT_USAGE
    assert "\n" not in str(exc.value)


def test_unknown_driver_message_lists_every_known_driver_sorted() -> None:
    with pytest.raises(UsageError) as exc:
        parse_subject("zfs")
    assert str(exc.value) == "unknown driver 'zfs'; known drivers: " + ", ".join(sorted(DRIVERS))


def test_option_with_embedded_newline_is_refused() -> None:
    with pytest.raises(UsageError):
        parse_subject("ext4:noatime\n,nodiratime")


# --- parse_subjects: duplicates ----------------------------------------------------------


def test_parse_subjects_keeps_order() -> None:
    specs = parse_subjects(["ntfs-3g", "ext4:noatime", "ext4"])
    assert [s.id for s in specs] == ["ntfs-3g", "ext4:noatime", "ext4"]


def test_parse_subjects_refuses_a_duplicate() -> None:
    with pytest.raises(UsageError, match=r"subject 'ext4:noatime' given twice"):
        parse_subjects(["ext4:noatime", "ext4", "ext4:noatime"])


def test_parse_subjects_duplicate_after_stripping_blanks() -> None:
    with pytest.raises(UsageError, match=r"subject 'ext4' given twice"):
        parse_subjects(["ext4", " ext4 "])


def test_same_driver_with_different_options_is_not_a_duplicate() -> None:
    assert len(parse_subjects(["ext4", "ext4:noatime", "fuse2fs"])) == 3


def test_trailing_colon_is_the_same_subject() -> None:
    with pytest.raises(UsageError):
        parse_subjects(["ext4", "ext4:"])


def test_distinct_subjects_get_distinct_slugs() -> None:
    specs = parse_subjects(["ext4:uid=1", "ext4:uid_1"])
    assert specs[0].slug != specs[1].slug


# --- parse_size --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("1K", KiB),
        ("1k", KiB),
        ("1KB", KiB),  # binary units whatever the spelling, as dd and fio use
        ("1KiB", KiB),
        ("512M", 512 * MiB),
        ("512MB", 512 * MiB),
        ("512mib", 512 * MiB),
        ("1G", GiB),
        ("1g", GiB),
        ("1.5GiB", 3 * GiB // 2),
        ("1.5K", 1536),
        ("1T", TiB),
        (" 2 G ", 2 * GiB),
        ("1.5", 1),  # fractional bytes are truncated
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "0K", "0.5", "0.0001K"])
def test_parse_size_zero_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match=r"must be more than zero"):
        parse_size(text)


@pytest.mark.parametrize(
    "text", ["", "G", "12X", "-1G", "+1G", "1e3", "1GG", "1P", "1 0G", "0x10", "1,5G", "one"]
)
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_size(text)
    assert str(exc.value) == (f"bad size {text!r}; write a number with K, M, G or T, e.g. 1G")


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (GiB, "1 GiB")],
)
def test_format_size(n: int, text: str) -> None:
    assert format_size(n) == text


# --- parse_backing -----------------------------------------------------------------------


def test_parse_backing_ram() -> None:
    b = parse_backing("ram")
    assert b == Backing("ram")
    assert b.describe() == "ram"
    assert "/dev/shm" in b.note


def test_parse_backing_file_and_dir_resolve_to_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "images").mkdir()
    monkeypatch.chdir(tmp_path)
    f = parse_backing("file:images")
    assert f == Backing("file", str(tmp_path.resolve() / "images"))
    assert f.describe() == f"file:{tmp_path.resolve() / 'images'}"
    d = parse_backing(f"dir:{tmp_path}")
    assert d == Backing("dir", str(tmp_path.resolve()))
    assert "nothing was formatted" in d.note


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "bad backing 'nope'; use ram, file:DIR, device:/dev/X or dir:PATH"),
        ("RAM", "bad backing 'RAM'"),
        (" ram", "bad backing ' ram'"),
        ("ram:", "bad backing 'ram:'"),
        ("ram:/dev/shm", "bad backing 'ram:/dev/shm'"),
        ("file", "bad backing 'file'"),
        ("file:", "bad backing 'file:'"),
        ("dir:", "bad backing 'dir:'"),
        ("device:", "bad backing 'device:'"),
        ("tmpfs:/tmp", "bad backing 'tmpfs:/tmp'"),
        ("file:/nonexistent", "file:/nonexistent: not a directory; give a directory"),
        ("dir:/nonexistent", "dir:/nonexistent: not a directory"),
        ("device:/dev/null", "device:/dev/null: not a block device"),
        ("device:/nonexistent", "device:/nonexistent: not a block device"),
    ],
)
def test_parse_backing_refuses(text: str, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_backing(text)
    assert message in str(exc.value)


def test_parse_backing_file_refuses_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "image.img"
    f.write_bytes(b"")
    with pytest.raises(UsageError, match=r"not a directory"):
        parse_backing(f"file:{f}")
    with pytest.raises(UsageError, match=r"not a block device"):
        parse_backing(f"device:{f}")
