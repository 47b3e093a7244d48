"""The FUSE floor's parts without root: transports read from a canned /proc and /sys tree,
the libfuse build's cache (key, verified reuse, a recorded failure) on a fake build
directory, the subject grammar's transports and the enable_uring hold's order."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from fsbench.errors import UsageError
from fsbench.fuse import libfuse, sourcebuild, transports
from fsbench.fuse.fuse2fs import FUSE2FS
from fsbench.fuse.libfuse import LIBFUSE
from fsbench.host import apt
from fsbench.lab import state
from fsbench.lab.drivers import DRIVERS
from fsbench.lab.subject import parse_subject, parse_subjects
from fsbench.probes.procfs import ProcFS


def _tree(
    root: Path, release: str, uring: str | None, config: dict[str, str] | None = None
) -> ProcFS:
    """A canned machine: /proc/sys/kernel/osrelease, /dev/fuse, maybe enable_uring and
    /proc/config.gz."""
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(release + "\n")
    (root / "dev").mkdir()
    (root / "dev/fuse").write_text("")
    if uring is not None:
        params = root / "sys/module/fuse/parameters"
        params.mkdir(parents=True)
        (params / "enable_uring").write_text(uring + "\n")
    if config is not None:
        with gzip.open(root / "proc/config.gz", "wt") as f:
            f.write("".join(f"{k}={v}\n" for k, v in config.items()))
    return ProcFS(str(root))


def test_a_kernel_without_the_parameter_has_no_uring_and_says_why(tmp_path: Path) -> None:
    fs = _tree(tmp_path, "6.8.0-45-generic", None)
    st = transports.kernel_status("uring", fs)
    assert not st.available
    assert transports.ENABLE_URING in st.reason and "kernel too old" in st.reason
    assert "6.8" in st.reason and "6.14" in st.reason
    # The same kernel is too old for passthrough (6.9+) too, and /dev/fuse still serves.
    assert not transports.kernel_status("passthrough", fs).available
    assert "kernel too old" in transports.kernel_status("passthrough", fs).reason
    assert transports.kernel_status("dev-fuse", fs).available
    assert transports.uring_enabled(fs) is None


def test_a_new_kernel_built_without_fuse_io_uring_names_the_option(tmp_path: Path) -> None:
    config = {"CONFIG_FUSE_FS": "y", "CONFIG_FUSE_PASSTHROUGH": "y"}
    fs = _tree(tmp_path, "6.18.4", None, config)
    st = transports.kernel_status("uring", fs)
    assert not st.available and "CONFIG_FUSE_IO_URING" in st.reason


def test_a_kernel_with_the_parameter_offers_uring(tmp_path: Path) -> None:
    config = {"CONFIG_FUSE_FS": "y", "CONFIG_FUSE_IO_URING": "y", "CONFIG_FUSE_PASSTHROUGH": "y"}
    fs = _tree(tmp_path, "6.18.44-fc", "N", config)
    assert transports.kernel_status("uring", fs).available
    assert transports.uring_enabled(fs) is False
    if os.geteuid() == 0:
        assert transports.kernel_status("passthrough", fs).available


def test_no_dev_fuse_no_transport(tmp_path: Path) -> None:
    fs = _tree(tmp_path, "6.18.1", "N")
    (tmp_path / "dev/fuse").unlink()
    for name in transports.TRANSPORTS:
        st = transports.kernel_status(name, fs)
        assert not st.available and "/dev/fuse" in st.reason


def test_the_old_value_is_recorded_before_enable_uring_is_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    param = tmp_path / "enable_uring"
    param.write_text("N\n")
    monkeypatch.setattr(transports, "ENABLE_URING", str(param))
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    rec = state.StateRecord("r1", os.getpid(), str(tmp_path / "img"), str(tmp_path / "mnt"))
    seen: list[tuple[str, dict[str, str]]] = []
    save = rec.save

    def spy() -> None:  # the state record's save(): must see the old value, not yet changed
        seen.append((param.read_text().strip(), dict(rec.restore)))
        save()

    monkeypatch.setattr(rec, "save", spy)
    said = state.hold_uring(rec)
    assert seen == [("N", {str(param): "N"})]
    assert param.read_text() == "Y" and said and "N -> Y" in said
    assert state.hold_uring(rec) is None  # on already: nothing to hold


def test_a_daemon_without_rings_is_not_uring(tmp_path: Path) -> None:
    fd = tmp_path / "123" / "fd"
    fd.mkdir(parents=True)
    (fd / "3").symlink_to("/dev/fuse")
    why = transports.check_daemon("uring", 123, str(tmp_path), timeout=0.05)
    assert "holds no io_uring" in why and "fell back to /dev/fuse" in why
    (fd / "4").symlink_to("anon_inode:[io_uring]")
    assert transports.check_daemon("uring", 123, str(tmp_path)) == ""
    assert transports.check_daemon("dev-fuse", 999, str(tmp_path)) == ""


# -- the subject grammar ---------------------------------------------------------------------
def test_transports_are_named_in_the_subject() -> None:
    plain = parse_subject("passthrough_hp")
    assert plain.id == "passthrough_hp" and plain.transport == "dev-fuse"
    assert parse_subject("passthrough_hp:dev-fuse").id == "passthrough_hp"
    u = parse_subject("passthrough_hp:uring")
    assert (u.id, u.transport, u.options) == ("passthrough_hp:uring", "uring", "")
    p = parse_subject("passthrough_hp:passthrough,allow_other")
    assert (p.transport, p.options) == ("passthrough", "allow_other")
    assert parse_subject("ntfs-3g").transport == "dev-fuse"
    assert parse_subject("ext4").transport == ""
    assert DRIVERS["passthrough_hp"].mount_argv("/lower", "/m", "", "uring") == [
        DRIVERS["passthrough_hp"].binary_path() or "passthrough_hp",
        "--nopassthrough",
        "-o",
        "io_uring",
        "/lower",
        "/m",
    ]
    ids = {s.id for s in parse_subjects(["passthrough_hp", "passthrough_hp:uring"])}
    assert len(ids) == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ntfs-3g:uring", "ntfs-3g cannot use the uring transport"),
        ("passthrough_hp:uring,passthrough", "names 2 transports"),
    ],
)
def test_a_transport_a_daemon_cannot_use_is_bad_input(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_subject(text)


def test_the_floor_is_not_in_the_default_comparison() -> None:
    assert not DRIVERS["passthrough_hp"].in_default
    # Daemons fsbench builds itself are compared when named, never by default.
    assert all(d.in_default for d in DRIVERS.values() if not d.built)
    assert not any(d.in_default for d in DRIVERS.values() if d.built)


def test_fuse2fs_built_here_offers_dev_fuse_and_uring_but_not_passthrough() -> None:
    spec = parse_subject("fuse2fs-3.18:uring")
    assert spec.id == "fuse2fs-3.18:uring" and spec.transport == "uring"
    assert spec.driver.mount_argv("/dev/loop9", "/mnt", "", "uring")[1:3] == ["-o", "io_uring"]
    assert parse_subject("fuse2fs-3.18").transport == "dev-fuse"
    with pytest.raises(UsageError, match="offers only dev-fuse, uring"):
        parse_subject("fuse2fs-3.18:passthrough")
    # Debian 12's own fuse2fs (libfuse 2) has /dev/fuse only.
    with pytest.raises(UsageError, match="cannot use the uring transport"):
        parse_subject("fuse2fs:uring")


# -- the build's cache -------------------------------------------------------------------------
def _fake_build(root: Path, content: bytes = b"\x7fELF daemon") -> Path:
    """A build directory as `ensure` leaves it, without building anything; its build.json as
    an older fsbench wrote it (the flat record), so existing builds are still reused."""
    d = sourcebuild.build_dir(LIBFUSE, root)
    (d / "bin").mkdir(parents=True)
    daemon = d / "bin" / "passthrough_hp"
    daemon.write_bytes(content)
    record = {
        "key": sourcebuild.cache_key(LIBFUSE),
        "version": "3.18.3-1",
        "dsc": "fuse3_3.18.3-1.dsc",
        "dsc_sha256": "90" * 32,
        "tarball": "fuse3_3.18.3.orig.tar.gz",
        "tarball_sha256": "bc" * 32,
        "daemons": {"passthrough_hp": str(daemon)},
        "daemon_sha256": {"passthrough_hp": apt.file_sha256(daemon)},
        "uring": True,
        "usdt": True,
        "log": str(d / "build.log"),
    }
    (d / "build.json").write_text(json.dumps(record))
    return daemon


def _never(*_a: object) -> tuple[dict, dict]:
    raise AssertionError("a verified cached build must not be rebuilt")


def test_the_cache_key_follows_the_build_options() -> None:
    key = sourcebuild.cache_key(LIBFUSE)
    # The key libfuse builds had before the record: those builds stay valid.
    assert (
        key
        == "fuse3-unstable-"
        + hashlib.sha256(
            "\0".join(["fuse3", "unstable", *libfuse.MESON_OPTIONS]).encode()
        ).hexdigest()[:12]
    )
    assert sourcebuild.cache_key(LIBFUSE, (*libfuse.MESON_OPTIONS, "-Denable-usdt=false")) != key


def test_a_cached_build_is_reused_when_its_daemon_matches(tmp_path: Path) -> None:
    daemon = _fake_build(tmp_path)
    b = sourcebuild.ensure(replace(LIBFUSE, steps=_never), tmp_path)
    assert b.daemon("passthrough_hp") == str(daemon) and b.version == "3.18.3-1"
    assert b.extra == {"uring": True, "usdt": True}
    assert b.record() == json.loads((daemon.parent.parent / "build.json").read_text())


def test_a_changed_daemon_is_refused_with_what_to_do(tmp_path: Path) -> None:
    daemon = _fake_build(tmp_path)
    daemon.write_bytes(b"\x7fELF something else")
    with pytest.raises(sourcebuild.BuildFailed, match="does not match its recorded sha256"):
        sourcebuild.load(LIBFUSE, tmp_path)
    daemon.unlink()
    with pytest.raises(sourcebuild.BuildFailed, match=r"delete .* to build libfuse again"):
        sourcebuild.ensure(LIBFUSE, tmp_path)
    assert sourcebuild.load(LIBFUSE, tmp_path, verify=False) is not None  # doctor's quick look


def test_a_failed_build_is_recorded_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(_b: object, _d: Path, log: Path, _below: object) -> None:
        log.write_text("meson: error\n")
        raise sourcebuild.BuildFailed(f"meson setup failed (exit 1); see {log}")

    monkeypatch.setattr(sourcebuild, "fetch_and_build", fail)
    monkeypatch.setattr(sourcebuild, "missing_build_tools", lambda _b: [])
    with pytest.raises(sourcebuild.BuildFailed, match="meson setup failed"):
        sourcebuild.ensure(LIBFUSE, tmp_path)
    failed = sourcebuild.last_failure(LIBFUSE, tmp_path)
    assert failed and "meson setup failed" in failed["reason"]
    assert Path(failed["log"]).read_text() == "meson: error\n"
    assert sourcebuild.load(LIBFUSE, tmp_path) is None


def test_missing_build_tools_are_named_with_their_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apt, "missing_packages", lambda tools, libs: sorted(libs.values()))
    with pytest.raises(sourcebuild.BuildFailed, match="apt-get install libnuma-dev liburing-dev"):
        sourcebuild.ensure(LIBFUSE, tmp_path)
    # A build names what the builds below it lack as well.
    assert sourcebuild.missing_build_tools(FUSE2FS) == ["libnuma-dev", "liburing-dev", "uuid-dev"]


# -- fuse2fs against libfuse 3.18 --------------------------------------------------------------
def _fake_fuse2fs(root: Path) -> Path:
    d = sourcebuild.build_dir(FUSE2FS, root)
    (d / "bin").mkdir(parents=True)
    daemon = d / "bin" / "fuse2fs"
    daemon.write_bytes(b"\x7fELF fuse2fs")
    b = sourcebuild.Built(
        key=sourcebuild.cache_key(FUSE2FS),
        version="1.47.4-1",
        dsc="e2fsprogs_1.47.4-1.dsc",
        dsc_sha256="aa" * 32,
        tarball="e2fsprogs_1.47.4.orig.tar.gz",
        tarball_sha256="bb" * 32,
        daemons={"fuse2fs": str(daemon)},
        daemon_sha256={"fuse2fs": apt.file_sha256(daemon)},
        log=str(d / "build.log"),
        extra={"libfuse": "3.18.3-1 (fuse3_3.18.3.orig.tar.gz sha256 bcd19582c5e3)"},
    )
    (d / "build.json").write_text(json.dumps(b.record()))
    return daemon


def test_fuse2fs_is_rebuilt_when_the_libfuse_it_links_changes() -> None:
    other = replace(FUSE2FS, on=(replace(LIBFUSE, options=("-Dother",)),))
    assert sourcebuild.cache_key(other) != sourcebuild.cache_key(FUSE2FS)
    parts = ["e2fsprogs", "unstable", *FUSE2FS.options, sourcebuild.cache_key(LIBFUSE)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
    assert sourcebuild.cache_key(FUSE2FS) == f"e2fsprogs-unstable-{digest}"  # as before


def test_a_cached_fuse2fs_is_reused_and_a_changed_one_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sourcebuild, "cache_root", lambda b: tmp_path / b.name)
    daemon = _fake_fuse2fs(tmp_path / "fuse2fs")
    monkeypatch.setattr(sourcebuild, "fetch_and_build", _never)
    assert sourcebuild.ensure(FUSE2FS).daemons["fuse2fs"] == str(daemon)
    sha = apt.file_sha256(daemon)[:12]
    assert sourcebuild.version(FUSE2FS, "fuse2fs") == (
        "fuse2fs 1.47.4-1 with libfuse 3.18.3-1 (fuse3_3.18.3.orig.tar.gz sha256 bcd19582c5e3) "
        f"(built here, fuse2fs sha256 {sha})"
    )
    daemon.write_bytes(b"\x7fELF patched")
    with pytest.raises(sourcebuild.BuildFailed, match=r"delete .* to build fuse2fs again"):
        sourcebuild.ensure(FUSE2FS)


def test_a_failed_fuse2fs_build_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sourcebuild, "missing_build_tools", lambda _b: ["make", "uuid-dev"])
    with pytest.raises(sourcebuild.BuildFailed, match="apt-get install make uuid-dev"):
        sourcebuild.ensure(FUSE2FS, tmp_path)
    failed = sourcebuild.last_failure(FUSE2FS, tmp_path)
    assert failed and "uuid-dev" in failed["reason"]


def test_a_source_older_than_needed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What apt-get source leaves decides: e2fsprogs 1.47.0's fuse2fs is libfuse 2 only."""

    def fake_run(argv: list[str], log: Path, what: str, cwd: Path | None = None, env=None):
        if "source" in argv and cwd is not None:
            (cwd / "e2fsprogs_1.47.0-2.dsc").write_text("")
            (cwd / "e2fsprogs_1.47.0.orig.tar.gz").write_text("")
            (cwd / "e2fsprogs_1.47.0.orig.tar.gz.asc").write_text("")
        return ""

    monkeypatch.setattr(apt, "run_logged", fake_run)
    log = tmp_path / "log"
    with pytest.raises(apt.BuildFailed, match=r"e2fsprogs 1.47.0-2; 1.47.1 or later"):
        apt.fetch_source(tmp_path, "e2fsprogs", "bookworm", log, FUSE2FS.min_version)
    sources = (tmp_path / "apt" / "sources.list").read_text()
    assert sources.startswith("deb-src [signed-by=") and " bookworm main" in sources
