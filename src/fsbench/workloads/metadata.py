"""Metadata workloads: create, stat, chmod, rename, readdir and unlink of many files.

Users feel metadata speed in a chmod of every file of a directory, in `ls -l`,
`chmod -R`, unpacking and deleting trees. Each operation is one variant per layout:
`metadata/stat-flat` (N files in one directory) and `metadata/stat-tree` (the same N files in
a tree of D directories). N is 10 000 × --scale (at least 100); D is about √N.

The timed loop is native (fsbench._metaops): names are built and directories opened before
the clock starts, the loop itself makes only the system calls (the *at() forms, relative to
an open directory, as coreutils' tree walkers do) and one clock read per op, with the GIL
released. Python only sets up and checks. So the rate measured is the file system's, not the
interpreter's (bench/metadata_vs_c.py compares it with a plain C loop).

Set-up is untimed and incremental: the variants of one layout share one set of files, and each
prepare moves that set into the state its operation needs (present, absent), so the usual order
create → stat → chmod → rename → readdir → unlink costs almost no set-up at all.
"""

from __future__ import annotations

import errno
import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.workloads.base import OPS, Declared, Measurement, Target, Timed

DEFAULT_FILES = 10_000
MIN_FILES = 100
# Tree directories are opened all at once before the clock starts: keep them few enough for
# any file-descriptor limit, and the files per directory many enough to matter.
MAX_TREE_DIRS = 256
# chmod alternates between these, so every sample really changes every file's mode.
CHMOD_MODES = (0o644, 0o600)
CREATE_MODE = 0o644

OPERATIONS = ("create", "stat", "chmod", "rename", "readdir", "unlink")
LAYOUTS = ("flat", "tree")

# errno values meaning "this file system cannot do that", not "it broke".
_UNSUPPORTED_ERRNOS = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}


def _native() -> Any:
    # Imported on first use so that a missing build fails only metadata workloads, with a hint.
    try:
        from fsbench import _metaops
    except ImportError as e:
        raise WorkloadFailed(
            f"the native module fsbench._metaops is not built ({e}); run `uv sync`"
        ) from e
    return _metaops


def file_count(target: Target) -> int:
    return max(MIN_FILES, round(DEFAULT_FILES * target.scale))


def tree_dirs(files: int) -> int:
    return max(1, min(MAX_TREE_DIRS, math.isqrt(files)))


@dataclass(frozen=True)
class LoopResult:
    """One native loop: C-timed seconds, ops that succeeded, failures and latency percentiles."""

    op: str
    seconds: float
    ops: int
    failed: int
    errno: int  # of the first failure; 0 if none
    skipped: int  # failures with the errno the caller said to ignore
    lat_us: dict[str, float]
    lat_max_us: float


def timed_loop(
    op: str,
    root: str,
    n: int,
    dirs: int = 0,
    mode: int = CREATE_MODE,
    fill: int = 0,
    ignore_errno: int = 0,
) -> LoopResult:
    """Run one native loop (see fsbench._metaops.run) over n files under root."""
    r = _native().run(op, root, n, dirs, mode, fill, ignore_errno)
    return LoopResult(
        op=r["op"],
        seconds=r["ns"] / 1e9,
        ops=r["ops"],
        failed=r["failed"],
        errno=r["errno"],
        skipped=r["skipped"],
        lat_us={"p50": r["p50_ns"] / 1e3, "p99": r["p99_ns"] / 1e3, "p99.9": r["p999_ns"] / 1e3},
        lat_max_us=r["max_ns"] / 1e3,
    )


def file_paths(root: str, n: int, dirs: int = 0, renamed: bool = False) -> list[str]:
    """The paths the native loops use for n files under root in this layout."""
    return [os.path.join(root, p) for p in _native().names(n, dirs, renamed)]


def _errno_text(err: int) -> str:
    return f"{os.strerror(err)} ({errno.errorcode.get(err, err)})"


def check_loop(res: LoopResult, what: str, n: int) -> None:
    """Raise for a loop with failures: Unsupported when the file system cannot do the operation,
    WorkloadFailed (one line) otherwise."""
    if not res.failed:
        return
    why = f"{what}: {_errno_text(res.errno)} on {res.failed} of {n} files"
    # EPERM from chmod as root means the file system refuses modes (vfat, exFAT); from any other
    # operation it is a real failure.
    if res.errno in _UNSUPPORTED_ERRNOS or (res.op == "chmod" and res.errno == errno.EPERM):
        raise Unsupported(why)
    raise WorkloadFailed(why)


