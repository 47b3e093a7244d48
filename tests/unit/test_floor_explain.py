"""The FUSE floor in the explanation: of a FUSE driver's time per request, the floor's (the
same run's passthrough_hp over /dev/fuse) and the rest, the driver's own work."""

from __future__ import annotations

from explain_fixtures import GiB, fuse_trace, kernel_trace, result, run

from fsbench.report.model.explain import explain_run


def _passthrough_trace() -> dict:
    """Reads and writes go to the backing file in the kernel: only other requests are FUSE's."""
    t = fuse_trace(seconds=1.0)
    t["fuse"] = {
        "requests": {"GETXATTR": 1024},
        "latency_us": {"GETXATTR": {"p50": 40.0, "p99": 60.0, "total": 1024 * 40.0}},
    }
    return t


def _run(
    floor_latency_total_us: float = 262144 * 12.0, with_floor: bool = True, floor_size: int = 4096
):
    subjects = ["ext4", "ntfs-3g"] + (
        ["passthrough_hp", "passthrough_hp:uring", "passthrough_hp:passthrough"]
        if with_floor
        else []
    )
    results = [
        result("ext4", [1000.0, 1010.0, 990.0], kernel_trace()),
        # ntfs-3g: 262,144 WRITEs of 4 KiB, 36 µs each.
        result("ntfs-3g", [100.0, 101.0, 99.0], fuse_trace(latency_total_us=262144 * 36.0)),
    ]
    if with_floor:
        results += [
            result(
                "passthrough_hp",
                [400.0, 401.0, 399.0],
                fuse_trace(
                    requests=GiB // floor_size,
                    size=floor_size,
                    latency_total_us=floor_latency_total_us,
                    seconds=2.5,
                ),
            ),
            result(
                "passthrough_hp:uring",
                [500.0, 501.0, 499.0],
                fuse_trace(latency_total_us=262144 * 6.0, seconds=2.0),
            ),
            result("passthrough_hp:passthrough", [990.0, 991.0, 989.0], _passthrough_trace()),
        ]
    r = run(results, subjects=tuple(subjects))
    for s in r.subjects:
        if s.driver.startswith("passthrough_hp"):
            s.driver, s.fs = "passthrough_hp", "ext4"
            s.transport = s.id.partition(":")[2] or "dev-fuse"
        elif s.kind == "fuse":
            s.transport = "dev-fuse"
    return r


def _floor(run_, subject: str):
    e = next(e for e in explain_run(run_) if e.subject == subject)
    return [f for f in e.factors if f.name == "fuse floor"]


def test_a_fuse_driver_is_split_into_the_floor_and_its_own_work() -> None:
    (f,) = _floor(_run(), "ntfs-3g")
    assert f.figure == 12.0 and f.baseline == 36.0
    assert "of its 36 µs per FUSE WRITE request, the floor" in f.sentence
    assert "is 12 µs" in f.sentence and "24 µs (67 %) is ntfs-3g's own work" in f.sentence
    assert f.brief == "floor 12 µs of its 36 µs/WRITE"


def test_a_driver_no_slower_than_the_floor_is_said_so() -> None:
    (f,) = _floor(_run(floor_latency_total_us=262144 * 40.0), "ntfs-3g")
    assert "no more than the floor" in f.sentence


def test_the_floor_transports_are_compared_with_the_floor_over_dev_fuse() -> None:
    r = _run()
    (u,) = _floor(r, "passthrough_hp:uring")
    assert "over io_uring it is 0.50× the floor's" in u.sentence
    (p,) = _floor(r, "passthrough_hp:passthrough")
    assert "never reach the daemon" in p.sentence and "262,144" in p.sentence
    assert _floor(r, "passthrough_hp") == []  # the floor itself
    assert _floor(r, "ext4") == []  # a kernel driver sends no FUSE requests


def test_no_floor_in_the_run_no_claim() -> None:
    assert _floor(_run(with_floor=False), "ntfs-3g") == []


def test_requests_of_very_different_sizes_get_no_split() -> None:
    """The floor's writes come through the writeback cache, 1 MiB each: no floor for 4 KiB."""
    (f,) = _floor(_run(floor_latency_total_us=1024 * 29000.0, floor_size=2**20), "ntfs-3g")
    assert "4 KiB" in f.sentence and "1 MiB" in f.sentence and "256× apart" in f.sentence
    assert "own work" not in f.sentence and "no per-request floor is claimed" in f.sentence


def _read_trace(reply_bytes: int) -> dict:
    """4,096 READs per GiB whose traced reply length is `reply_bytes` each."""
    t = fuse_trace(seconds=1.0)
    t["fuse"] = {
        "requests": {"READ": 4096},
        "bytes": {"READ": 4096 * reply_bytes},
        "size_hist": {"READ": {str(reply_bytes): 4096}},
        "latency_us": {"READ": {"p50": 500.0, "p99": 900.0, "total": 4096 * 500.0}},
    }
    return t


def test_over_io_uring_a_read_reply_length_is_no_size() -> None:
    """The trace's reply length under io_uring is 64 B for a 256 KiB READ: the explanation
    says the size is unknown there instead of '× 64 B'; over /dev/fuse the size stands."""
    subjects = ("ext4", "passthrough_hp", "passthrough_hp:uring")
    r = run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace()),
            result("passthrough_hp", [400.0, 401.0, 399.0], _read_trace(262144)),
            result("passthrough_hp:uring", [500.0, 501.0, 499.0], _read_trace(64)),
        ],
        subjects=subjects,
    )
    for s in r.subjects[1:]:
        s.driver, s.fs = "passthrough_hp", "ext4"
        s.transport = s.id.partition(":")[2] or "dev-fuse"
    by = {e.subject: e for e in explain_run(r)}
    uring = [f for f in by["passthrough_hp:uring"].factors if "FUSE READ" in f.sentence]
    assert uring and all("64 B" not in f.sentence + f.brief for f in uring)
    assert any("READ sizes: not measured over io_uring" in u for u in by[subjects[2]].unavailable)
    dev = [f for f in by["passthrough_hp"].factors if "FUSE READ" in f.sentence]
    assert dev and any("256 KiB" in f.sentence for f in dev)
