"""Kernels a run can boot in a VM: known names (Debian packages), local builds, the host.

A Debian kernel is fetched on first use with apt under a private configuration (its own
sources list, lists and cache under the user's cache directory; the system's apt state is
never read or written), so apt checks the suite's signed Release file against Debian's
keyring and the package against its SHA256. It is unpacked with `dpkg -x` into
$XDG_CACHE_HOME/fsbench/kernels/<name>/ — never into /boot or the host's /lib/modules — and a
digest of the unpacked tree is recorded and checked on every reuse.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fsbench.errors import EnvironmentProblem, UsageError
from fsbench.host import apt
from fsbench.host.apt import file_sha256
from fsbench.lab.drivers import DRIVERS, availability
from fsbench.records.choices import by_name

HOST = "host"
_TIMEOUT = 600  # apt and dpkg: a 100 MB package on a slow mirror


@dataclass(frozen=True)
class DebianKernel:
    """A kernel known by name: the newest package matching `package` in `suite`."""

    name: str
    suite: str
    package: str  # a regular expression over package names
    mirror: str = apt.MIRROR
    keyring: str = apt.KEYRING
    description: str = ""
    # Kernel drivers its modules add to a host without them (what `doctor` lists as "adds"
    # once it is fetched): the report names the kernel before anyone fetches it.
    adds: tuple[str, ...] = ()
    # Likewise what else it offers a guest (FEATURES' words), until its config is read.
    features: tuple[str, ...] = ()


KNOWN: dict[str, DebianKernel] = by_name(
    DebianKernel(
        "debian-6.12",
        "bookworm-backports",
        r"linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned",
        description="Debian's 6.12 from bookworm-backports (ntfs3, exfat, vfat as modules)",
        adds=("ntfs3", "exfat", "vfat"),
    ),
    # "Unstable's newest", whatever series that is when first fetched: the run records
    # which release and packages it was (7.2.13 when added, with the new ntfs driver and
    # no ntfs3).
    DebianKernel(
        "debian-sid",
        "sid",
        r"linux-image-[0-9]+\.[0-9]+\.[0-9]+\+deb[0-9]+-amd64",
        description="Debian unstable's newest kernel (7.x: the new ntfs driver, exfat, vfat "
        "as modules; no ntfs3; FUSE over io_uring and passthrough built in)",
        adds=("ntfs", "exfat", "vfat"),
        features=("FUSE over io_uring", "FUSE passthrough"),
    ),
)
# The parts a split image meta package (7.x) depends on: vmlinuz, modules, config.
SPLIT_PARTS = ("linux-binary-", "linux-modules-", "linux-base-")
# Kernel features a guest adds beside drivers (doctor lists them): config symbol -> what.
FEATURES = {
    "CONFIG_FUSE_IO_URING": "FUSE over io_uring",
    "CONFIG_FUSE_PASSTHROUGH": "FUSE passthrough",
}


@dataclass
class Kernel:
    """A bootable kernel: its image and (optionally) its module tree, never the host's."""

    name: str
    image: str
    modules: str | None  # .../lib/modules/<release>, handed to the guest as its module tree
    release: str
    source: str  # "linux-image-... 6.12.95-1~bpo12+1" or the local path
    sha256: str | None = None  # of the unpacked tree (Debian) or of the image (local)
    packages: dict[str, str] = field(default_factory=dict)  # Debian: every package -> version

    def drivers(self) -> list[str]:
        return kernel_drivers(self)


def cache_root() -> Path:
    return apt.cache_root("kernels")


def split_subject(text: str) -> tuple[str, str | None]:
    """`ntfs3@debian-6.12` -> ("ntfs3", "debian-6.12"); `ext4` -> ("ext4", None)."""
    head, sep, kernel = text.strip().rpartition("@")
    if not sep:
        return text.strip(), None
    if not head:
        raise UsageError(f"subject {text!r}: no driver before '@'")
    check_name(kernel, f"subject {text!r}")
    return head, kernel


