"""Tree hashing and `xxhsum -H2` manifests: walk a tree, hash it natively, write and verify.

A manifest is exactly what `xxhsum -H2` prints: one `<32 hex digits>  <name>` line per file,
the digest being XXH128's canonical (big-endian) hex. `xxhsum -c` opens each name as written,
relative to its own working directory, so names are absolute unless the caller asks for
names relative to a root (then check with `cd ROOT && xxhsum -c FILE`). A name holding a
newline cannot stand on one line: it is written in the GNU escaped form (`\\` first on the
line, `\\n` and `\\\\` in the name), which xxhsum >= 0.8.2 and `fsbench verify` read.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fsbench.errors import UsageError

# Files that vanished between the manifest and the check; any other errno means unreadable.
_GONE = (errno.ENOENT, errno.ENOTDIR)
_LINE = re.compile(rb"^(\\?)([0-9a-fA-F]{32})  (.*)$", re.DOTALL)
_BSD_LINE = re.compile(rb"^(\\?)XXH128 \((.*)\) = ([0-9a-fA-F]{32})$", re.DOTALL)
_OTHER_ALGO = re.compile(rb"^\\?(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{16})  |^\\?XXH(?:32|64|3) \(")


@dataclass(frozen=True)
class FileHash:
    """One file's XXH128: digest None when it could not be read (errno says why)."""

    path: str
    digest: str | None
    size: int
    errno: int = 0

    @property
    def error(self) -> str:
        return os.strerror(self.errno) if self.errno else ""


def walk_tree(root: str) -> tuple[list[str], list[tuple[str, int]]]:
    """Regular files under root (not following symlinks), in sorted order, and the
    directories that could not be listed (path, errno). Sorted so runs and manifests agree."""
    files: list[str] = []
    errors: list[tuple[str, int]] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            errors.append((d, e.errno or errno.EIO))
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    files.append(e.path)
            except OSError as err:
                errors.append((e.path, err.errno or errno.EIO))
        # Depth first, in name order: a directory's files come before its subdirectories'.
        stack.extend(reversed(subdirs))
    return files, errors


def default_threads() -> int:
    """One hashing thread per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def hash_paths(paths: Sequence[str], threads: int | None = None) -> list[FileHash]:
    """XXH128 of every path on native threads (the GIL released), in the order given."""
    from fsbench._xxhtree import hash_files

    out = hash_files(list(paths), threads or default_threads())
    return [FileHash(p, d, size, err) for p, (d, size, err) in zip(paths, out, strict=True)]


def unreadable(names: Sequence[str], results: Sequence[tuple[str | None, int, int]]) -> str | None:
    """'reading NAME: why' for the first file the native hash could not read (its results:
    digest, size, errno per name), None when every one was read."""
    for name, (_digest, _size, err) in zip(names, results, strict=True):
        if err:
            return f"reading {name}: {os.strerror(err)}"
    return None


def _name_bytes(path: str | bytes, root: str | None) -> bytes:
    if root is not None:
        path = os.path.relpath(os.fsdecode(path), os.fsdecode(root))
    return os.fsencode(path)


def format_line(digest: str, name: bytes) -> bytes:
    """One manifest line as `xxhsum -H2` prints it (escaped only when a newline forces it)."""
    if b"\n" in name or b"\r" in name:
        esc = name.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\r", b"\\r")
        return b"\\" + digest.encode() + b"  " + esc + b"\n"
    return digest.encode() + b"  " + name + b"\n"


def write_manifest(
    entries: Iterable[tuple[str | bytes, str | None]], path: str, root: str | None = None
) -> int:
    """Write (file, digest) pairs as an `xxhsum -H2` manifest; returns the lines written.

    root None: names as given (absolute paths make `xxhsum -c FILE` work from anywhere);
    root DIR: names relative to DIR. Files without a digest (unreadable) are left out, as
    xxhsum leaves them out of its output. Written to a temporary file, then renamed.
    """
    lines = [format_line(d, _name_bytes(p, root)) for p, d in entries if d is not None]
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.writelines(lines)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"manifest {path}: {e.strerror or e}") from None
    return len(lines)


def _unescape(name: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(name):
        c = name[i : i + 1]
        if c == b"\\" and i + 1 < len(name):
            nxt = name[i + 1 : i + 2]
            out += {b"n": b"\n", b"r": b"\r", b"\\": b"\\"}.get(nxt, b"\\" + nxt)
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)


def read_manifest(path: str) -> list[tuple[bytes, str]]:
    """(name, digest) pairs of an `xxhsum -H2` manifest (also its --tag form); a missing,
    unreadable or malformed manifest is a UsageError naming the file and line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"manifest {path}: {e.strerror or e}") from None
    entries: list[tuple[bytes, str]] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = raw.removesuffix(b"\r")
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m:
            esc, digest, name = m.group(1), m.group(2), m.group(3)
        else:
            b = _BSD_LINE.match(line)
            if not b:
                if _OTHER_ALGO.match(line):
                    raise UsageError(
                        f"manifest {path}:{lineno}: not XXH128; write it with `xxhsum -H2`"
                    )
                raise UsageError(f"manifest {path}:{lineno}: not an `xxhsum -H2` line")
            esc, name, digest = b.group(1), b.group(2), b.group(3)
        entries.append((_unescape(name) if esc else name, digest.decode().lower()))
    if not entries:
        raise UsageError(f"manifest {path}: no XXH128 lines in it")
    return entries


class Mismatch(NamedTuple):
    """A file whose content differs (actual digest) or that cannot be read (errno)."""

    name: str
    expected: str
    actual: str | None
    errno: int = 0


class Verification(NamedTuple):
    """Unpacks as (ok, changed, missing): names that match, files that differ or cannot be
    read, names that vanished."""

    ok: list[str]
    changed: list[Mismatch]
    missing: list[str]

    @property
    def clean(self) -> bool:
        return not self.changed and not self.missing


def display_name(name: bytes) -> str:
    """A manifest name for printing: undecodable bytes shown as escapes, never an error."""
    return name.decode("utf-8", errors="backslashreplace")


def verify_manifest(path: str, root: str | None = None, threads: int | None = None) -> Verification:
    """Re-hash every file a manifest names. Relative names are opened under root (default:
    the working directory, as `xxhsum -c` does)."""
    entries = read_manifest(path)
    base = os.fsencode(root) if root is not None else None
    full = [os.path.join(base, n) if base is not None else n for n, _ in entries]
    from fsbench._xxhtree import hash_files

    results = hash_files(full, threads or default_threads())
    ok: list[str] = []
    changed: list[Mismatch] = []
    missing: list[str] = []
    for (name, expected), (digest, _size, err) in zip(entries, results, strict=True):
        shown = display_name(name)
        if err in _GONE:
            missing.append(shown)
        elif err:
            changed.append(Mismatch(shown, expected, None, err))
        elif digest != expected:
            changed.append(Mismatch(shown, expected, digest))
        else:
            ok.append(shown)
    return Verification(ok, changed, missing)
