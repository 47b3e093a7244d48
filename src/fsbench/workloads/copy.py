"""Copy workloads: one large file, then many 1 MiB files, copied onto the target and off it.

`copy-large` copies one large file and `copy-small` a tree of 1 MiB files, each in two
variants: `in` (tmpfs → target, every destination file fsynced before the clock stops, so the
data reached the device) and `out` (target → tmpfs, cold). The source side is a kernel tmpfs in
a scratch directory private to this process, /dev/shm/fsbench-src-<pid>, made once and shared
by every subject, so the only file system that differs between subjects is the target.

One copy method for every subject: copy_file_range, falling back to sendfile and then to
read/write with a 1 MiB buffer when the kernel refuses (EXDEV, EOPNOTSUPP, ENOSYS, EINVAL).
Since Linux 5.19 copy_file_range refuses copies between different file systems, so in the lab
the tmpfs ↔ target copies use sendfile. The method the first subject ended up with is pinned
and used for every later subject; a subject that cannot use it falls further and is flagged.
"""

from __future__ import annotations

import errno
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fsbench.errors import WorkloadFailed
from fsbench.workloads.base import Declared, Measurement, Target, Usage, fill_file, free_bytes
from fsbench.workloads.scratch import SOURCE_ROOT, SourceArea, remove_path, source_area

