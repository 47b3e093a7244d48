"""bench/peers.py: each peer is what a user types, in the cache state fsbench measures in.

The bench itself needs root and real mounts; these check what decides its numbers: the peer's
fio command against fsbench's own job, and that every read peer starts cold.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fsbench.schedule.dimensions.placement import default_placement
from fsbench.workloads.base import Target
from fsbench.workloads.fio import FIO_JOBS, RANDOM_IO_BYTES

BENCH = Path(__file__).resolve().parents[2] / "bench"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def peers() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("peers")
    finally:
        sys.path.remove(str(BENCH))


def flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def test_fio_peer_asks_what_fsbench_asks(peers: Any) -> None:
    """Every option that decides the I/O is the same in the peer's command and fsbench's job
    (fsbench adds only its own reporting and clock options, which the peer leaves default)."""
    size = 819 * MiB
    job = next(j for j in FIO_JOBS if getattr(j, "id", "") == "rand-read/4k-direct")
    ours = flags(job.argv(Target("ext4", "/mnt/x", "kernel", size)))
    theirs = flags(peers.fio_randread_argv("/mnt/x/peer.seq", size, RANDOM_IO_BYTES))
    for key in ("rw", "bs", "direct", "ioengine", "size", "io_size", "randrepeat"):
        assert theirs[key] == ours[key], key
    assert "iodepth" not in theirs and "iodepth" not in ours


class FakeLab:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def make_cold(self, _s: object) -> None:
        self.log.append("cold")


def test_every_read_peer_starts_cold(peers: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read right after another read of the same file is not cold: on ntfs-3g, fio's direct
    reads after dd's read came from the loop device's page cache (0 bytes read from the
    device, measured). So each read peer runs right after its own cache drop."""
    log: list[str] = []

    def dd(args: list[str]) -> float:
        log.append("dd write" if "if=/dev/zero" in args else "dd read")
        return 1.0

    def fio(*_a: object) -> float:
        log.append("fio")
        return 1.0

    def xxhsum(files: list[str], *_a: object) -> None:
        log.append("xxhsum start" if set(files) == {peers.os.devnull} else "xxhsum")

    monkeypatch.setattr(peers, "dd", dd)
    monkeypatch.setattr(peers, "fio_randread", fio)
    monkeypatch.setattr(peers, "run_xxhsum", xxhsum)
    monkeypatch.setattr(peers, "run_xxhsum_parallel", xxhsum)
    monkeypatch.setattr(peers, "walk_tree", lambda _root: (["/nonexistent/tree/f"], []))
    p = object.__new__(peers.Peers)
    spec = SimpleNamespace(id="ntfs-3g", driver=SimpleNamespace(kind="fuse"))
    p.lab = FakeLab(log)
    p.s = SimpleNamespace(spec=spec, workdir="/nonexistent", daemon_pid=1)
    p.seq_size, p.threads, p.tree_bytes = 8 * MiB, 2, MiB
    p.file, p.root, p.rand_unsupported = "/nonexistent/peer.seq", "/nonexistent/tree", None
    p.from_device = []
    monkeypatch.setattr(peers.os, "sync", lambda: None)
    monkeypatch.setattr(peers, "device_read", lambda _s: 8 * MiB * log.count("dd read"))
    monkeypatch.setattr(peers, "pin", lambda placement, _t: log.append(f"pin {placement}"))
    monkeypatch.setattr(peers, "switches", lambda _pid: 100 * log.count("xxhsum"))
    keys = [*peers.WORKLOADS, peers.ONE_XXHSUM, peers.XXHSUM_START, peers.XXHSUM_CPU,
            peers.XXHSUM_CTX]  # fmt: skip
    rates: dict = {(w, "ntfs-3g"): [] for w in keys}
    p.round(0, rates, writes=1, reads=2)
    reads = [i for i, e in enumerate(log) if e in ("dd read", "fio", "xxhsum")]
    assert len(reads) == 2 * 3 + 1
    # Right after its drop (a pin between them moves nothing in the caches).
    unpinned = [e for e in log if not e.startswith("pin")]
    reads = [i for i, e in enumerate(unpinned) if e in ("dd read", "fio", "xxhsum")]
    assert all(unpinned[i - 1] == "cold" for i in reads), log
    assert len(rates[("rand-read/4k-direct", "ntfs-3g")]) == 2
    # The peer's own start cost is measured apart from its timed runs, never inside one.
    assert log.count("xxhsum start") == 2 and len(rates[(peers.XXHSUM_START, "ntfs-3g")]) == 2
    assert len(rates[(peers.XXHSUM_CPU, "ntfs-3g")]) == 2  # one per timed tree-hash run
    # Its switches per GiB (1 MiB of tree: 100 switches a run is 102,400 per GiB).
    assert [v for _, v in rates[(peers.XXHSUM_CTX, "ntfs-3g")]] == [102400.0, 102400.0]
    # Each cold dd read's share from the device, by the counter read around it.
    assert p.from_device == [1.0, 1.0]
    # Every peer runs where fsbench's workload runs (PLACED): pinned just before it starts
    # (the rand-read and tree-hash peers ran free beside a pinned fsbench until issue 52).
    assert log[log.index("dd write") - 1] == f"pin {peers.PLACED['seq-write/fsync']}"
    assert log[log.index("dd read") - 1] == f"pin {peers.PLACED['seq-read/cold']}"
    timed = [i for i, e in enumerate(log) if e in ("dd write", "dd read", "fio", "xxhsum")]
    assert all(log[i - 1].startswith("pin ") for i in timed), log


