"""Debian packages fetched with apt under a private configuration, and fsbench's build caches.

The VM kernels (vm/kernels.py), libfuse 3.18 (fuse/libfuse.py) and fuse2fs built against it
(fuse/fuse2fs.py) come from Debian suites this machine's apt is not configured for. Each is
fetched with apt confined to a directory of fsbench's cache (its own sources list, lists and
cache; the system's apt state is never read or written), so apt checks the suite's signed
Release file against Debian's keyring and every file against the SHA256 of the signed index.

A build from source is cached the same way for all of them: `build.json` (what it was made from
and the sha256 of every binary it made) is written last, every reuse checks the binaries
against it, and a failed fetch or build leaves `failed.json` (the reason and the build log)
for `fsbench doctor` and the next run.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
BUILD_TIMEOUT = 900  # one step of a build on 2 CPUs; a slow mirror more


class BuildFailed(Exception):
    """A fetch or build failed; the message says why and where its log is."""


def cache_root(name: str) -> Path:
    """$XDG_CACHE_HOME/fsbench/<name> (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fsbench" / name


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def apt_options(d: Path) -> list[str]:
    """apt confined to `d`: its own sources, lists and cache; no system state involved."""
    return [
        *("-o", f"Dir::Etc::SourceList={d / 'sources.list'}"),
        *("-o", f"Dir::Etc::SourceParts={d / 'sources.list.d'}"),
        *("-o", f"Dir::State::Lists={d / 'lists'}"),
        *("-o", f"Dir::Cache={d / 'cache'}"),
        *("-o", "Dir::State::status=/dev/null"),
        *("-o", "APT::Sandbox::User=root"),
    ]


def prepare(
    d: Path, suite: str, kind: str = "deb", mirror: str = MIRROR, keyring: str = KEYRING
) -> list[str]:
    """Lay out the private apt directory `d` with one `kind` ("deb" or "deb-src") line for
    `suite`; returns the options that confine apt to it."""
    for sub in ("lists/partial", "cache/archives/partial", "sources.list.d"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "sources.list").write_text(f"{kind} [signed-by={keyring}] {mirror} {suite} main\n")
    return apt_options(d)


@contextlib.contextmanager
def locked(d: Path) -> Iterator[None]:
    """One build at a time (two test workers, two runs): the second waits, then reuses."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_logged(argv: list[str], log: Path, what: str, cwd: Path | None = None, env=None) -> str:
    """Run one build step, its output appended to the build log; BuildFailed names the step."""
    with log.open("a") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        try:
            out = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=f,
                text=True,
                timeout=BUILD_TIMEOUT,
            )
        except FileNotFoundError:
            raise BuildFailed(f"{what}: {argv[0]} not found (log {log})") from None
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{what}: took over {BUILD_TIMEOUT} s (log {log})") from None
        f.write(out.stdout)
    if out.returncode != 0:
        raise BuildFailed(f"{what} failed (exit {out.returncode}); see {log}")
    return out.stdout


def fetch_source(
    d: Path, package: str, suite: str, log: Path, min_version: tuple[int, ...] = ()
) -> tuple[str, Path, Path]:
    """`apt-get source --download-only` of `package` from `suite` under a private
    configuration in d/apt, into d/source: (Debian version, .dsc, upstream tarball)."""
    opts = prepare(d / "apt", suite, kind="deb-src")
    run_logged(
        ["apt-get", *opts, "-q", "update"], log, f"the {suite} source index is not reachable"
    )
    src = d / "source"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    run_logged(
        ["apt-get", *opts, "-q", "source", "--download-only", package],
        log,
        f"fetching the {package} source package",
        cwd=src,
    )
    dscs = sorted(src.glob(f"{package}_*.dsc"))
    tars = [t for t in sorted(src.glob(f"{package}_*.orig.tar.*")) if not t.name.endswith(".asc")]
    if len(dscs) != 1 or len(tars) != 1:
        raise BuildFailed(f"apt-get source left {len(dscs)} .dsc and {len(tars)} tarballs in {src}")
    version = dscs[0].name.removeprefix(f"{package}_").removesuffix(".dsc")
    if min_version and version_tuple(version, len(min_version)) < min_version:
        wanted = ".".join(map(str, min_version))
        raise BuildFailed(f"{suite} has {package} {version}; {wanted} or later is needed")
    return version, dscs[0], tars[0]


def version_tuple(version: str, n: int = 3) -> tuple[int, ...]:
    """The first `n` numbers of a version string ("3.18.3-1" -> (3, 18, 3))."""
    return tuple(int(x) for x in re.findall(r"\d+", version)[:n])


def missing_packages(tools: dict[str, str], libs: dict[str, str]) -> list[str]:
    """Debian packages a build needs and this machine lacks: `tools` maps a program to its
    package, `libs` a pkg-config name to its package (no network involved)."""
    missing = [pkg for tool, pkg in tools.items() if shutil.which(tool) is None]
    for lib, pkg in libs.items():
        ok = shutil.which("pkg-config") is not None and (
            subprocess.run(["pkg-config", "--exists", lib], check=False).returncode == 0
        )
        if not ok:
            missing.append(pkg)
    if shutil.which("apt-get") is None:
        missing.append("apt")
    return missing


# -- a cached build ----------------------------------------------------------------------------
def load_record(d: Path, verify: bool, what: str) -> dict[str, Any] | None:
    """The build record in `d` (build.json), each binary checked against its recorded sha256
    (`daemons`: name -> path, `daemon_sha256`: name -> digest); None when there is none.
    BuildFailed when a binary was changed or damaged since it was built."""
    meta = d / "build.json"
    if not meta.is_file():
        return None
    try:
        record = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if verify:
        for name, path in record.get("daemons", {}).items():
            p = Path(path)
            got = file_sha256(p) if p.is_file() else "missing"
            if got != record.get("daemon_sha256", {}).get(name):
                raise BuildFailed(
                    f"the cached {name} ({path}) does not match its recorded sha256 "
                    f"(changed or damaged); delete {d} to build {what} again"
                )
    return record


def last_failure(d: Path) -> dict | None:
    """{reason, log} of the last failed fetch or build, if it failed and nothing built since."""
    try:
        return json.loads((d / "failed.json").read_text())
    except (OSError, ValueError):
        return None


def build_once(
    d: Path, build: Callable[[Path], dict[str, Any]], reuse: Callable[[], Any | None]
) -> Any:
    """Build into `d` under its lock unless `reuse()` finds it built meanwhile; `build(log)`
    returns the record written (last: it means done) as build.json. A failure is written to
    failed.json and raised."""
    with locked(d):
        cached = reuse()  # another process built it while this one waited
        if cached is not None:
            return cached
        log = d / "build.log"
        try:
            record = build(log)
        except BuildFailed as e:
            (d / "failed.json").write_text(json.dumps({"reason": str(e), "log": str(log)}))
            raise
        (d / "failed.json").unlink(missing_ok=True)
        (d / "build.json").write_text(json.dumps(record, indent=1))
    return reuse()
