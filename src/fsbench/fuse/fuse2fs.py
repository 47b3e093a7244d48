"""fuse2fs built against libfuse 3.18: a real file system over FUSE's newer transports.

Debian 12's fuse2fs (e2fsprogs 1.47.0) is linked with libfuse 2, which has neither io_uring nor
passthrough. e2fsprogs 1.47.4 (Debian's unstable suite) builds fuse2fs with libfuse 3 (its
configure asks pkg-config for fuse3), so it is fetched as a source package with apt under a
private configuration (host/apt.py), and built against fsbench's own libfuse 3.18 build
(fuse/libfuse.py: the same verified source, installed as a static library into this build's
directory). The daemon carries libfuse, with io_uring and its USDT probes; its sha256 is
recorded in build.json and checked on every reuse. It serves an image, not a directory, so
passthrough (a backing file per open file) is not among its transports: /dev/fuse and io_uring.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fsbench.fuse import libfuse, sourcebuild
from fsbench.fuse.sourcebuild import Built, SourceBuild
from fsbench.host import apt


def _make(
    b: SourceBuild, tar: Path, d: Path, log: Path, below: dict[str, Built]
) -> tuple[dict[str, Path], dict[str, Any]]:
    pkgconfig = libfuse.install_library(below["libfuse"], d / "work" / "libfuse", log)
    top = sourcebuild.unpack(tar, d / "tree")
    out = top / "build"
    out.mkdir()
    # PKG_CONFIG_PATH is searched first: fsbench's libfuse 3.18, not a system libfuse3-dev.
    env = {**os.environ, "PKG_CONFIG_PATH": str(pkgconfig)}
    apt.run_logged(["../configure", *b.options], log, "e2fsprogs configure", out, env)
    jobs = f"-j{os.cpu_count() or 1}"
    apt.run_logged(["make", jobs, "libs"], log, "e2fsprogs make libs", out, env)
    for name in b.daemons:
        apt.run_logged(["make", jobs, "-C", "misc", name], log, f"make {name}", out, env)
    return {n: out / "misc" / n for n in b.daemons}, {}


FUSE2FS = SourceBuild(
    name="fuse2fs",
    what="fuse2fs (e2fsprogs 1.47.4) against libfuse 3.18",
    package="e2fsprogs",
    suite="unstable",
    min_version=(1, 47, 1),  # the first e2fsprogs whose fuse2fs builds with libfuse 3
    # Only what fuse2fs needs: its own private blkid (no libblkid-dev needed), no
    # translations, no libarchive (mke2fs -d), no daemons.
    options=(
        "--enable-fuse2fs",
        "--disable-nls",
        "--without-libarchive",
        "--disable-uuidd",
        "--disable-e2initrd-helper",
    ),
    daemons=("fuse2fs",),
    steps=_make,
    tools={"make": "make", "gcc": "gcc", "pkg-config": "pkg-config"},
    libs={"uuid": "uuid-dev"},
    on=(libfuse.LIBFUSE,),
)


if __name__ == "__main__":
    raise SystemExit(sourcebuild.main(FUSE2FS))
