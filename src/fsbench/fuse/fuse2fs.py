"""fuse2fs built against libfuse 3.18: a real file system over FUSE's newer transports.

Debian 12's fuse2fs (e2fsprogs 1.47.0) is linked with libfuse 2, which has neither io_uring nor
passthrough. e2fsprogs 1.47.4 (Debian's unstable suite) builds fuse2fs with libfuse 3 (its
configure asks pkg-config for fuse3), so it is fetched as a source package with apt under a
private configuration (aptsource.py), and built against fsbench's own libfuse 3.18 build
(fuse/libfuse.py: the same verified source, installed as a static library into this build's
directory). The daemon carries libfuse, with io_uring and its USDT probes; its sha256 is
recorded in build.json and checked on every reuse. It serves an image, not a directory, so
passthrough (a backing file per open file) is not among its transports: /dev/fuse and io_uring.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from fsbench import aptsource
from fsbench.aptsource import BuildFailed, file_sha256
from fsbench.fuse import libfuse

WHAT = "fuse2fs (e2fsprogs 1.47.4) against libfuse 3.18"
SOURCE_PACKAGE = "e2fsprogs"
SUITE = "unstable"
MIN_VERSION = (1, 47, 1)  # the first e2fsprogs whose fuse2fs builds with libfuse 3
# Only what fuse2fs needs: its own private blkid (no libblkid-dev needed), no translations,
# no libarchive (mke2fs -d), no daemons.
CONFIGURE = (
    "--enable-fuse2fs",
    "--disable-nls",
    "--without-libarchive",
    "--disable-uuidd",
    "--disable-e2initrd-helper",
)
DAEMON = "fuse2fs"
BUILD_TOOLS = {"make": "make", "gcc": "gcc", "pkg-config": "pkg-config"}
BUILD_LIBS = {"uuid": "uuid-dev"}


@dataclass
class Build:
    key: str
    version: str  # the Debian source version, "1.47.4-1"
    dsc: str
    dsc_sha256: str
    tarball: str
    tarball_sha256: str
    libfuse: str  # the libfuse build it links: "3.18.3-1 (fuse3_3.18.3.orig.tar.gz sha256 …)"
    daemons: dict[str, str]
    daemon_sha256: dict[str, str]
    log: str


def cache_root() -> Path:
    return aptsource.cache_root("fuse2fs")


def cache_key(libfuse_key: str | None = None) -> str:
    """The source, the configure options and the libfuse build it links: another libfuse
    build or other options build anew."""
    parts = [SOURCE_PACKAGE, SUITE, *CONFIGURE, libfuse_key or libfuse.cache_key()]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"{SOURCE_PACKAGE}-{SUITE}-{digest[:12]}"


def build_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / cache_key()


def load(root: Path | None = None, verify: bool = True) -> Build | None:
    record = aptsource.load_record(build_dir(root), verify, "fuse2fs")
    try:
        return Build(**record) if record is not None else None
    except TypeError:
        return None


def last_failure(root: Path | None = None) -> dict | None:
    return aptsource.last_failure(build_dir(root))


def missing_build_tools() -> list[str]:
    return [
        *libfuse.missing_build_tools(),
        *aptsource.missing_packages(BUILD_TOOLS, BUILD_LIBS),
    ]


def ensure(root: Path | None = None) -> Build:
    """The build: libfuse 3.18 first (fuse/libfuse.py), then e2fsprogs' fuse2fs against it."""
    cached = load(root)
    if cached is not None:
        return cached
    d = build_dir(root)

    def build(log: Path) -> dict:
        missing = sorted(set(missing_build_tools()))
        if missing:
            raise BuildFailed(
                f"building fuse2fs against libfuse 3.18 needs {', '.join(missing)}: "
                f"apt-get install {' '.join(missing)}"
            )
        return asdict(_fetch_and_build(d, log, libfuse.ensure()))

    b = aptsource.build_once(d, build, lambda: load(root))
    assert b is not None
    return b


def _fetch_and_build(d: Path, log: Path, lib: libfuse.Build) -> Build:
    log.write_text("")
    version, dsc, tar = aptsource.fetch_source(d, SOURCE_PACKAGE, SUITE, log, MIN_VERSION)
    pkgconfig = libfuse.install_library(lib, d / "libfuse", log)
    top = libfuse.unpack(tar, d / "tree")
    out = top / "build"
    out.mkdir()
    # PKG_CONFIG_PATH is searched first: fsbench's libfuse 3.18, not a system libfuse3-dev.
    env = {**os.environ, "PKG_CONFIG_PATH": str(pkgconfig)}
    aptsource.run_logged(["../configure", *CONFIGURE], log, "e2fsprogs configure", out, env)
    jobs = f"-j{os.cpu_count() or 1}"
    aptsource.run_logged(["make", jobs, "libs"], log, "e2fsprogs make libs", out, env)
    aptsource.run_logged(["make", jobs, "-C", "misc", DAEMON], log, "make fuse2fs", out, env)
    bins = d / "bin"
    bins.mkdir(exist_ok=True)
    target = bins / DAEMON
    shutil.copy2(out / "misc" / DAEMON, target)
    shutil.rmtree(d / "tree", ignore_errors=True)
    shutil.rmtree(d / "libfuse", ignore_errors=True)
    return Build(
        key=cache_key(lib.key),
        version=version,
        dsc=dsc.name,
        dsc_sha256=file_sha256(dsc),
        tarball=tar.name,
        tarball_sha256=file_sha256(tar),
        libfuse=f"{lib.version} ({lib.tarball} sha256 {lib.tarball_sha256[:12]})",
        daemons={DAEMON: str(target)},
        daemon_sha256={DAEMON: file_sha256(target)},
        log=str(log),
    )


def main() -> int:
    """`python -m fsbench.fuse.fuse2fs`: build (or verify) now; one line either way."""
    try:
        b = ensure()
    except BuildFailed as e:
        print(f"fuse2fs against libfuse 3.18: not built: {e}")
        return 1
    print(f"fuse2fs {b.version} with libfuse {b.libfuse}: {b.daemons[DAEMON]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