def _inventory(root: str, dirs: int) -> tuple[int, int]:
    """(files under their own names, files renamed to NAME.r) in the set's directories."""
    base = renamed = 0
    for d in _native().dir_names(dirs) if dirs else ["."]:
        with os.scandir(os.path.join(root, d)) as it:
            for e in it:
                if e.name.endswith(".r"):
                    renamed += 1
                else:
                    base += 1
    return base, renamed


@dataclass(frozen=True)
class MetadataOp(Declared):
    """One metadata operation over N files in one layout: one result per subject."""

    metric, unit, higher_is_better = OPS

    # How a sample's iterations merge its extras (base.MERGE_RULES).
    merge_extra: ClassVar[dict[str, Any]] = {
        "files": "sum", "failed": "sum", "lat_us": "median", "lat_max_us": "max",
    }  # fmt: skip

    operation: str  # create | stat | chmod | rename | readdir | unlink
    layout: str  # flat | tree
    description: str
    cache: str = "warm"  # warm: dentries and inodes cached by the set-up; cold: dropped first
    name: str = "metadata"
    # Few, small files: no share of the file budget needed (see runner.space_share).
    space_group: str | None = None

    @property
    def variant(self) -> str:
        base = f"{self.operation}-{self.layout}"
        return f"{base}-cold" if self.cache == "cold" else base

    def files(self, target: Target) -> int:
        return file_count(target)

    def dirs(self, target: Target) -> int:
        """Directories of the tree layout; 0 for flat (the files sit in the set's root)."""
        return tree_dirs(self.files(target)) if self.layout == "tree" else 0

    def set_dir(self, target: Target) -> str:
        # Shared by the variants of one layout and file count, so set-up carries over.
        return os.path.join(target.workdir, f"metadata-{self.layout}-{self.files(target)}")

    def params(self, target: Target) -> dict[str, Any]:
        p: dict[str, Any] = {
            "engine": "native",
            "variant": self.variant,
            "operation": self.operation,
            "layout": self.layout,
            "files": self.files(target),
            "dirs": self.dirs(target),
            "cache": self.cache,
        }
        if self.operation == "chmod":
            p["modes"] = "0644<->0600"
        return p

    # -- set-up (untimed) ------------------------------------------------------------------
    @property
    def needs(self) -> tuple[str, ...]:
        return ("posix_permissions",) if self.operation == "chmod" else ()

    def _helper(self, op: str, root: str, n: int, dirs: int, ignore: int) -> None:
        try:
            check_loop(timed_loop(op, root, n, dirs, CREATE_MODE, 0, ignore), op, n)
        except OSError as e:
            raise WorkloadFailed(f"preparing {self.id}: {e.strerror} ({e.filename})") from None
        except (Unsupported, WorkloadFailed) as e:
            # Set-up is plain file creation and removal: a refusal there is a failure.
            raise WorkloadFailed(f"preparing {self.id}: {e}") from None

    def prepare(self, target: Target) -> None:
        """Bring the set into the state the operation needs: absent for create, present for the
        rest (readdir also takes it fully renamed), from one listing of the set's directories."""
        root, n, dirs = self.set_dir(target), self.files(target), self.dirs(target)
        try:
            os.makedirs(root, exist_ok=True)
            for d in _native().dir_names(dirs):
                os.makedirs(os.path.join(root, d), exist_ok=True)
            base, renamed = _inventory(root, dirs)
        except OSError as e:
            raise WorkloadFailed(f"preparing {self.id}: {e.strerror} ({e.filename})") from None
        if self.operation == "readdir" and {base, renamed} == {n, 0}:
            return  # all there, under either name: a listing does not care which
        if renamed:
            self._helper("unrename", root, n, dirs, errno.ENOENT)
        if self.operation == "create":
            if base or renamed:
                self._helper("unlink", root, n, dirs, errno.ENOENT)
        elif base + renamed < n:
            self._helper("create", root, n, dirs, errno.EEXIST)

    # -- the measured run ------------------------------------------------------------------
    def _chmod_mode(self, root: str, dirs: int) -> int:
        """The mode that differs from what the files have now (all alike after set-up)."""
        first = file_paths(root, 1, min(dirs, 1))[0]  # file 0 lives in the first directory
        current = os.stat(first).st_mode & 0o7777
        return CHMOD_MODES[1] if current == CHMOD_MODES[0] else CHMOD_MODES[0]

    def _verify_chmod(self, root: str, n: int, dirs: int, mode: int) -> None:
        """Some drivers (exfat-fuse, ntfs-3g without -o permissions) return success from chmod and
        change nothing: a rate of no-ops is not a chmod rate, so say so."""
        paths = file_paths(root, n, dirs)
        picks = sorted({0, n // 2, n - 1})
        modes = [os.stat(paths[i]).st_mode & 0o7777 for i in picks]
        if all(m == mode for m in modes):
            return
        if all(m != mode for m in modes):
            raise Unsupported(
                f"chmod: the file system accepts chmod but ignores it (asked {mode:04o}, "
                f"the mode stayed {modes[0]:04o}): no POSIX permissions"
            )
        raise WorkloadFailed(
            f"chmod: only some files took mode {mode:04o} ({[f'{m:04o}' for m in modes]})"
        )

    def run(self, target: Target) -> Measurement:
        root, n, dirs = self.set_dir(target), self.files(target), self.dirs(target)
        op = self.operation
        try:
            mode = self._chmod_mode(root, dirs) if op == "chmod" else CREATE_MODE
        except OSError as e:
            raise WorkloadFailed(f"chmod: cannot stat the first file: {e.strerror}") from None
        try:
            with Timed() as timed:
                res = timed_loop(op, root, n, dirs, mode)
        except OSError as e:
            raise WorkloadFailed(f"{op}: {e.strerror} ({e.filename})") from None
        check_loop(res, op, n)
        if res.ops == 0:
            raise WorkloadFailed(f"{op}: no operation was done (an empty set?)")
        flags = []
        if op == "chmod":
            try:
                self._verify_chmod(root, n, dirs, mode)
            except OSError as e:
                raise WorkloadFailed(f"chmod: cannot stat files afterwards: {e.strerror}") from None
        elif op == "readdir" and res.ops != n:
            flags.append(f"readdir-count: {res.ops} entries listed for {n} files")
        return Measurement.rate(
            res.ops,
            res.seconds,
            f"{op} of {res.ops} files",
            timed.used,
            bytes=0,  # no data moves: the runner's byte-based cache checks do not apply
            ops=res.ops,
            extra={
                "lat_us": res.lat_us,
                "lat_max_us": res.lat_max_us,
                "failed": res.failed,
                "files": n,
                "dirs": dirs,
                **({"mode": f"{mode:04o}"} if op == "chmod" else {}),
            },
            flags=flags,
        )


_WHAT = {
    "create": "create N new empty files (open O_CREAT|O_EXCL, close; no fsync)",
    "stat": "stat() each of N existing files",
    "chmod": "chmod each of N files, alternating 0644/0600 so every mode really changes "
    "(seed 004: chmod of every file in a directory)",
    "rename": "rename each of N files within its directory (NAME -> NAME.r)",
    "readdir": "list the directories holding N files (opendir/readdir; ops = entries)",
    "unlink": "unlink each of N files",
}
_WHERE = {
    "flat": "all in one directory",
    "tree": "in a tree of about √N directories",
}
_WARM = "warm: names and inodes cached by the untimed set-up"
_COLD = (
    "cold: sync, drop caches and (FUSE) remount first, so inodes come from the device "
    "(no data is read, so the byte-based cold check cannot verify it)"
)


def _job(operation: str, layout: str, cache: str = "warm") -> MetadataOp:
    scale = "N = 10 000 × --scale"
    text = (
        f"{_WHAT[operation]}, {_WHERE[layout]}; {scale}; timed in C; "
        f"{_COLD if cache == 'cold' else _WARM}"
    )
    return MetadataOp(operation, layout, text, cache=cache)


METADATA_JOBS: list[MetadataOp] = [
    job
    for layout in LAYOUTS
    for job in [
        _job("create", layout),
        _job("stat", layout),
        _job("stat", layout, "cold"),
        _job("chmod", layout),
        _job("rename", layout),
        _job("readdir", layout),
        _job("unlink", layout),
    ]
]
