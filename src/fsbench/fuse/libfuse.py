"""libfuse 3.18, built here: the source of the FUSE floor daemon (`passthrough_hp`).

Debian 12 ships libfuse 3.14, without FUSE over io_uring (3.18) and passthrough (3.17). The
source package `fuse3` of Debian's unstable suite is fetched with apt under a private
configuration (its own sources list, lists and cache under the user's cache directory; the
system's apt state is never read or written), so apt checks the suite's signed Release file
against Debian's keyring and every source file against the SHA256 of the signed index. The
upstream tarball is built with meson and ninja, statically linked (one file carries the
library, so the daemon's own sha256 covers all of libfuse), with io_uring (liburing) and the
USDT probes. Cached and verified as every source build is (fuse/sourcebuild.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from fsbench.fuse import sourcebuild
from fsbench.fuse.sourcebuild import Built, SourceBuild
from fsbench.host import apt
from fsbench.host.apt import BuildFailed, file_sha256

# meson options: only what the floor needs (the library and one example), static, with
# io_uring and the USDT probes (libfuse's request_receive/process/reply).
MESON_OPTIONS = (
    "-Ddefault_library=static",
    "-Dexamples=true",
    "-Dutils=false",
    "-Dtests=false",
    "-Duseroot=false",
    "-Denable-usdt=true",
    "-Denable-io-uring=true",
    "-Dinitscriptdir=",
    "--buildtype=release",
)


def _meson(
    b: SourceBuild, tar: Path, d: Path, log: Path, _below: dict[str, Built]
) -> tuple[dict[str, Path], dict[str, Any]]:
    top = sourcebuild.unpack(tar, d / "tree")
    out = d / "build"
    shutil.rmtree(out, ignore_errors=True)
    apt.run_logged(["meson", "setup", str(out), *b.options], log, "meson setup", top)
    apt.run_logged(["ninja", "-C", str(out), *(f"example/{n}" for n in b.daemons)], log, "ninja")
    config = "".join(
        (out / h).read_text() for h in ("fuse_config.h", "libfuse_config.h") if (out / h).is_file()
    )
    made = {n: out / "example" / n for n in b.daemons}
    return made, {
        "uring": bool(re.search(r"#define HAVE_URING\b", config)),  # built with liburing
        "usdt": bool(re.search(r"#define USDT_ENABLED\b", config)),
    }


LIBFUSE = SourceBuild(
    name="libfuse",
    what="libfuse 3.18",
    package="fuse3",
    suite="unstable",
    min_version=(3, 18),  # FUSE over io_uring; passthrough needs 3.17
    options=MESON_OPTIONS,
    daemons=("passthrough_hp",),
    steps=_meson,
    # What the build needs on Debian 12 (scripts/setup.sh installs them with --test).
    tools={"meson": "meson", "ninja": "ninja-build", "g++": "g++", "pkg-config": "pkg-config"},
    libs={"liburing": "liburing-dev", "numa": "libnuma-dev"},
)


def install_library(b: Built, prefix: Path, log: Path) -> Path:
    """libfuse itself (static library, headers, fuse3.pc) from the build's own source, checked
    against its recorded sha256, installed into `prefix` for a daemon built against it
    (fuse/fuse2fs.py); returns the directory of fuse3.pc. Same options as the floor's build,
    less the examples."""
    tar = Path(b.log).parent / "source" / b.tarball
    if not tar.is_file() or file_sha256(tar) != b.tarball_sha256:
        raise BuildFailed(
            f"libfuse's source {tar} is missing or changed: delete {tar.parent.parent}"
        )
    work = prefix.parent / "libfuse-build"
    top = sourcebuild.unpack(tar, work / "tree")
    options = [o for o in MESON_OPTIONS if not o.startswith("-Dexamples")]
    setup = ["meson", "setup", str(work / "out"), *options, "-Dexamples=false"]
    apt.run_logged([*setup, f"--prefix={prefix}", "--libdir=lib"], log, "libfuse meson setup", top)
    apt.run_logged(["meson", "install", "-C", str(work / "out")], log, "libfuse install")
    shutil.rmtree(work, ignore_errors=True)
    return prefix / "lib" / "pkgconfig"


if __name__ == "__main__":
    raise SystemExit(sourcebuild.main(LIBFUSE))