def test_placed_workloads_compare_at_their_placement(peers: Any, tmp_path: Path) -> None:
    """Every workload's peer runs pinned as fsbench's default pins it (same), its compare at
    that placement, and its result (`W@same`) is found under W."""
    assert set(peers.PLACED) == set(peers.WORKLOADS)
    assert set(peers.PLACED.values()) == {"same"} == {default_placement([0, 1])}
    for w in peers.WORKLOADS:
        argv = peers.compare_argv(["ext4", "ntfs-3g"], w, "2G", tmp_path, tmp_path / "db")
        i = argv.index("--placement") if "--placement" in argv else None
        assert (argv[i + 1] if i is not None else None) == peers.PLACED.get(w), w
    doc = {"results": [{"workload_id": "seq-write/fsync@same", "workload": "seq-write",
                        "subject": "ntfs-3g"}]}  # fmt: skip
    assert set(peers.by_result(doc)) == {("seq-write/fsync", "ntfs-3g")}


def test_a_row_outside_says_what_each_side_saw(peers: Any, capsys: pytest.CaptureFixture) -> None:
    """A row outside the target gets a note with both sides' spreads and the machine's load
    around its compare, and the last line names it."""
    rates = {(w, "ext4"): [(0, 100.0), (1, 120.0)] for w in [*peers.WORKLOADS, peers.ONE_XXHSUM]}
    res = {("rand-read/4k-direct", "ext4"): {"status": "ok", "median": 50.0, "samples": [40, 60]}}
    machine = {1: "load average 1.0 at the peers before, 2.0 -> 3.0 across the compare"}
    args = SimpleNamespace(size="2G")
    peers.report(res, ["rand-read/4k-direct"], ["ext4"], rates, [], args, (1.0, 2.0), machine)
    out = capsys.readouterr().out.splitlines()
    note = next(line for line in out if line.startswith("note: rand-read/4k-direct on ext4"))
    assert "40–60" in note and "100–120" in note and "do not overlap" in note
    assert machine[1] in note
    assert out[-1] == "worst agreement 0.45 (rand-read/4k-direct, ext4)"


def test_tree_hash_note_weighs_the_peers_start(peers: Any, capsys: pytest.CaptureFixture) -> None:
    """The tree-hash row's note says what share of the peer's run its process starts took, and
    its CPU per GiB against fsbench's application CPU."""
    keys = [*peers.WORKLOADS, peers.ONE_XXHSUM, peers.XXHSUM_START, peers.XXHSUM_CPU,
            peers.XXHSUM_CTX]  # fmt: skip
    rates = {(w, "ext4"): [] for w in keys}
    rates[("tree-hash/cold", "ext4")] = [(0, 1000.0), (1, 1000.0)]  # 1 MiB/ms: 500 ms runs
    rates[(peers.XXHSUM_START, "ext4")] = [(0, 0.05), (1, 0.05)]
    rates[(peers.XXHSUM_CPU, "ext4")] = [(0, 1.5), (1, 1.5)]
    res = {
        ("tree-hash/cold", "ext4"): {
            "status": "ok", "median": 1000.0, "samples": [1000.0],
            "params": {"tree_bytes": 500 * MiB}, "cpu": {"per_gib": {"app": 1.0}},
        }
    }  # fmt: skip
    args = SimpleNamespace(size="2G")
    peers.report(res, ["tree-hash/cold"], ["ext4"], rates, [], args, (1.0, 1.0), {1: ""})
    out = capsys.readouterr().out
    assert "the peer's processes start in 50 ms" in out and "10% of its 500 ms run" in out
    assert "they use 1.50 CPU s/GiB, fsbench's hasher 1.00 (1.50× as much per byte)" in out
    # Without the one-process peer's figure, no note about it.
    assert "one xxhsum process" not in out.split("xxhsum in one process")[-1]


