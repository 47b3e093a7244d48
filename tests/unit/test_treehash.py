"""tree-hash without root: the native hasher against `xxhsum -H2` and python-xxhash, errors per
file, thread counts, manifests through `xxhsum -c` and `fsbench verify`, and the workload on a
plain directory."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash

from fsbench import _xxhtree
from fsbench.errors import UsageError, WorkloadFailed
from fsbench.registry import resolve_workloads
from fsbench.treehash.manifest import (
    format_line,
    read_manifest,
    verify_manifest,
    walk_tree,
    write_manifest,
)
from fsbench.treehash.tree import plan_tree, signature
from fsbench.workloads.base import Target
from fsbench.workloads.treehash import TreeHash, apply_manifest, with_manifest

MiB = 1024 * 1024
BUF = _xxhtree.DEFAULT_BUFSIZE
XXHSUM = shutil.which("xxhsum")
needs_xxhsum = pytest.mark.skipif(XXHSUM is None, reason="xxhsum not installed (apt xxhash)")

# Sizes around the edges of the one-shot and streaming paths and of the read buffer.
SIZES = {
    "empty": 0,
    "one-byte": 1,
    "small": 4095,
    "one-buffer": BUF,
    "buffer-plus-one": BUF + 1,
    "three-buffers-and-change": 3 * BUF + 12345,
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "files"
    d.mkdir()
    out = {}
    for i, (name, size) in enumerate(SIZES.items()):
        p = d / f"{name} {i}.bin"  # a space in every name, as users' files have
        p.write_bytes(os.urandom(size))
        out[name] = p
    return out


def xxhsum_digests(paths: list[Path]) -> dict[str, str]:
    assert XXHSUM is not None
    out = subprocess.run(
        [XXHSUM, "-H2", "--", *map(str, paths)], capture_output=True, text=True, check=True
    ).stdout
    return {line[34:]: line[:32] for line in out.splitlines()}


@needs_xxhsum
def test_digests_equal_xxhsum(files: dict[str, Path]) -> None:
    paths = list(files.values())
    want = xxhsum_digests(paths)
    got = _xxhtree.hash_files([str(p) for p in paths])
    for p, (digest, size, err) in zip(paths, got, strict=True):
        assert err == 0
        assert size == p.stat().st_size
        assert digest == want[str(p)], p.name


@pytest.mark.parametrize("bufsize", [4096, 65536, BUF])
@pytest.mark.parametrize("overlap", [True, False])
def test_digests_equal_python_xxhash(files: dict[str, Path], bufsize: int, overlap: bool) -> None:
    """Small buffers drive the streaming and double-buffered paths through many chunks."""
    paths = list(files.values())
    got = _xxhtree.hash_files(paths, 2, bufsize, overlap)  # os.PathLike accepted
    for p, (digest, size, err) in zip(paths, got, strict=True):
        data = p.read_bytes()
        assert (digest, size, err) == (xxhash.xxh3_128(data).hexdigest(), len(data), 0), p.name


def test_vanished_and_unreadable_files_are_reported_not_raised(
    files: dict[str, Path], tmp_path: Path
) -> None:
    gone = tmp_path / "gone.bin"
    paths = [
        str(files["small"]),
        str(gone),
        str(tmp_path),
        os.fsencode(files["one-byte"]),
        str(files["empty"]) + "/not-a-dir",
    ]
    got = _xxhtree.hash_files(paths, 2)
    assert got[0][2] == 0 and got[0][0] is not None
    assert got[1] == (None, 0, errno.ENOENT)
    assert got[2] == (None, 0, errno.EISDIR)
    assert got[3][2] == 0 and got[3][1] == 1  # bytes paths too
    assert got[4] == (None, 0, errno.ENOTDIR)


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _xxhtree.hash_files([str(fifo)]) == [(None, 0, errno.EINVAL)]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        _xxhtree.hash_files(["a\0b"])
    with pytest.raises(TypeError):
        _xxhtree.hash_files([1])
    with pytest.raises(ValueError):
        _xxhtree.hash_files([], 1, 100)
    assert _xxhtree.hash_files([]) == []


def test_thread_counts_agree(tmp_path: Path) -> None:
    d = tmp_path / "many"
    d.mkdir()
    for i in range(60):
        (d / f"f{i:03d}").write_bytes(os.urandom((i * 7919) % (3 * 65536)))
    (d / "big").write_bytes(os.urandom(3 * BUF + 5))
    paths, errors = walk_tree(str(d))
    assert not errors and len(paths) == 61
    one = _xxhtree.hash_files(paths, 1)
    assert _xxhtree.hash_files(paths, 4) == one
    assert _xxhtree.hash_files(paths, 4, 8192, False) == one
    assert _xxhtree.hash_files(paths, 0) == one  # 0: one per CPU


def test_walk_is_sorted_and_skips_symlinks(tmp_path: Path) -> None:
    for rel in ("b/z", "b/a", "a", "c/d/e"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "dirlink").symlink_to(tmp_path / "b")
    paths, errors = walk_tree(str(tmp_path))
    assert errors == []
    assert [os.path.relpath(p, tmp_path) for p in paths] == ["a", "b/a", "b/z", "c/d/e"]


# --- manifests ------------------------------------------------------------------------------
def _fsbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fsbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


@needs_xxhsum
def test_manifest_round_trip_xxhsum_and_verify(files: dict[str, Path], tmp_path: Path) -> None:
    tree = files["empty"].parent
    manifest = tmp_path / "tree.xxh128"
    made = _fsbench("hash", str(tree), "--manifest", str(manifest))
    assert made.returncode == 0, made.stderr
    lines = manifest.read_text().splitlines()
    assert len(lines) == len(SIZES)
    # Byte for byte what xxhsum prints for the same names.
    names = [line[34:] for line in lines]
    expect = subprocess.run(
        [XXHSUM, "-H2", "--", *names], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert lines == expect
    check = subprocess.run(
        [XXHSUM, "-c", str(manifest)], capture_output=True, text=True, cwd="/", check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    ok = _fsbench("verify", str(manifest))
    assert ok.returncode == 0, ok.stderr

    files["small"].write_bytes(b"bit rot" + files["small"].read_bytes()[7:])
    files["one-byte"].unlink()
    bad = _fsbench("verify", str(manifest))
    assert bad.returncode == 1, bad.stderr
    assert "Traceback" not in bad.stderr
    assert f"CHANGED     {files['small']}" in bad.stdout
    assert f"MISSING     {files['one-byte']}" in bad.stdout
    as_json = _fsbench("verify", str(manifest), "--json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert [c["path"] for c in doc["changed"]] == [str(files["small"])]
    assert doc["missing"] == [str(files["one-byte"])]
    assert doc["ok"] == len(SIZES) - 2
    # xxhsum agrees that something is wrong.
    assert subprocess.run([XXHSUM, "-c", str(manifest)], capture_output=True).returncode != 0


@needs_xxhsum
def test_relative_manifest_checks_from_its_root(files: dict[str, Path], tmp_path: Path) -> None:
    tree = files["empty"].parent
    paths, _ = walk_tree(str(tree))
    digests = [d for d, _s, _e in _xxhtree.hash_files(paths)]
    manifest = tmp_path / "rel.xxh128"
    assert write_manifest(zip(paths, digests, strict=True), str(manifest), str(tree)) == 6
    assert all("/" not in line[34:] for line in manifest.read_text().splitlines())
    check = subprocess.run([XXHSUM, "-c", str(manifest)], capture_output=True, cwd=tree)
    assert check.returncode == 0, check.stderr
    assert verify_manifest(str(manifest), root=str(tree)).clean
    ok, changed, missing = verify_manifest(str(manifest), root=str(tmp_path))
    assert ok == [] and changed == [] and len(missing) == 6


def test_names_with_newlines_and_backslashes(tmp_path: Path) -> None:
    weird = tmp_path / "new\nline \\ back"
    weird.write_bytes(b"data")
    plain = tmp_path / "back\\slash"
    plain.write_bytes(b"more")
    paths = [str(weird), str(plain)]
    digests = [d for d, _s, _e in _xxhtree.hash_files(paths)]
    manifest = tmp_path / "m"
    write_manifest(zip(paths, digests, strict=True), str(manifest))
    raw = manifest.read_bytes().split(b"\n")
    assert raw[0].startswith(b"\\") and b"\\n" in raw[0]  # GNU escape: one line per file
    assert raw[1] == format_line(digests[1], os.fsencode(plain)).rstrip(b"\n")
    assert not raw[1].startswith(b"\\")  # xxhsum 0.8.1 prints such names as they are
    assert read_manifest(str(manifest)) == [
        (os.fsencode(weird), digests[0]),
        (os.fsencode(plain), digests[1]),
    ]
    assert verify_manifest(str(manifest)).clean


def test_bsd_tag_lines_are_read(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a")
    m = tmp_path / "m"
    m.write_text(f"XXH128 ({tmp_path / 'f'}) = a96faf705af16834e6c632b61e964e1f\n")
    assert verify_manifest(str(m)).clean


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("not a manifest\n", ":1: not an `xxhsum -H2` line"),
        ("0123456789abcdef  some/file\n", "not XXH128"),
        ("\n\n", "no XXH128 lines"),
    ],
)
def test_bad_manifest_is_a_usage_error(tmp_path: Path, content: str | None, message: str) -> None:
    m = tmp_path / "m"
    if content is not None:
        m.write_text(content)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        read_manifest(str(m))


def test_verify_command_bad_manifest_exits_2_with_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "missing", tmp_path / "bad"):
        if path.name == "bad":
            path.write_text("garbage\n")
        proc = _fsbench("verify", str(path))
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("fsbench: manifest "), proc.stderr
        assert proc.stdout == ""


# --- the workload ---------------------------------------------------------------------------
def test_plan_is_deterministic_and_within_budget() -> None:
    a, b = plan_tree(64 * MiB), plan_tree(64 * MiB)
    assert a == b and signature(a) == signature(b)
    total = sum(f.size for f in a)
    assert 0.95 * 64 * MiB <= total <= 64 * MiB
    sizes = {f.rel: f.size for f in a}
    assert sizes["edge/empty"] == 0 and sizes["edge/one-byte"] == 1
    assert sum(1 for f in a if f.rel.startswith("small/")) > 500
    assert sum(1 for f in a if f.rel.startswith("large/")) == 4
    # --scale multiplies the small-file count, within the same byte budget.
    more = plan_tree(64 * MiB, 2.0)
    assert sum(1 for f in more if f.rel.startswith("small/")) > 1000
    assert sum(f.size for f in more) <= 64 * MiB


def _target(tmp_path: Path, size: int = 16 * MiB) -> Target:
    return Target(subject_id="dir", workdir=str(tmp_path / "work"), kind="directory", size=size)


def test_workload_measures_a_directory(tmp_path: Path) -> None:
    target = _target(tmp_path)
    manifest = tmp_path / "run.xxh128"
    wl = with_manifest(TreeHash(threads=2), str(manifest))
    params = wl.params(target)
    assert params["threads"] == 2 and params["cache"] == "cold"
    wl.prepare(target)
    root = Path(target.workdir, "tree-hash")
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    wl.prepare(target)  # the same tree is not laid out again
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before
    m = wl.run(target)
    assert m.ops == params["files"] == len(before)
    assert m.bytes == params["tree_bytes"]
    assert m.value > 0 and m.seconds > 0
    assert m.app_user_s + m.app_sys_s > 0
    assert m.extra["files"] == m.ops and m.extra["threads"] == 2
    assert m.extra["cpu_share_of_wall"] > 0
    assert len(manifest.read_text().splitlines()) == m.ops
    assert verify_manifest(str(manifest), root=str(root)).clean


def test_workload_fails_on_content_that_differs(tmp_path: Path) -> None:
    target = _target(tmp_path, 8 * MiB)
    wl = TreeHash(threads=1)
    wl.prepare(target)
    victim = Path(target.workdir, "tree-hash", "large", "l0.bin")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 1
    victim.write_bytes(data)
    with pytest.raises(WorkloadFailed, match=r"content differs .* 1 file"):
        wl.run(target)
    victim.unlink()
    with pytest.raises(WorkloadFailed, match=r"1 file\(s\) missing"):
        wl.run(target)


def test_registered_with_both_cache_states() -> None:
    found = resolve_workloads("tree-hash", None)
    assert [(w.name, w.cache) for w in found] == [("tree-hash", "cold"), ("tree-hash", "warm")]
    assert [w.id for w in resolve_workloads("tree-hash/warm", None)] == ["tree-hash/warm"]


def test_read_only_volume_hashes_what_is_there(files: dict[str, Path], tmp_path: Path) -> None:
    volume = files["empty"].parent
    before = sorted(p.name for p in volume.iterdir())
    target = Target(
        subject_id="ro",
        workdir=str(volume / "never-made"),
        kind="directory",
        size=2 * BUF,  # a budget smaller than the volume: the first files in walk order
        read_only=True,
        mountpoint=str(volume),
    )
    manifest = tmp_path / "ro.xxh128"
    wl = with_manifest(TreeHash(threads=2), str(manifest))
    assert wl.read_only_ok and wl.params(target)["files"] == "existing"
    wl.prepare(target)
    m = wl.run(target)
    assert sorted(p.name for p in volume.iterdir()) == before  # nothing written
    chosen = [line[34:] for line in manifest.read_text().splitlines()]
    assert m.ops == len(chosen) and 0 < m.ops < len(SIZES)
    assert m.bytes >= 2 * BUF and m.extra["walk_s"] == 0
    assert chosen == sorted(chosen)
    assert verify_manifest(str(manifest), root=str(volume)).clean


def test_apply_manifest_for_compare_and_run(tmp_path: Path) -> None:
    wl = resolve_workloads("seq-write,tree-hash", None)
    out = apply_manifest(wl, str(tmp_path / "m.xxh128"))
    marked = [w for w in out if getattr(w, "manifest", None)]
    assert len(marked) == 1 and marked[0].id == "tree-hash/cold"
    assert out[0] is wl[0]
    with pytest.raises(UsageError, match="needs the tree-hash workload"):
        apply_manifest(resolve_workloads("seq-write", None), str(tmp_path / "m"))
    with pytest.raises(UsageError, match="cannot write"):
        apply_manifest(wl, str(tmp_path / "no" / "such" / "m"))


def test_hash_command_leaves_its_own_manifest_out(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    manifest = tmp_path / "inside.xxh128"
    for _ in range(2):
        proc = _fsbench("hash", str(tmp_path), "--manifest", str(manifest), "--relative")
        assert proc.returncode == 0, proc.stderr
    assert manifest.read_text() == "a96faf705af16834e6c632b61e964e1f  a\n"


def test_an_empty_directory_argument_is_refused_not_taken_as_the_cwd(tmp_path: Path) -> None:
    """Path("") is "." : `fsbench hash "$UNSET"` would hash wherever the user stands."""
    (tmp_path / "a").write_bytes(b"a")
    proc = _fsbench("hash", "", cwd=tmp_path)
    assert proc.returncode == 2 and "DIRECTORY is empty" in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_hash_lines_reach_a_text_stdout_without_a_binary_buffer(tmp_path: Path) -> None:
    import contextlib
    import io

    from fsbench.cli.commands.verify import hash_tree

    (tmp_path / "a").write_bytes(b"a")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        hash_tree.main([str(tmp_path), "--relative"], standalone_mode=True)
    assert done.value.code in (0, None)
    assert out.getvalue() == "a96faf705af16834e6c632b61e964e1f  a\n"
