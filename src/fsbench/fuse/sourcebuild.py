"""A FUSE daemon fsbench builds from a Debian source package, as one record (`SourceBuild`),
and the one path every such build takes: fetched with apt under a private configuration
(host/apt.py), built once into $XDG_CACHE_HOME/fsbench/<name>/<key>/ under a lock, its record
(`build.json`: the .dsc and tarball sha256, each daemon's sha256) written last, each daemon
checked against it on every reuse; a failed fetch or build leaves `failed.json` (the reason and
the build log) for `fsbench doctor` and the next run.

A source-built driver is its `Driver` record (lab/drivers.py, `built=`) plus its `SourceBuild`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from fsbench.host import apt
from fsbench.host.apt import BuildFailed, file_sha256

__all__ = ["BuildFailed", "Built", "SourceBuild", "ensure", "last_failure", "load"]


@dataclass
class Built:
    """A finished build: where its daemons are and what they were made from. `extra` holds
    what its steps found (libfuse: `uring`, `usdt`) and the builds it links, by name."""

    key: str
    version: str  # the Debian source version, "3.18.3-1"
    dsc: str
    dsc_sha256: str
    tarball: str
    tarball_sha256: str
    daemons: dict[str, str]  # name -> path
    daemon_sha256: dict[str, str]
    log: str
    extra: dict[str, Any] = field(default_factory=dict)

    def daemon(self, name: str) -> str:
        return self.daemons[name]

    def record(self) -> dict[str, Any]:
        """build.json: the fields, `extra` flattened into them."""
        out = asdict(self)
        extra = out.pop("extra")
        return {**out, **extra}

    @classmethod
    def of(cls, record: dict[str, Any]) -> Built | None:
        names = {f.name for f in fields(cls)} - {"extra"}
        if not names <= set(record):
            return None  # an older record: built again
        extra = {k: v for k, v in record.items() if k not in names}
        return cls(**{k: record[k] for k in names}, extra=extra)


# (the record, the verified upstream tarball, the build's directory, its log, the builds it
# builds on by name) -> (daemon name -> the file built, extra fields of the record)
Steps = Callable[
    ["SourceBuild", Path, Path, Path, dict[str, Built]], tuple[dict[str, Path], dict[str, Any]]
]


@dataclass(frozen=True)
class SourceBuild:
    name: str  # its cache directory under $XDG_CACHE_HOME/fsbench/, and how its version reads
    what: str  # said in messages: "libfuse 3.18"
    package: str  # the Debian source package
    suite: str
    min_version: tuple[int, ...]  # an older source is refused
    options: tuple[str, ...]  # how it is built: part of the cache key
    daemons: tuple[str, ...]
    steps: Steps
    tools: dict[str, str]  # binary -> the Debian package that provides it
    libs: dict[str, str]  # pkg-config name -> its -dev package
    on: tuple[SourceBuild, ...] = ()  # built first; their keys are part of this one's


def cache_root(b: SourceBuild) -> Path:
    return apt.cache_root(b.name)


def cache_key(b: SourceBuild, options: tuple[str, ...] | None = None) -> str:
    """The cache directory's name: the source, how it is built and what it builds on, so a
    change of any builds anew instead of reusing a build made another way."""
    parts = [b.package, b.suite, *(b.options if options is None else options)]
    parts += [cache_key(o) for o in b.on]
    return f"{b.package}-{b.suite}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


def build_dir(b: SourceBuild, root: Path | None = None) -> Path:
    key = cache_key(b)
    return (root or cache_root(b)) / key


def load(b: SourceBuild, root: Path | None = None, verify: bool = True) -> Built | None:
    """The cached build, each daemon checked against its recorded sha256; None when there is
    none. BuildFailed when a daemon was changed or damaged since it was built."""
    d = build_dir(b, root)
    record = apt.load_record(d, verify, b.name)
    return Built.of(record) if record is not None else None


def last_failure(b: SourceBuild, root: Path | None = None) -> dict | None:
    """{reason, log} of the last failed fetch or build, if it failed and nothing built since."""
    return apt.last_failure(build_dir(b, root))


def missing_build_tools(b: SourceBuild) -> list[str]:
    """Debian packages the build (and what it builds on) needs and this machine lacks."""
    below = [p for o in b.on for p in missing_build_tools(o)]
    return sorted({*below, *apt.missing_packages(b.tools, b.libs)})


def ensure(b: SourceBuild, root: Path | None = None) -> Built:
    """The build, fetched and built on first use (what it builds on first), verified on every
    reuse."""
    cached = load(b, root)
    if cached is not None:
        return cached
    d = build_dir(b, root)

    def build(log: Path) -> dict[str, Any]:
        missing = missing_build_tools(b)
        if missing:
            raise BuildFailed(
                f"building {b.what} needs {', '.join(missing)}: apt-get install "
                f"{' '.join(missing)} (or bash scripts/setup.sh --test)"
            )
        return fetch_and_build(b, d, log, {o.name: ensure(o) for o in b.on}).record()

    built = apt.build_once(d, build, lambda: load(b, root))
    assert built is not None  # build.json was just written and verified
    return built


def fetch_and_build(b: SourceBuild, d: Path, log: Path, below: dict[str, Built]) -> Built:
    log.write_text("")
    version, dsc, tar = apt.fetch_source(d, b.package, b.suite, log, b.min_version)
    made, extra = b.steps(b, tar, d, log, below)
    bins = d / "bin"
    bins.mkdir(exist_ok=True)
    daemons, sums = {}, {}
    for name in b.daemons:
        target = bins / name
        shutil.copy2(made[name], target)
        daemons[name], sums[name] = str(target), file_sha256(target)
    for sub in ("tree", "work"):  # the sources are re-fetched if ever needed
        shutil.rmtree(d / sub, ignore_errors=True)
    for name, o in below.items():
        extra[name] = f"{o.version} ({o.tarball} sha256 {o.tarball_sha256[:12]})"
    return Built(
        key=cache_key(b),
        version=version,
        dsc=dsc.name,
        dsc_sha256=file_sha256(dsc),
        tarball=tar.name,
        tarball_sha256=file_sha256(tar),
        daemons=daemons,
        daemon_sha256=sums,
        log=str(log),
        extra=extra,
    )


def version(b: SourceBuild, daemon: str) -> str | None:
    """How a built daemon's version reads: the source's version, what it links, its sha256."""
    try:
        built = load(b, verify=False)
    except BuildFailed:
        return None
    if built is None:
        return None
    linked = "".join(f" with {o.name} {built.extra.get(o.name, '?')}" for o in b.on)
    digest = built.daemon_sha256.get(daemon, "")[:12]
    return f"{b.name} {built.version}{linked} (built here, {daemon} sha256 {digest})"


def problem(b: SourceBuild) -> str:
    """Why the build cannot serve now ("" when it is built and verified); no network is asked:
    a subject naming its driver builds it (Lab.check)."""
    try:
        if load(b) is not None:
            return ""
    except BuildFailed as e:
        return str(e)
    failed = last_failure(b)
    if failed:
        return f"the {b.what} build failed: {failed['reason']} (log {failed['log']})"
    missing = missing_build_tools(b)
    if missing:
        return (
            f"not built: {b.what} is built on first use and needs {', '.join(missing)}: "
            f"apt-get install {' '.join(missing)}"
        )
    return (
        f"not built yet: naming it in `fsbench compare` fetches {b.what}'s source with apt "
        "and builds it (about a minute, once)"
    )


def unpack(tar: Path, into: Path) -> Path:
    """The upstream tarball unpacked into `into` (emptied first): its one top directory."""
    import tarfile

    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")  # apt checked its SHA256
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildFailed(f"{tar.name} unpacked into {len(tops)} directories")
    return tops[0]


def main(b: SourceBuild) -> int:
    """`python -m fsbench.fuse.<module>`: build (or verify) now; one line either way."""
    try:
        built = ensure(b)
    except BuildFailed as e:
        print(f"{b.what}: not built: {e}")
        return 1
    print(f"{b.what}: {built.version} from {built.tarball}; daemons {built.daemons}")
    return 0