def test_tree_hash_note_sets_the_parallel_peer_beside_one_process(
    peers: Any, capsys: pytest.CaptureFixture
) -> None:
    """ntfs-3g of issue 52: fsbench 1,412 MiB/s, the two-process peer 815, one xxhsum process
    1,213: the note gives the one-process figure and fsbench's ratio to it."""
    keys = [*peers.WORKLOADS, peers.ONE_XXHSUM, peers.XXHSUM_START, peers.XXHSUM_CPU,
            peers.XXHSUM_CTX]  # fmt: skip
    rates = {(w, "ntfs-3g"): [] for w in keys}
    rates[("tree-hash/cold", "ntfs-3g")] = [(0, 815.0), (1, 815.0)]
    rates[(peers.ONE_XXHSUM, "ntfs-3g")] = [(0, 1213.0), (1, 1213.0)]
    rates[(peers.XXHSUM_START, "ntfs-3g")] = [(0, 0.003), (1, 0.003)]
    rates[(peers.XXHSUM_CPU, "ntfs-3g")] = [(0, 0.23), (1, 0.23)]
    rates[(peers.XXHSUM_CTX, "ntfs-3g")] = [(0, 60000.0), (1, 70000.0)]
    res = {
        ("tree-hash/cold", "ntfs-3g"): {
            "status": "ok", "median": 1412.0, "samples": [1412.0],
            "params": {"tree_bytes": 800 * MiB}, "cpu": {"per_gib": {"app": 0.18}},
            "subject_ctx_switches_per_gib": 32500.0,
        }
    }  # fmt: skip
    args = SimpleNamespace(size="2G")
    peers.report(res, ["tree-hash/cold"], ["ntfs-3g"], rates, [], args, (1.0, 1.0), {1: ""})
    out = " ".join(capsys.readouterr().out.split())
    assert "tree-hash/cold on ntfs-3g: one xxhsum process reads 1,213 MiB/s" in out
    assert "in parallel 815 (1.49×); fsbench against one process 1.16" in out
    assert (
        "the peer's processes and the daemon switched 65,000 times per GiB, fsbench's hasher "
        "and the daemon 32,500 (2.00×)"
    ) in out


def test_fsbench_runs_on_the_peers_device(
    peers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both sides read the same RAM image: fsbench's compare of a driver gets the peers' loop
    device as its backing (two images made one after the other read 1.37x apart here), with
    the peers' mount taken down for it and put back, the tree laid out again after."""
    argv = peers.compare_argv(
        ["ext4"], "seq-read/cold", "2G", tmp_path, tmp_path / "db", "/dev/loop7"
    )
    i = argv.index("--backing")
    assert argv[i : i + 3] == ["--backing", "device:/dev/loop7", "--destroy-data"]
    assert "--backing" not in peers.compare_argv(
        ["ext4"], "seq-read/cold", "2G", tmp_path, tmp_path
    )
    log: list[str] = []
    workdir = tmp_path / "mnt" / "fsbench"
    workdir.mkdir(parents=True)
    (workdir / "seq.0.0").write_bytes(b"left by fsbench")

    class Lab:
        def unmount(self, _s: object) -> None:
            log.append("unmount")

        def mount(self, _s: object) -> None:
            log.append("mount")

    def run_fsbench(drivers: list[str], w: str, size: str, _tmp: Path, device: str) -> dict:
        log.append(f"compare {' '.join(drivers)} {w} {size} on {device}")
        return {"results": []}

    monkeypatch.setattr(peers, "run_fsbench", run_fsbench)
    p = object.__new__(peers.Peers)
    p.lab = Lab()
    p.s = SimpleNamespace(
        spec=SimpleNamespace(id="ext4"), device="/dev/loop7", workdir=str(workdir)
    )
    p.lay_out = lambda: log.append(f"lay out over {sorted(os.listdir(workdir))}")
    assert p.compare("seq-read/cold", "2G", tmp_path) == {"results": []}
    assert log == [
        "unmount", "compare ext4 seq-read/cold 2G on /dev/loop7", "mount", "lay out over []"
    ]  # fmt: skip


def test_device_notes_give_both_sides_share_from_the_device(peers: Any) -> None:
    r = {"sample_details": [{"bytes": 100, "device": {"read_bytes": 100}},
                            {"bytes": 200, "device": {"read_bytes": 201}}]}  # fmt: skip
    (note,) = peers.device_notes("ext4", [1.0, 1.01], r)
    assert "fsbench 1.000–1.005, dd 1.000–1.010" in note
    assert peers.device_notes("ext4", [], r) == [] and peers.device_notes("ext4", [1.0], None) == []
