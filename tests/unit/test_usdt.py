"""libfuse's USDT probes: the notes read from a daemon's ELF file, the probe unavailable with
the reason when no daemon carries them, its bpftrace fragment, its maps split per FUSE
connection, and the explanation's sentence (the daemon's share of a request's time)."""

from __future__ import annotations

from pathlib import Path

import pytest
from explain_fixtures import fuse_trace, kernel_trace, result, run
from usdt_fixtures import libfuse_daemon, write_elf

from fsbench.probes import trace as T
from fsbench.probes import usdt
from fsbench.records.probes import libfuse
from fsbench.records.probes.record import SubjectKeys
from fsbench.report.model.explain import explain_run


def test_the_notes_of_a_daemon_built_with_usdt_are_read(tmp_path: Path) -> None:
    daemon = libfuse_daemon(tmp_path / "passthrough_hp")
    assert ("libfuse", "request_process") in usdt.stapsdt_notes(daemon)
    assert usdt.usable([str(daemon)], libfuse.USDT) == ([str(daemon)], "")


def test_a_daemon_without_notes_makes_the_probe_unavailable_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = write_elf(tmp_path / "lowntfs-3g", [])
    other = write_elf(tmp_path / "other", [("python", "function__entry")])
    text = tmp_path / "script.sh"
    text.write_text("#!/bin/sh\n")
    for path in (bare, other, text):
        assert ("libfuse", "request_process") not in usdt.stapsdt_notes(path)
    good, why = usdt.usable([str(bare), str(text), str(tmp_path / "gone")], libfuse.USDT)
    assert good == []
    assert f"{bare} has no USDT probe libfuse:request_process" in why
    assert "gone: unreadable" in why
    assert "no daemon built with libfuse's USDT probes" in usdt.usable([], libfuse.USDT)[1]
    # In the probes' availability: only this probe says why, the others go on.
    monkeypatch.setattr(T.os, "geteuid", lambda: 0)
    monkeypatch.setattr(T.shutil, "which", lambda _n: "/usr/bin/bpftrace")
    events = tmp_path / "events"
    for tp in {tp for p in T.PROBES for tp in p.tracepoints} | {T.MARKER_TRACEPOINT}:
        (events / tp).mkdir(parents=True, exist_ok=True)
        (events / tp / "format").write_text("")
    status = T.availability(events, daemons=[str(bare)])
    assert "has no USDT probe" in status["libfuse"]
    assert all(v == "ok" for k, v in status.items() if k != "libfuse")


def test_the_script_attaches_to_the_daemons_that_carry_the_probe(tmp_path: Path) -> None:
    daemon = str(libfuse_daemon(tmp_path / "passthrough_hp"))
    bare = str(write_elf(tmp_path / "bare", []))
    probe = next(p for p in T.PROBES if p.name == "libfuse")
    script = T.build_script([probe], 123, [daemon, bare])
    assert f"usdt:{daemon}:libfuse:request_process" in script
    assert bare not in script
    assert "@libfuse_wait[args->connection, $op]" in script
    # Its in-flight maps are scratch (never cleared from user space), its results are cleared.
    assert "clear(@libfuse_n)" in script and "clear(@libfuse_s)" not in script


def test_the_maps_split_per_connection_and_scaled() -> None:
    maps = {
        "libfuse_n": {"54,16": 128, "99,16": 5},
        "libfuse_wait": {"54,16": 128 * 20_000, "99,16": 1},
        "libfuse_work": {"54,16": 128 * 8_000},
    }
    s = libfuse.parse(maps, SubjectKeys(fuse_connection=54))
    assert s is not None
    n = 128 * libfuse.SPLIT_EVERY
    assert s["requests"] == {"WRITE": n}
    assert s["wait_us"]["WRITE"] == pytest.approx(n * 20.0)
    assert s["work_us"]["WRITE"] == pytest.approx(n * 8.0)
    assert libfuse.parse(maps, SubjectKeys(fuse_connection=7))["requests"] == {}  # type: ignore[index]
    assert libfuse.parse(maps, SubjectKeys()) is None  # no FUSE mount


def _split_trace(wait_us: float, work_us: float, n: int = 262144) -> dict:
    t = fuse_trace(latency_total_us=n * (wait_us + work_us))
    t["probes"]["libfuse"] = "ok"
    t["libfuse"] = {
        "requests": {"WRITE": n},
        "wait_us": {"WRITE": n * wait_us},
        "work_us": {"WRITE": n * work_us},
    }
    return t


def test_the_explanation_says_how_much_of_a_request_the_daemon_worked() -> None:
    no_split = fuse_trace()
    no_split["probes"]["libfuse"] = "ok"
    no_split["libfuse"] = {"requests": {}, "wait_us": {}, "work_us": {}}
    subjects = ("ext4", "passthrough_hp", "passthrough_hp:uring")
    r = run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace()),
            result("passthrough_hp", [400.0, 401.0, 399.0], _split_trace(9.0, 3.0)),
            result("passthrough_hp:uring", [500.0, 501.0, 499.0], no_split),
        ],
        subjects=subjects,
    )
    for s in r.subjects[1:]:
        s.driver, s.fs = "passthrough_hp", "ext4"
        s.transport = s.id.partition(":")[2] or "dev-fuse"
    by = {e.subject: e for e in explain_run(r)}
    (f,) = [f for f in by["passthrough_hp"].factors if f.name == "daemon split"]
    assert "of its 12 µs per FUSE WRITE request (queued to ended)" in f.sentence
    assert "the daemon worked 3 µs (25 %" in f.sentence and "waited 9 µs" in f.sentence
    assert f.figure == pytest.approx(3.0) and f.baseline == pytest.approx(12.0)
    # Over io_uring libfuse 3.18 fires no request_process: no split, and the note says why.
    assert not [f for f in by[subjects[2]].factors if f.name == "daemon split"]
    assert any("not measured over io_uring" in u for u in by[subjects[2]].unavailable)


def test_no_note_where_the_run_had_no_daemon_carrying_the_probe() -> None:
    """ext4 against ntfs-3g: the probe had nothing to attach to; no explanation notes it."""
    why = usdt.usable([], libfuse.USDT)[1]
    t = fuse_trace()
    t["probes"]["libfuse"] = why
    k = kernel_trace()
    k["probes"]["libfuse"] = why
    r = run([result("ext4", [1000.0, 1010.0, 990.0], k), result("ntfs-3g", [100.0, 99.0], t)])
    for e in explain_run(r):
        assert not any("libfuse" in u for u in e.unavailable), e.unavailable