def check_name(name: str, where: str = "--kernel") -> None:
    """Refuse a kernel name that is neither known, `host`, nor `path:IMAGE[,MODULES]`."""
    if name == HOST or name in KNOWN:
        return
    if name.startswith("path:"):
        image, _, modules = name[5:].partition(",")
        if not image or not Path(image).is_file():
            raise UsageError(f"{where}: kernel image {image!r} is not a file")
        if modules and not Path(modules).is_dir():
            raise UsageError(f"{where}: module directory {modules!r} is not a directory")
        return
    known = ", ".join([HOST, *KNOWN, "path:IMAGE[,MODULES]"])
    raise UsageError(f"{where}: unknown kernel {name!r}; known: {known}")


def slug(name: str) -> str:
    """A file-name-safe form of a kernel name (path: names are hashed)."""
    if name.startswith("path:"):
        return "path-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _release_of_tree(modules_root: Path) -> str | None:
    releases = sorted(p.name for p in modules_root.iterdir() if p.is_dir())
    return releases[-1] if releases else None


def _image_release(image: Path) -> str:
    """The release string inside a bzImage (`Linux version X ...`), as virtme reads it."""
    try:
        out = subprocess.run(["file", "-b", str(image)], capture_output=True, text=True, timeout=30)
        m = re.search(r"[vV]ersion (\S+)", out.stdout)
        if m:
            return m.group(1)
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "unknown"


def resolve(name: str, fetch: bool = True) -> Kernel:
    """The kernel a name stands for; a known Debian kernel is fetched on first use."""
    check_name(name)
    if name == HOST:
        raise UsageError("the host kernel runs no VM; name a guest kernel")
    if name.startswith("path:"):
        image, _, modules = name[5:].partition(",")
        img = Path(image).resolve()
        release = _image_release(img)
        mods = str(Path(modules).resolve()) if modules else None
        if mods:
            img, mods = _layout(name, img, Path(mods), release)
        return Kernel(
            name=name,
            image=str(img),
            modules=mods,
            release=release,
            source=str(img),
            sha256=file_sha256(img),
        )
    known = KNOWN[name]
    cached = load_cached(name)
    if cached is not None:
        return cached
    if not fetch:
        raise EnvironmentProblem(f"kernel {name} is not in the cache ({cache_root() / name})")
    return fetch_debian(known)


def _layout(name: str, image: Path, modules: Path, release: str) -> tuple[Path, str]:
    """virtme-ng finds a kernel's modules beside its image (ROOT/boot, ROOT/lib/modules/REL):
    give a local build that shape with two symlinks in the cache, nothing copied."""
    root = cache_root() / slug(name) / "root"
    (root / "boot").mkdir(parents=True, exist_ok=True)
    (root / "lib" / "modules").mkdir(parents=True, exist_ok=True)
    links = {root / "boot" / f"vmlinuz-{release}": image, root / "lib/modules" / release: modules}
    for link, target in links.items():
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return root / "boot" / f"vmlinuz-{release}", str(root / "lib" / "modules" / release)


