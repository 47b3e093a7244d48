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

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

SOURCE_PACKAGE = "fuse3"
SUITE = "unstable"
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
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
_TIMEOUT = 900  # the whole build on 2 CPUs takes ~30 s; a slow mirror more


class BuildFailed(Exception):
    """The fetch or the build failed; the message says why and where its log is."""


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
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fsbench" / "libfuse"


def cache_key(options: tuple[str, ...] = MESON_OPTIONS) -> str:
    """The cache directory's name: the source it is built from and how, so a change of build
    options builds anew instead of reusing a build made another way."""
    h = hashlib.sha256("\0".join([SOURCE_PACKAGE, SUITE, *options]).encode()).hexdigest()
    return f"{SOURCE_PACKAGE}-{SUITE}-{h[:12]}"


def build_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / cache_key()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load(root: Path | None = None, verify: bool = True) -> Build | None:
    """The cached build, each daemon checked against its recorded sha256; None when there is
    none. BuildFailed when a daemon was changed or damaged since it was built."""
    meta = build_dir(root) / "build.json"
    if not meta.is_file():
        return None
    try:
        b = Build(**json.loads(meta.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if verify:
        for name, path in b.daemons.items():
            p = Path(path)
            got = file_sha256(p) if p.is_file() else "missing"
            if got != b.daemon_sha256.get(name):
                raise BuildFailed(
                    f"the cached {name} ({path}) does not match its recorded sha256 "
                    f"(changed or damaged); delete {meta.parent} to build it again"
                )
    return b


def last_failure(root: Path | None = None) -> dict | None:
    """{reason, log} of the last failed fetch or build, if it failed and nothing built since."""
    p = build_dir(root) / "failed.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def missing_build_tools() -> list[str]:
    """Debian packages the build needs and this machine lacks (no network involved)."""
    missing = [pkg for tool, pkg in BUILD_TOOLS.items() if shutil.which(tool) is None]
    for lib, pkg in BUILD_LIBS.items():
        ok = shutil.which("pkg-config") is not None and (
            subprocess.run(["pkg-config", "--exists", lib], check=False).returncode == 0
        )
        if not ok:
            missing.append(pkg)
    if shutil.which("apt-get") is None:
        missing.append("apt")
    return missing


@contextlib.contextmanager
def _locked(d: Path) -> Iterator[None]:
    """One build at a time (two test workers, two runs): the second waits, then reuses."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure(root: Path | None = None) -> Build:
    """The build, fetched and built on first use, verified on every reuse."""
    cached = load(root)
    if cached is not None:
        return cached
    d = build_dir(root)
    with _locked(d):
        cached = load(root)  # another process built it while this one waited
        if cached is not None:
            return cached
        log = d / "build.log"
        try:
            missing = missing_build_tools()
            if missing:
                raise BuildFailed(
                    f"building libfuse 3.18 needs {', '.join(missing)}: apt-get install "
                    f"{' '.join(missing)} (or bash scripts/setup.sh --test)"
                )
            b = _fetch_and_build(d, log)
        except BuildFailed as e:
            (d / "failed.json").write_text(json.dumps({"reason": str(e), "log": str(log)}))
            raise
        (d / "failed.json").unlink(missing_ok=True)
        (d / "build.json").write_text(json.dumps(asdict(b), indent=1))  # last: it means done
        return b


def _apt_options(d: Path) -> list[str]:
    """apt confined to `d`: its own sources, lists and cache; no system state involved."""
    return [
        *("-o", f"Dir::Etc::SourceList={d / 'sources.list'}"),
        *("-o", f"Dir::Etc::SourceParts={d / 'sources.list.d'}"),
        *("-o", f"Dir::State::Lists={d / 'lists'}"),
        *("-o", f"Dir::Cache={d / 'cache'}"),
        *("-o", "Dir::State::status=/dev/null"),
        *("-o", "APT::Sandbox::User=root"),
    ]


def _run(argv: list[str], log: Path, what: str, cwd: Path | None = None) -> str:
    """Run one step, its output appended to the build log; BuildFailed names the step."""
    with log.open("a") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        try:
            out = subprocess.run(
                argv, cwd=cwd, stdout=subprocess.PIPE, stderr=f, text=True, timeout=_TIMEOUT
            )
        except FileNotFoundError:
            raise BuildFailed(f"{what}: {argv[0]} not found (log {log})") from None
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{what}: took over {_TIMEOUT} s (log {log})") from None
        f.write(out.stdout)
    if out.returncode != 0:
        raise BuildFailed(f"{what} failed (exit {out.returncode}); see {log}")
    return out.stdout


def _fetch(d: Path, log: Path) -> tuple[str, Path, Path]:
    """apt-get source --download-only under the private configuration: (version, .dsc, tar)."""
    apt = d / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "sources.list.d"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb-src [signed-by={KEYRING}] {MIRROR} {SUITE} main\n")
    opts = _apt_options(apt)
    _run(["apt-get", *opts, "-q", "update"], log, f"the {SUITE} source index is not reachable")
    src = d / "source"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    _run(
        ["apt-get", *opts, "-q", "source", "--download-only", SOURCE_PACKAGE],
        log,
        f"fetching the {SOURCE_PACKAGE} source package",
        cwd=src,
    )
    dscs = sorted(src.glob(f"{SOURCE_PACKAGE}_*.dsc"))
    tars = sorted(src.glob(f"{SOURCE_PACKAGE}_*.orig.tar.*"))
    tars = [t for t in tars if not t.name.endswith(".asc")]
    if len(dscs) != 1 or len(tars) != 1:
        raise BuildFailed(f"apt-get source left {len(dscs)} .dsc and {len(tars)} tarballs in {src}")
    version = dscs[0].name.removeprefix(f"{SOURCE_PACKAGE}_").removesuffix(".dsc")
    nums = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if nums < MIN_VERSION:
        raise BuildFailed(f"{SUITE} has {SOURCE_PACKAGE} {version}; the floor needs 3.18 or later")
    return version, dscs[0], tars[0]


def _fetch_and_build(d: Path, log: Path) -> Build:
    log.write_text("")
    version, dsc, tar = _fetch(d, log)
    tree = d / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(tree, filter="data")  # the upstream tarball; apt checked its SHA256
    tops = [p for p in tree.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildFailed(f"{tar.name} unpacked into {len(tops)} directories")
    out = d / "build"
    shutil.rmtree(out, ignore_errors=True)
    _run(["meson", "setup", str(out), *MESON_OPTIONS], log, "meson setup", cwd=tops[0])
    targets = [f"example/{n}" for n in DAEMONS]
    _run(["ninja", "-C", str(out), *targets], log, "ninja")
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


def main() -> int:
    """`python -m fsbench.lab.libfuse`: build (or verify) now; one line either way."""
    try:
        b = ensure()
    except BuildFailed as e:
        print(f"libfuse 3.18: not built: {e}")
        return 1
    print(f"libfuse {b.version}: {b.tarball} sha256 {b.tarball_sha256}; daemons {b.daemons}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