MiB = 1024 * 1024
COPY_BUFFER = MiB  # the read/write fallback's buffer
CHUNK = 1 << 30  # bytes asked of one copy_file_range/sendfile call (the kernel caps ~2 GiB)
LARGE_SHARE = 0.40  # of target.size, for the one large file
SMALL_SHARE = 0.25  # of target.size, for the tree of small files
SMALL_FILE = MiB
MIN_SMALL_FILES = 20
FILES_PER_DIR = 100  # a tree, as a real batch of files is, not one huge directory
METHODS = ("copy_file_range", "sendfile", "read/write")
# The kernel's "not this way" answers; anything else (ENOSPC, EIO) is a real failure.
FALLBACK_ERRNOS = frozenset({errno.EXDEV, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
METHOD_PARAMS = {
    "copy_method": "copy_file_range",
    "copy_fallback": "sendfile, then read/write with a 1 MiB buffer, on EXDEV, EOPNOTSUPP, "
    "ENOSYS or EINVAL; the method of the first subject is kept for every subject",
}


def need_tmpfs_room(directory: str, nbytes: int) -> None:
    free = free_bytes(directory)
    if free < nbytes + 16 * MiB:
        raise WorkloadFailed(
            f"{directory} has {free // MiB} MiB free; the copy source needs {nbytes // MiB} MiB"
        )


# -- copying ---------------------------------------------------------------------------------
@dataclass
class CopyState:
    """The method in use and why it changed; shared by every file of one copy."""

    method: str
    note: str | None = None
    files: int = 0
    bytes: int = 0
    _buf: bytearray | None = field(default=None, repr=False)

    def fall_back(self, err: OSError) -> None:
        nxt = METHODS[METHODS.index(self.method) + 1]
        code = errno.errorcode.get(err.errno or 0, str(err.errno))
        self.note = f"{self.method} refused ({code}), used {nxt}"
        self.method = nxt

    @property
    def buffer(self) -> bytearray:
        if self._buf is None:
            self._buf = bytearray(COPY_BUFFER)
        return self._buf


def copy_fd(fi: int, fo: int, st: CopyState) -> int:
    """Copy fi (from offset 0) to a new, empty fo until end of file; returns the bytes."""
    done = 0
    while True:
        try:
            if st.method == "copy_file_range":
                n = os.copy_file_range(fi, fo, CHUNK, done, done)
            elif st.method == "sendfile":
                n = os.sendfile(fo, fi, done, CHUNK)
            else:
                n = os.preadv(fi, [st.buffer], done)
                view = memoryview(st.buffer)[:n]
                w = 0
                while w < n:
                    w += os.pwrite(fo, view[w:], done + w)
        except OSError as e:
            if e.errno in FALLBACK_ERRNOS and st.method != METHODS[-1]:
                st.fall_back(e)
                if st.method == "sendfile":
                    os.lseek(fo, done, os.SEEK_SET)  # sendfile writes at fo's position
                continue
            raise
        if n == 0:
            return done
        done += n


def copy_file(src: str, dst: str, st: CopyState, fsync: bool) -> int:
    fi = os.open(src, os.O_RDONLY)
    try:
        fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            n = copy_fd(fi, fo, st)
            if fsync:
                os.fsync(fo)
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    st.files += 1
    st.bytes += n
    return n


def copy_tree(src: str, dst: str, st: CopyState, fsync: bool) -> None:
    """What `cp -r src dst` does (no attributes kept), plus an fsync per file when asked.

    The source directory is read as it goes, as a copy tool must: for `out` that readdir is
    the target's.
    """
    os.mkdir(dst)
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            copy_tree(e.path, os.path.join(dst, e.name), st, fsync)
        else:
            copy_file(e.path, os.path.join(dst, e.name), st, fsync)


def _failed(what: str, e: OSError) -> WorkloadFailed:
    where = f" ({e.filename})" if e.filename else ""
    return WorkloadFailed(f"{what}: {e.strerror or e}{where}")


# -- the workloads ---------------------------------------------------------------------------
@dataclass(eq=False)
class _Copy(Declared):
    """What copy-large and copy-small share: variant, tmpfs area, the pinned method."""

    merge_extra: ClassVar[dict[str, Any]] = {"files_per_s": "rate:ops"}
    descriptions: ClassVar[dict[str, str]]  # by variant

    variant: str = field()  # in | out
    source_root: str = SOURCE_ROOT
    name: str = ""
    # The method of the first measured sample: every later subject starts there.
    pinned_method: str | None = field(default=None, repr=False)
    # tmpfs copies made by `out` samples, removed by the next prepare (not inside the probes).
    _garbage: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.variant not in ("in", "out"):
            raise ValueError(f"variant must be 'in' or 'out', not {self.variant!r}")

    @property
    def description(self) -> str:
        return self.descriptions[self.variant]

    @property
    def cache(self) -> str:
        return "cold" if self.variant == "out" else "none"

    @property
    def is_write(self) -> bool:
        return self.variant == "in"

    @property
    def area(self) -> SourceArea:
        return source_area(self.source_root)

    def _common_params(self) -> dict[str, Any]:
        return {
            "engine": "python",
            "variant": self.variant,
            "direction": "tmpfs → target" if self.variant == "in" else "target → tmpfs",
            "source": f"tmpfs ({self.source_root})" if self.variant == "in" else "the target, cold",
            **METHOD_PARAMS,
            "fsync": "every destination file, inside the timed region"
            if self.variant == "in"
            else "none (the destination is tmpfs)",
            "cache": self.cache,
            "rw": "write" if self.variant == "in" else "read",
        }

    def _collect_garbage(self) -> None:
        while self._garbage:
            remove_path(self._garbage.pop())

    def _state(self) -> CopyState:
        return CopyState(self.pinned_method or METHODS[0])

    def _method_outcome(self, st: CopyState) -> tuple[dict[str, Any], list[str]]:
        extra = {"copy_method": st.method, "copy_method_note": st.note}
        flags = []
        if self.pinned_method is None:
            self.pinned_method = st.method
        elif st.method != self.pinned_method:
            flags.append(
                f"copy-method-differs: {st.method} instead of {self.pinned_method} "
                f"used for the other subjects ({st.note})"
            )
        return extra, flags

    def prepare(self, target: Target) -> None:
        try:
            self._prepare(target)
        except OSError as e:  # the tmpfs side (the target's errors are caught closer)
            raise _failed(f"preparing {self.id}", e) from None

    def run(self, target: Target) -> Measurement:
        try:
            return self._run(target)
        except OSError as e:
            raise _failed(self.id, e) from None

    # What a kind of copy defines: how much (bytes or files), where, how, and what to expect.
    def amount(self, target: Target) -> int:
        raise NotImplementedError

    def _source(self, amount: int) -> str:
        raise NotImplementedError

    def _dest(self, target: Target) -> str:
        raise NotImplementedError

    def _out_path(self) -> str:
        raise NotImplementedError

    def _complete(self, dest: str, amount: int) -> bool:
        raise NotImplementedError

    def _copy(self, src: str, dst: str, st: CopyState, fsync: bool) -> None:
        raise NotImplementedError

    def _expect(self, amount: int) -> tuple[int, int]:
        """(files, bytes) a full copy moves."""
        raise NotImplementedError

    def _extra(self, st: CopyState, seconds: float) -> dict[str, Any]:
        return {}

    def _prepare(self, target: Target) -> None:
        self._collect_garbage()
        amount = self.amount(target)
        src = self._source(amount)
        dest = self._dest(target)
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if self.variant == "in":
                remove_path(dest)  # a new copy each time, as a copy makes one
                return
            if not self._complete(dest, amount):
                remove_path(dest)
                self._copy(src, dest, self._state(), fsync=True)
        except OSError as e:
            remove_path(dest)
            raise _failed(f"preparing {self.id}", e) from None
        remove_path(self._out_path())

    def _run(self, target: Target) -> Measurement:
        amount = self.amount(target)
        if self.variant == "in":
            src, dst = self._source(amount), self._dest(target)
        else:
            src, dst = self._dest(target), self._out_path()
        st = self._state()
        # This thread does the copying; a progress display's thread must not count.
        before = Usage.now(resource.RUSAGE_THREAD)
        t0 = time.perf_counter()
        try:
            self._copy(src, dst, st, fsync=self.variant == "in")
        except OSError as e:
            remove_path(dst)  # half a copy would only take the space of later workloads
            raise _failed(f"copying {self.id}", e) from None
        seconds = time.perf_counter() - t0
        used = Usage.now(resource.RUSAGE_THREAD) - before
        if self.variant == "out":
            self._garbage.append(dst)
        files, nbytes = self._expect(amount)
        if st.files != files or st.bytes != nbytes:
            raise WorkloadFailed(
                f"copied {st.files} files, {st.bytes} bytes; expected {files}, {nbytes}"
            )
        extra, flags = self._method_outcome(st)
        extra.update(self._extra(st, seconds))
        return Measurement.rate(
            st.bytes / MiB,
            seconds,
            "the copy",
            used,
            bytes=st.bytes,
            ops=st.files,
            extra=extra,
            flags=flags,
        )

    def close(self) -> None:
        """Remove this workload's tmpfs files (the target's are the lab's to delete)."""
        self._collect_garbage()
        for sub in self._area_entries():
            self.area.release(sub)
        self.pinned_method = None

    def _area_entries(self) -> list[str]:
        prefix = f"{self.name}-"
        try:
            return [n for n in os.listdir(self.area.path) if n.startswith(prefix)]
        except OSError:
            return []


@dataclass(eq=False)
class CopyLarge(_Copy):
    name: str = "copy-large"
    share: float = LARGE_SHARE
    file_bytes: int | None = None  # fixed size (tests); None: a share of the target

    descriptions: ClassVar[dict[str, str]] = {
        "in": "one large file copied from tmpfs into the target, fsync included "
        "(seed 002: a 5 GB movie onto an NTFS disk)",
        "out": "one large file copied from the target back out to tmpfs, cold",
    }

    def size(self, target: Target) -> int:
        if self.file_bytes is not None:
            return self.file_bytes
        want = int(target.size * self.share * target.scale)
        return max(MiB, min(want, target.size) // MiB * MiB)

    def params(self, target: Target) -> dict[str, Any]:
        return {**self._common_params(), "file_size": self.size(target), "files": 1}

    def _dest(self, target: Target) -> str:
        return os.path.join(target.workdir, self.name, "large.bin")

    def _source(self, size: int) -> str:
        path = self.area.ensure(f"{self.name}-{size}.bin")
        if not (os.path.exists(path) and os.path.getsize(path) == size):
            need_tmpfs_room(self.area.path, size)
            tmp = path + ".part"
            try:
                fill_file(tmp, size)
            except OSError as e:
                remove_path(tmp)
                raise _failed("making the tmpfs source", e) from None
            os.replace(tmp, path)
        return path

    def _out_path(self) -> str:
        return self.area.ensure(f"{self.name}-out.bin")

    def amount(self, target: Target) -> int:
        return self.size(target)

    def _complete(self, dest: str, size: int) -> bool:
        return os.path.exists(dest) and os.path.getsize(dest) == size

    def _copy(self, src: str, dst: str, st: CopyState, fsync: bool) -> None:
        copy_file(src, dst, st, fsync)

    def _expect(self, size: int) -> tuple[int, int]:
        return 1, size


@dataclass(eq=False)
class CopySmall(_Copy):
    name: str = "copy-small"
    share: float = SMALL_SHARE
    file_bytes: int = SMALL_FILE
    files: int | None = None  # fixed count (tests); None: a share of the target

    descriptions: ClassVar[dict[str, str]] = {
        "in": "a tree of 1 MiB files copied from tmpfs into the target, each file fsynced "
        "(seed 002: 5000 × 1 MB files)",
        "out": "a tree of 1 MiB files copied from the target back out to tmpfs, cold",
    }

    def count(self, target: Target) -> int:
        if self.files is not None:
            return self.files
        want = round(target.size * self.share * target.scale / self.file_bytes)
        return max(MIN_SMALL_FILES, want)

    def params(self, target: Target) -> dict[str, Any]:
        n = self.count(target)
        return {
            **self._common_params(),
            "file_size": self.file_bytes,
            "files": n,
            "files_per_dir": FILES_PER_DIR,
            "total_bytes": n * self.file_bytes,
        }

    def _dest(self, target: Target) -> str:
        return os.path.join(target.workdir, self.name, "tree")

    def _out_path(self) -> str:
        return self.area.ensure(f"{self.name}-out")

    def _layout(self, n: int) -> list[str]:
        return [os.path.join(f"d{i // FILES_PER_DIR:03d}", f"f{i:06d}.bin") for i in range(n)]

    def _source(self, n: int) -> str:
        path = self.area.ensure(f"{self.name}-{n}x{self.file_bytes}")
        if os.path.isdir(path):
            return path  # renamed into place only when complete
        need_tmpfs_room(self.area.path, n * self.file_bytes)
        tmp = path + ".part"
        remove_path(tmp)
        try:
            for rel in self._layout(n):
                os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
                fill_file(os.path.join(tmp, rel), self.file_bytes)
        except OSError as e:
            remove_path(tmp)
            raise _failed("making the tmpfs source tree", e) from None
        os.rename(tmp, path)
        return path

    def _complete(self, root: str, n: int) -> bool:
        """Every file of the tree there at full size (untimed; stats only)."""
        for rel in self._layout(n):
            try:
                if os.stat(os.path.join(root, rel)).st_size != self.file_bytes:
                    return False
            except OSError:
                return False
        return True

    def amount(self, target: Target) -> int:
        return self.count(target)

    def _copy(self, src: str, dst: str, st: CopyState, fsync: bool) -> None:
        copy_tree(src, dst, st, fsync)

    def _expect(self, n: int) -> tuple[int, int]:
        return n, n * self.file_bytes

    def _extra(self, st: CopyState, seconds: float) -> dict[str, Any]:
        return {"files_per_s": st.files / seconds if seconds > 0 else 0.0}


COPY_JOBS: list[_Copy] = [
    CopyLarge("in"),
    CopyLarge("out"),
    CopySmall("in"),
    CopySmall("out"),
]
