"""--placement on a real ntfs-3g mount: while a `same` sample runs, the daemon's threads and
the fio processes really are on one CPU, and while a `free` sample runs nothing is pinned; the
run's results carry both placements and the explanation names the effect it measured.

The masks are read straight from the kernel (Cpus_allowed_list in /proc/PID/task/TID/status),
never through fsbench's own helpers. No ratio is hard-coded: it depends on the machine's
wake-up costs (which the run records); only its significance decides what the words must say.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import (
    alive,
    cmdline,
    fsbench_run,
    need_drivers,
    read_record,
)

from fsbench.records.schema import Run
from fsbench.report.model.comparison import verdict_of
from fsbench.report.model.explain import explain_run
from fsbench.report.model.naming import outcome, ratio_cell
from fsbench.units import fmt_ratio

CPUS = set(os.sched_getaffinity(0))


def _cpus(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def _masks(pid: int) -> tuple[str, list[frozenset[int]]] | None:
    """(comm, the CPU mask of every thread) of a live process, or None once it is gone."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        masks = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    masks.append(_cpus(line.split(":", 1)[1]))
    except OSError:
        return None
    return (comm, masks) if masks and alive(pid) else None


def _ours(mount_dir: str) -> dict[int, tuple[str, list[frozenset[int]]]]:
    """fio and ntfs-3g processes of this run. Light on purpose (comm first, the command line
    only of those): a busy poller would change the very scheduling it watches."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm != "fio" and "ntfs" not in comm:
            continue
        pid = int(entry.name)
        if any(a == mount_dir or mount_dir + "/" in a for a in cmdline(pid)):
            m = _masks(pid)
            if m is not None:
                found[pid] = m
    return found


@pytest.mark.root
@pytest.mark.skipif(
    len(CPUS) < 2, reason="not applicable here: one CPU, nothing to tell pinned from free"
)
def test_same_placement_pins_daemon_and_fio_and_the_report_names_it(
    tmp_path: Path, state_dir: Path
) -> None:
    need_drivers("ntfs-3g")
    seen: dict[str, list[tuple[frozenset[int], list[frozenset[int]]]]] = {"same": [], "free": []}
    with fsbench_run(
        state_dir, tmp_path / "out",
        "compare", "ntfs-3g", "--placement", "same,free", "--workloads", "seq-write/fsync:psync",
        "--size", "256M", "--repeat", "3", "--warmup", "0", "--min-sample-time", "0.3",
        "--no-trace", "--db", str(tmp_path / "db"),
    ) as ran:  # fmt: skip
        mount_dir = read_record(state_dir)["mount_dir"]
        while ran.proc.poll() is None:
            # fio alive and pinned before and after the daemon is read: the daemon was read
            # between the pin (before fio started) and the restore (after fio ended).
            before = {p: m[1] for p, m in _ours(mount_dir).items() if m[0] == "fio"}
            daemon = next((m[1] for m in _ours(mount_dir).values() if "ntfs" in m[0]), None)
            after = {p: m[1] for p, m in _ours(mount_dir).items() if m[0] == "fio"}
            both = {p: m for p, m in after.items() if before.get(p) == m}
            masks = {mask for ms in both.values() for mask in ms}
            if daemon is not None and len(masks) == 1:
                (mask,) = masks
                kind = "same" if len(mask) == 1 else "free" if mask == CPUS else None
                if kind is not None:
                    seen[kind].append((mask, daemon))
            time.sleep(0.1)  # the sampling interval of this observer, not a synchronisation

    # Where the processes really ran while the samples were timed.
    assert seen["same"], "never saw fio running during a `same` sample"
    assert seen["free"], "never saw fio running during a `free` sample"
    for mask, daemon in seen["same"]:
        assert daemon and all(m == mask for m in daemon), (mask, daemon)
    for _mask, daemon in seen["free"]:
        assert all(m == CPUS for m in daemon), daemon

    # Both placements are results of their own, and the samples say what was pinned.
    run = Run.model_validate(ran.doc)
    by = {r.params.get("placement"): r for r in run.results}
    assert set(by) == {"same", "free"} and all(r.status == "ok" for r in by.values())
    assert all(len(r.samples) == 3 for r in by.values())
    for s in by["same"].sample_details:
        assert s.extra["pinned"]["daemon_threads"] >= 1
        assert s.extra["pinned"]["app_cpu"] == s.extra["pinned"]["daemon_cpu"]
    # Under free nothing is pinned: the sample records only where the scheduler ran things.
    for s in by["free"].sample_details:
        rec = s.extra.get("pinned") or {}
        assert rec.get("placement") == "free" and "daemon_threads" not in rec, rec
    w = run.environment.wakeup_us
    assert w is not None and w.same_cpu > 0 and w.cross_cpu is not None

    # The explanation names the effect, in the words its verdict allows.
    c = verdict_of(by["free"], by["same"])
    assert c.ratio is not None
    print(
        f"\nntfs-3g seq-write/fsync: same {by['same'].median:.0f} MiB/s, free "
        f"{by['free'].median:.0f} MiB/s, same/free {ratio_cell(c, True)}; wake-ups "
        f"{w.same_cpu:.1f} µs same CPU, {w.cross_cpu:.1f} µs across"
    )
    (exp,) = [e for e in explain_run(run) if e.placement == "free"]
    (f,) = [f for f in exp.factors if f.name == "placement same"]
    assert f.figure == pytest.approx(c.ratio)
    said = outcome(c, True)
    if said in ("better", "worse"):
        word = "faster" if c.ratio > 1 else "slower"
        assert "on one CPU (same)" in f.sentence and word in f.sentence
        assert f": {said})" in f.sentence
        # The terminal says it under the table too.
        shown = fmt_ratio(c.ratio if c.ratio > 1 else 1 / c.ratio)
        assert f"ntfs-3g: on one CPU {shown} {word}" in " ".join(ran.stdout.split())
    else:
        assert any(
            w in f.sentence for w in ("not decidedly different", "no different", "too few samples")
        )