def tree_sha256(root: Path) -> str:
    """One digest over every file's relative path and content (symlinks by their target)."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = Path(dirpath) / f
            h.update(str(p.relative_to(root)).encode() + b"\0")
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            else:
                h.update(file_sha256(p).encode())
    return h.hexdigest()


def _meta_path(name: str) -> Path:
    return cache_root() / name / "kernel.json"


def load_cached(name: str, verify: bool = True) -> Kernel | None:
    """A cached kernel, its tree checked against the recorded digest; None if not cached."""
    meta = _meta_path(name)
    if not meta.is_file():
        return None
    try:
        k = Kernel(**json.loads(meta.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if verify:
        got = tree_sha256(Path(meta.parent / "root"))
        if got != k.sha256:
            raise EnvironmentProblem(
                f"kernel {name}: the cached tree {meta.parent / 'root'} does not match its "
                f"recorded sha256 (changed or damaged); delete {meta.parent} to fetch it again"
            )
    return k


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except FileNotFoundError:
        raise EnvironmentProblem(f"{argv[0]} not found; fetching a kernel needs apt") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{' '.join(argv[:3])} took over {_TIMEOUT} s") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise EnvironmentProblem(f"{' '.join(argv[:2])} failed: {last}")
    return out.stdout


def control_fields(text: str) -> dict[str, str]:
    """The first stanza of `apt-cache show` / a control file: field -> value (continuations
    joined)."""
    fields: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        if line[0] in " \t" and last:
            fields[last] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if sep:
            last = key.strip()
            fields[last] = value.strip()
    return fields


def split_parts(show: str) -> list[tuple[str, str]]:
    """(package, version) of each part a split image meta package depends on, exactly as
    pinned (`linux-binary-X (= V)`); [] for a package that holds the kernel itself."""
    parts = []
    for dep in control_fields(show).get("Depends", "").split(","):
        first = dep.split("|")[0].strip()
        m = re.fullmatch(r"(\S+)\s*(?:\(\s*=\s*([^)\s]+)\s*\))?", first)
        if m and m.group(1).startswith(SPLIT_PARTS):
            if not m.group(2):
                raise EnvironmentProblem(f"{first}: a kernel part not pinned to one version")
            parts.append((m.group(1), m.group(2)))
    return parts


def fetch_debian(k: DebianKernel) -> Kernel:
    """apt-get update + download with a private configuration, then dpkg -x into the cache."""
    dest = cache_root() / k.name
    apt_dir = dest / "apt"
    opts = apt.prepare(apt_dir, k.suite, "deb", k.mirror, k.keyring)
    (apt_dir / "download").mkdir(exist_ok=True)
    _run(["apt-get", *opts, "-q", "update"])
    names = _run(["apt-cache", *opts, "pkgnames", "linux-image-"]).split()
    pattern = re.compile(k.package)
    matches = [n for n in names if pattern.fullmatch(n)]
    if not matches:
        raise EnvironmentProblem(f"kernel {k.name}: no package matching {k.package} in {k.suite}")
    package = max(matches, key=_version_key)
    show = _run(["apt-cache", *opts, "show", "--no-all-versions", package])
    version = control_fields(show).get("Version", "")
    # 7.x: the meta package holds nothing bootable; its parts are what is fetched.
    wanted = split_parts(show) or [(package, version)]
    dl = apt_dir / "download"
    for old in dl.glob("*.deb"):
        old.unlink()
    # apt verifies each download against the SHA256 of the signed index.
    _run(["apt-get", *opts, "-q", "download", *(f"{n}={v}" for n, v in wanted)], cwd=dl)
    debs = _check_debs(k.name, sorted(dl.glob("*.deb")), dict(wanted))
    root = dest / "root"
    shutil.rmtree(root, ignore_errors=True)
    tmp = dest / "root.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in debs:
        _run(["dpkg", "-x", str(deb), str(tmp)])
    os.replace(tmp, root)
    for deb in debs:
        deb.unlink()  # 100 MB: the unpacked tree and its digest are what is kept
    # 6.12 unpacks into /boot and /lib/modules; 7.x (merged /usr) into /usr/lib/modules/REL,
    # its vmlinuz and config beside the modules. virtme-ng finds the modules from either.
    base = root / "usr" if (root / "usr" / "lib" / "modules").is_dir() else root
    if not (base / "lib" / "modules").is_dir():
        raise EnvironmentProblem(f"kernel {k.name}: the packages hold no lib/modules")
    release = _release_of_tree(base / "lib" / "modules") or "unknown"
    # Debian ships no modules.dep (its postinst makes it): make it here, in the private tree.
    subprocess.run(
        ["depmod", "-a", "-b", str(base), release], capture_output=True, timeout=300, check=False
    )
    images = sorted((root / "boot").glob("vmlinuz-*")) or [
        p for p in [base / "lib" / "modules" / release / "vmlinuz"] if p.is_file()
    ]
    if not images:
        held = ", ".join(n for n, _v in wanted)
        raise EnvironmentProblem(f"kernel {k.name}: {held} hold no vmlinuz")
    kern = Kernel(
        name=k.name,
        image=str(images[-1]),
        modules=str(base / "lib" / "modules" / release),
        release=release,
        source=f"{package} {version} ({k.suite})",
        sha256=tree_sha256(root),
        packages={package: version, **dict(wanted)},
    )
    _meta_path(k.name).write_text(json.dumps(asdict(kern), indent=1))
    return kern


def _check_debs(name: str, debs: list[Path], wanted: dict[str, str]) -> list[Path]:
    """The downloaded files are exactly the packages and versions asked for."""
    got = {}
    for deb in debs:
        fields = control_fields(_run(["dpkg-deb", "-f", str(deb), "Package", "Version"]))
        got[fields.get("Package", deb.name)] = fields.get("Version", "")
    if got != wanted:
        raise EnvironmentProblem(f"kernel {name}: apt-get download gave {got}, not {wanted}")
    return debs


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def kernel_drivers(k: Kernel) -> list[str]:
    """fsbench's kernel drivers whose module the kernel ships (built in or loadable), and the
    FUSE drivers if it has FUSE."""
    if not k.modules or not Path(k.modules).is_dir():
        return []
    mods = Path(k.modules)
    present: set[str] = set()
    builtin = mods / "modules.builtin"
    if builtin.is_file():
        present |= {Path(line).name.split(".ko")[0] for line in builtin.read_text().split()}
    for p in (mods / "kernel").rglob("*.ko*"):
        present.add(p.name.split(".ko")[0])
    out = []
    for d in DRIVERS.values():
        if (d.kind == "kernel" and d.module in present) or (d.kind == "fuse" and "fuse" in present):
            out.append(d.name)
    return out


def kernel_features(k: Kernel) -> list[str]:
    """What else the kernel offers a guest (FEATURES), read from its config (beside its image:
    /boot/config-REL, or 7.x's lib/modules/REL/config); [] when the tree has no config."""
    here = Path(k.image).parent
    found = [here / f"config-{k.release}", here / "config", *sorted(here.glob("config-*"))]
    config = next((c for c in found if c.is_file()), None)
    if config is None:
        return []
    have = {line.split("=")[0] for line in config.read_text().splitlines() if line.endswith("=y")}
    return [what for sym, what in FEATURES.items() if sym in have]


def providers(drivers: list[str]) -> tuple[str, list[str]] | None:
    """The known kernel that provides most of `drivers` (kernel drivers this host lacks), with
    those it provides; None when none provides any."""
    best: tuple[str, list[str]] | None = None
    for name, k in KNOWN.items():
        got = [d for d in drivers if d in k.adds]
        if got and (best is None or len(got) > len(best[1])):
            best = (name, got)
    return best


def listing() -> list[dict]:
    """Every known and cached kernel, for `fsbench doctor` (no network, no verification)."""
    rows: list[dict] = []
    names = list(KNOWN)
    root = cache_root()
    if root.is_dir():
        names += [p.name for p in sorted(root.iterdir()) if p.name not in KNOWN]
    for name in names:
        k = load_cached(name, verify=False)
        known = KNOWN.get(name)
        rows.append(
            {
                "name": name,
                "cached": k is not None,
                "source": k.source if k else (f"{known.suite}: {known.package}" if known else ""),
                "release": k.release if k else None,
                "drivers": kernel_drivers(k) if k else [],
                # What a VM with it adds to this machine: drivers the host cannot mount (before
                # it is fetched: those its record names).
                "adds": [
                    d
                    for d in (kernel_drivers(k) if k else known.adds if known else ())
                    if not availability(DRIVERS[d]).available
                ],
                "features": kernel_features(k) if k else list(known.features if known else ()),
                "packages": k.packages if k else {},
                "description": known.description if known else "",
                "path": str(root / name),
            }
        )
    return rows
