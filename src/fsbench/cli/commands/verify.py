"""`fsbench hash DIR` writes an `xxhsum -H2` manifest of a tree; `fsbench verify FILE` re-hashes
what a manifest names and names every file that changed or vanished (a bit-rot check).

Exit codes: 0 every file matches (or was hashed), 1 some file changed, vanished or could not be
read, 2 a missing or malformed manifest or a bad argument (one line, from UsageError).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from fsbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from fsbench.treehash.manifest import (
    default_threads,
    display_name,
    format_line,
    hash_paths,
    verify_manifest,
    walk_tree,
    write_manifest,
)

MiB = 1024 * 1024


def _threads(n: int | None) -> int:
    if n is not None and not 1 <= n <= 256:
        raise UsageError(f"--threads {n}: must be between 1 and 256")
    return n or default_threads()


@click.command("verify")
@click.argument("manifest", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Open relative names under this directory (default: the working directory, "
    "as `xxhsum -c` does).",
)
@click.option("--threads", type=int, default=None, help="Hashing threads (default: one per CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def verify(manifest: Path, root: Path | None, threads: int | None, as_json: bool) -> None:
    """Re-hash the files an `xxhsum -H2` MANIFEST names; exit 1 if any changed or vanished."""
    if root is not None and not root.is_dir():
        raise UsageError(f"--root {root}: not a directory")
    n = _threads(threads)
    t0 = time.perf_counter()
    ok, changed, missing = verify_manifest(str(manifest), str(root) if root else None, n)
    seconds = time.perf_counter() - t0
    total = len(ok) + len(changed) + len(missing)
    if as_json:
        doc = {
            "manifest": str(manifest),
            "files": total,
            "ok": len(ok),
            "changed": [
                {"path": m.name, "expected": m.expected, "actual": m.actual}
                for m in changed
                if not m.errno
            ],
            "unreadable": [
                {"path": m.name, "errno": m.errno, "error": os.strerror(m.errno)}
                for m in changed
                if m.errno
            ],
            "missing": missing,
            "seconds": round(seconds, 3),
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        for m in changed:
            if m.errno:
                click.echo(f"UNREADABLE  {m.name}: {os.strerror(m.errno)}")
            else:
                click.echo(f"CHANGED     {m.name}")
        for name in missing:
            click.echo(f"MISSING     {name}")
        click.echo(
            f"{total} files: {len(ok)} ok, {len(changed)} changed or unreadable, "
            f"{len(missing)} missing ({seconds:.2f} s)",
            err=bool(changed or missing),
        )
    sys.exit(EXIT_FAILED if changed or missing else EXIT_OK)


@click.command("hash")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--manifest",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write an `xxhsum -H2` manifest here (default: print its lines to stdout).",
)
@click.option(
    "--relative",
    is_flag=True,
    help="Names relative to DIRECTORY (check with `cd DIRECTORY && xxhsum -c FILE`); "
    "default: absolute names, checkable from anywhere.",
)
@click.option("--threads", type=int, default=None, help="Hashing threads (default: one per CPU).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a summary as JSON, alone on standard output (with --manifest FILE the lines go "
    "there; without, the JSON's `lines` holds them).",
)
def hash_tree(
    directory: str, manifest: Path | None, relative: bool, threads: int | None, as_json: bool
) -> None:
    """XXH128 of every regular file under DIRECTORY, as `xxhsum -H2` would print it."""
    if not directory:
        # Path("") is ".": an empty argument (an unset shell variable) would hash the cwd.
        raise UsageError("DIRECTORY is empty: name the directory to hash")
    return _hash_tree(Path(directory), manifest, relative, threads, as_json)


def _hash_tree(
    directory: Path, manifest: Path | None, relative: bool, threads: int | None, as_json: bool
) -> None:
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    if manifest is not None and manifest.parent and not manifest.parent.is_dir():
        raise UsageError(f"--manifest {manifest}: no directory {manifest.parent}")
    n = _threads(threads)
    root = str(directory.resolve())
    ru0 = os.times()
    t0 = time.perf_counter()
    paths, walk_errors = walk_tree(root)
    if manifest is not None:
        # A manifest written inside the tree would otherwise list its own previous version.
        mine = os.path.abspath(manifest)
        paths = [p for p in paths if p != mine]
    hashes = hash_paths(paths, n)
    seconds = time.perf_counter() - t0
    ru1 = os.times()
    pairs = [(h.path, h.digest) for h in hashes]
    lines: list[str] = []
    if manifest is not None:
        written = write_manifest(pairs, str(manifest), root if relative else None)
    elif as_json:
        # stdout carries the JSON alone (`| jq`): the manifest's lines go inside it.
        for p, d in pairs:
            if d is not None:
                name = os.path.relpath(p, root) if relative else p
                lines.append(os.fsdecode(format_line(d, os.fsencode(name))).rstrip("\n"))
        written = len(lines)
    else:
        # Bytes as they are (names need not be UTF-8); a text stream (a test's capture) without
        # a buffer gets them decoded.
        out = getattr(sys.stdout, "buffer", None) or _TextBytes(sys.stdout)
        for p, d in pairs:
            if d is not None:
                name = os.path.relpath(p, root) if relative else p
                out.write(format_line(d, os.fsencode(name)))
        out.flush()
        written = sum(1 for _p, d in pairs if d is not None)
    failed = [(h.path, h.errno) for h in hashes if h.errno] + walk_errors
    nbytes = sum(h.size for h in hashes if not h.errno)
    cpu = (ru1.user - ru0.user) + (ru1.system - ru0.system)
    for p, e in failed:
        click.echo(f"fsbench: {display_name(os.fsencode(p))}: {os.strerror(e)}", err=True)
    summary = {
        "directory": root,
        "manifest": str(manifest) if manifest else None,
        "files": written,
        "failed": len(failed),
        "bytes": nbytes,
        "seconds": round(seconds, 3),
        "mib_per_s": round(nbytes / MiB / seconds, 1) if seconds > 0 else None,
        "cpu_share_of_wall": round(cpu / seconds, 3) if seconds > 0 else None,
        "threads": n,
    }
    if as_json:
        if manifest is None:
            summary["lines"] = lines
        click.echo(json.dumps(summary, indent=2))
    elif manifest is not None:
        click.echo(
            f"{written} files, {nbytes / MiB:.1f} MiB in {seconds:.2f} s "
            f"({summary['mib_per_s']} MiB/s, CPU {summary['cpu_share_of_wall']} of wall) "
            f"-> {manifest}"
        )
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


class _TextBytes:
    """Writes bytes to a text stream that has no binary buffer."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(os.fsdecode(data))

    def flush(self) -> None:
        self.stream.flush()
