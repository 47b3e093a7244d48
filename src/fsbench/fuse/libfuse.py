"""libfuse 3.18, built here: the source of the FUSE floor daemon (`passthrough_hp`).

Debian 12 ships libfuse 3.14, without FUSE over io_uring (3.18) and passthrough (3.17). The
source package `fuse3` of Debian's unstable suite is fetched with apt under a private
configuration (its own sources list, lists and cache under the user's cache directory; the
system's apt state is never read or written), so apt checks the suite's signed Release file
against Debian's keyring and every source file against the SHA256 of the signed index. The
upstream tarball is unpacked and built with meson and ninja into
$XDG_CACHE_HOME/fsbench/libfuse/<key>/, statically linked (one file carries the library, so the
daemon's own sha256 covers all of libfuse), with io_uring (liburing) and the USDT probes. The
build's record (`build.json`: the .dsc and tarball sha256, the daemon's sha256) is written
last; every reuse checks the daemon against it. A failed fetch or build leaves `failed.json`
(the reason and the build log's path) for `fsbench doctor` and the next run.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from fsbench import aptsource
from fsbench.aptsource import BuildFailed, file_sha256

__all__ = ["Build", "BuildFailed", "ensure", "file_sha256", "last_failure", "load"]

WHAT = "libfuse 3.18"
SOURCE_PACKAGE = "fuse3"
SUITE = "unstable"
MIN_VERSION = (3, 18)  # FUSE over io_uring; passthrough needs 3.17
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
DAEMONS = ("passthrough_hp",)
# What the build needs on Debian 12 (scripts/setup.sh installs them with --test).
BUILD_TOOLS = {"meson": "meson", "ninja": "ninja-build", "g++": "g++", "pkg-config": "pkg-config"}
BUILD_LIBS = {"liburing": "liburing-dev", "numa": "libnuma-dev"}


@dataclass
class Build:
    """A finished build: where its daemons are and what they were made from."""

    key: str
    version: str  # the Debian source version, "3.18.3-1"
    dsc: str
    dsc_sha256: str
    tarball: str
    tarball_sha256: str
    daemons: dict[str, str]  # name -> path
    daemon_sha256: dict[str, str]
    uring: bool  # built with liburing (HAVE_URING)
    usdt: bool
    log: str

    def daemon(self, name: str) -> str:
        return self.daemons[name]


def cache_root() -> Path:
    return aptsource.cache_root("libfuse")


def cache_key(options: tuple[str, ...] = MESON_OPTIONS) -> str:
    """The cache directory's name: the source it is built from and how, so a change of build
    options builds anew instead of reusing a build made another way."""
    h = hashlib.sha256("\0".join([SOURCE_PACKAGE, SUITE, *options]).encode()).hexdigest()
    return f"{SOURCE_PACKAGE}-{SUITE}-{h[:12]}"


def build_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / cache_key()


def load(root: Path | None = None, verify: bool = True) -> Build | None:
    """The cached build, each daemon checked against its recorded sha256; None when there is
    none. BuildFailed when a daemon was changed or damaged since it was built."""
    record = aptsource.load_record(build_dir(root), verify, "it")
    try:
        return Build(**record) if record is not None else None
    except TypeError:
        return None


def last_failure(root: Path | None = None) -> dict | None:
    """{reason, log} of the last failed fetch or build, if it failed and nothing built since."""
    return aptsource.last_failure(build_dir(root))


def missing_build_tools() -> list[str]:
    """Debian packages the build needs and this machine lacks (no network involved)."""
    return aptsource.missing_packages(BUILD_TOOLS, BUILD_LIBS)


def ensure(root: Path | None = None) -> Build:
    """The build, fetched and built on first use, verified on every reuse."""
    cached = load(root)
    if cached is not None:
        return cached
    d = build_dir(root)

    def build(log: Path) -> dict:
        missing = missing_build_tools()
        if missing:
            raise BuildFailed(
                f"building libfuse 3.18 needs {', '.join(missing)}: apt-get install "
                f"{' '.join(missing)} (or bash scripts/setup.sh --test)"
            )
        return asdict(_fetch_and_build(d, log))

    b = aptsource.build_once(d, build, lambda: load(root))
    assert b is not None  # build.json was just written and verified
    return b


def unpack(tar: Path, into: Path) -> Path:
    """The upstream tarball unpacked into `into` (emptied first): its one top directory."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")  # apt checked its SHA256
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildFailed(f"{tar.name} unpacked into {len(tops)} directories")
    return tops[0]


def _fetch_and_build(d: Path, log: Path) -> Build:
    log.write_text("")
    version, dsc, tar = aptsource.fetch_source(d, SOURCE_PACKAGE, SUITE, log, MIN_VERSION)
    tree = d / "tree"
    top = unpack(tar, tree)
    out = d / "build"
    shutil.rmtree(out, ignore_errors=True)
    aptsource.run_logged(["meson", "setup", str(out), *MESON_OPTIONS], log, "meson setup", top)
    targets = [f"example/{n}" for n in DAEMONS]
    aptsource.run_logged(["ninja", "-C", str(out), *targets], log, "ninja")
    config = (out / "fuse_config.h").read_text() if (out / "fuse_config.h").is_file() else ""
    private = out / "libfuse_config.h"
    config += private.read_text() if private.is_file() else ""
    bins = d / "bin"
    bins.mkdir(exist_ok=True)
    daemons, sums = {}, {}
    for name in DAEMONS:
        target = bins / name
        shutil.copy2(out / "example" / name, target)
        daemons[name], sums[name] = str(target), file_sha256(target)
    shutil.rmtree(tree, ignore_errors=True)  # the sources are re-fetched if ever needed
    return Build(
        key=cache_key(),
        version=version,
        dsc=dsc.name,
        dsc_sha256=file_sha256(dsc),
        tarball=tar.name,
        tarball_sha256=file_sha256(tar),
        daemons=daemons,
        daemon_sha256=sums,
        uring=bool(re.search(r"#define HAVE_URING\b", config)),
        usdt=bool(re.search(r"#define USDT_ENABLED\b", config)),
        log=str(log),
    )


def install_library(b: Build, prefix: Path, log: Path) -> Path:
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
    top = unpack(tar, work / "tree")
    options = [o for o in MESON_OPTIONS if not o.startswith("-Dexamples")]
    setup = ["meson", "setup", str(work / "out"), *options, "-Dexamples=false"]
    aptsource.run_logged(
        [*setup, f"--prefix={prefix}", "--libdir=lib"], log, "libfuse meson setup", top
    )
    aptsource.run_logged(["meson", "install", "-C", str(work / "out")], log, "libfuse install")
    shutil.rmtree(work, ignore_errors=True)
    return prefix / "lib" / "pkgconfig"


def main() -> int:
    """`python -m fsbench.fuse.libfuse`: build (or verify) now; one line either way."""
    try:
        b = ensure()
    except BuildFailed as e:
        print(f"libfuse 3.18: not built: {e}")
        return 1
    print(f"libfuse {b.version}: {b.tarball} sha256 {b.tarball_sha256}; daemons {b.daemons}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
