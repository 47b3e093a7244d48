"""ntfsck (ntfsprogs-plus), the checker the new ntfs driver's authors recommend, fetched here.

ntfs-3g's `ntfsfix -n` checks little (the volume mounts in libntfs-3g, $MFT against $MFTMirr);
ntfsprogs-plus's `ntfsck -n` walks every MFT record, the system files, the index entries and
orphaned records without changing anything. Debian 12 has no ntfsprogs-plus, and unstable's
binary needs glibc 2.38 (its `__isoc23_strtol`) where Debian 12 has 2.36, and unstable's source
package is not reachable here. So the binary package and unstable's libc6 are fetched with apt
under a private configuration (fsbench/host/apt.py: signature and SHA256 checked by apt), each at
the version unstable pins, unpacked into $XDG_CACHE_HOME/fsbench/ntfsprogs-plus/, and ntfsck
runs through unstable's own dynamic loader with unstable's libc (a wrapper script,
`bin/ntfsck`): nothing of the system's is replaced. The record (`build.json`: packages, versions,
the sha256 of the wrapper, ntfsck, the loader and libc) is written last and checked on every
reuse. A guest VM sees the cache read-only and runs the same files; it never fetches.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from fsbench.host import apt
from fsbench.host.apt import BuildFailed, file_sha256
from fsbench.lab.formats import Checker

__all__ = ["Build", "BuildFailed", "checker", "ensure", "load"]

WHAT = "ntfsck (ntfsprogs-plus)"
PACKAGE = "ntfsprogs-plus"
SUITE = "unstable"
LIBDIR = "usr/lib/x86_64-linux-gnu"
LOADER = "ld-linux-x86-64.so.2"


@dataclass
class Build:
    key: str
    version: str  # ntfsprogs-plus's Debian version, "1.0.0-5"
    packages: dict[str, str]  # every package fetched -> its version
    daemons: dict[str, str]  # name -> path (apt.load_record checks each)
    daemon_sha256: dict[str, str]
    log: str

    @property
    def ntfsck(self) -> str:
        return self.daemons["ntfsck"]


def cache_root() -> Path:
    return apt.cache_root("ntfsprogs-plus")


def build_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / f"{PACKAGE}-{SUITE}"


def load(root: Path | None = None, verify: bool = True) -> Build | None:
    """The fetched ntfsck, its files checked against their recorded sha256; None if not
    fetched. BuildFailed when a file changed since."""
    record = apt.load_record(build_dir(root), verify, WHAT)
    try:
        return Build(**record) if record is not None else None
    except TypeError:
        return None


def last_failure(root: Path | None = None) -> dict | None:
    return apt.last_failure(build_dir(root))


def ensure(root: Path | None = None) -> Build:
    """Fetch once (about two seconds), verify on every later call."""
    cached = load(root)
    if cached is not None:
        return cached
    d = build_dir(root)
    b = apt.build_once(d, lambda log: asdict(_fetch(d, log)), lambda: load(root))
    assert b is not None
    return b


def fetch_for(formats: set[str]) -> str | None:
    """Fetch ntfsck on first use when a run has NTFS volumes to check; never inside a guest VM
    (it reads the host's cache and has no network). The reason it is not there, or None."""
    if "ntfs" not in formats:
        return None
    try:
        if os.environ.get("FSBENCH_IN_VM"):
            return None if load() is not None else "not fetched on the host before the VM booted"
        ensure()
    except BuildFailed as e:
        return str(e)
    return None


def libc_pin(show: str) -> str | None:
    """The libc6 version ntfsprogs-plus needs at least, from its Depends (`libc6 (>= 2.38)`)."""
    m = re.search(r"\blibc6\s*\(\s*>=\s*([^)\s]+)\s*\)", show)
    return m.group(1) if m else None


def _fetch(d: Path, log: Path) -> Build:
    log.write_text("")
    opts = apt.prepare(d / "apt", SUITE)
    run = apt.run_logged
    run(["apt-get", *opts, "-q", "update"], log, f"the {SUITE} index is not reachable")
    show = run(["apt-cache", *opts, "show", "--no-all-versions", PACKAGE], log, "apt-cache show")
    versions = {}
    for name in (PACKAGE, "libc6"):
        out = run(["apt-cache", *opts, "show", "--no-all-versions", name], log, "apt-cache")
        m = re.search(r"^Version:\s*(\S+)", out, re.M)
        if not m:
            raise BuildFailed(f"{SUITE} has no {name}")
        versions[name] = m.group(1)
    need = libc_pin(show)
    if need and apt.version_tuple(versions["libc6"]) < apt.version_tuple(need):
        raise BuildFailed(f"{PACKAGE} needs libc6 {need}; {SUITE} has {versions['libc6']}")
    dl = d / "download"
    shutil.rmtree(dl, ignore_errors=True)
    dl.mkdir(parents=True)
    pins = [f"{n}={v}" for n, v in versions.items()]
    run(["apt-get", *opts, "-q", "download", *pins], log, f"fetching {PACKAGE}", cwd=dl)
    root = d / "root"
    shutil.rmtree(root, ignore_errors=True)
    for deb in sorted(dl.glob("*.deb")):
        run(["dpkg", "-x", str(deb), str(root)], log, f"unpacking {deb.name}")
    shutil.rmtree(dl, ignore_errors=True)
    binary = root / "usr" / "sbin" / "ntfsck"
    lib = root / LIBDIR
    if not binary.is_file() or not (lib / LOADER).exists():
        raise BuildFailed(f"the packages held no usr/sbin/ntfsck or {LIBDIR}/{LOADER}")
    wrapper = d / "bin" / "ntfsck"
    wrapper.parent.mkdir(exist_ok=True)
    # Unstable's loader and libc for ntfsck only; the system's stay as they are.
    loader, libpath = (lib / LOADER).resolve(), lib
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec {shlex.quote(str(loader))} --library-path {shlex.quote(str(libpath))} "
        f'{shlex.quote(str(binary))} "$@"\n'
    )
    wrapper.chmod(0o755)
    files = {
        "ntfsck": wrapper,
        "ntfsck.bin": binary,
        "ld.so": loader,
        "libc.so.6": (lib / "libc.so.6").resolve(),
    }
    return Build(
        key=build_dir().name,
        version=versions[PACKAGE],
        packages=versions,
        daemons={k: str(v) for k, v in files.items()},
        daemon_sha256={k: file_sha256(v) for k, v in files.items()},
        log=str(log),
    )


def checker(root: Path | None = None) -> Checker | None:
    """`ntfsck -n` as a format checker when it is fetched and verified; None otherwise."""
    try:
        b = load(root)
    except BuildFailed:
        return None
    if b is None or not os.access(b.ntfsck, os.X_OK):
        return None
    return Checker(
        (b.ntfsck, "-n"),
        (b.ntfsck, "-V"),
        f"{PACKAGE} {b.version} (unstable, with its libc6 {b.packages.get('libc6', '?')})",
        "every MFT record, the system files ($MFT/$MFTMirr, $Bitmap, $LogFile), every "
        "directory index and its entries, orphaned MFT records; check only (-n); not file "
        "contents",
        ("Parse #", "Clean, No errors", "100.00 percent", "ntfsck v"),
    )


def main() -> int:
    """`python -m fsbench.lab.ntfsck`: fetch (or verify) now; one line either way."""
    try:
        b = ensure()
    except BuildFailed as e:
        print(f"{WHAT}: not fetched: {e}")
        return 1
    print(f"{WHAT} {b.version}: {b.ntfsck}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
