"""The user's own workloads on real drivers: a multi-section fio job file (fio's tiobench
example, sized for a small image) and a real build as a command, on ext4 and ntfs-3g in one
run; a command left running by a SIGKILLed fsbench, stopped by `fsbench cleanup`. (Failing,
hanging and killed commands: tests/unit/test_user_workloads.py, real processes through the
runner.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from conftest import (
    REPO,
    RunDirs,
    alive,
    fsbench,
    fsbench_argv,
    fsbench_released,
    leftovers_anywhere,
    mounts_under,
    need_drivers,
    read_record,
    release_leftovers,
)

from polling import wait_until

FIO = REPO / "tests" / "unit" / "fixtures" / "fio"
MAKEFILE = """all: build/app
build/app: main.c util.c
\t@mkdir -p build
\tcc -O1 -o build/app main.c util.c
clean:
\trm -rf build
"""


def _project(root: Path) -> Path:
    src = root / "src"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    (src / "main.c").write_text("int twice(int);\nint main(void) { return twice(21) - 42; }\n")
    (src / "util.c").write_text("int twice(int x) { return 2 * x; }\n")
    return src


@pytest.mark.root
def test_a_job_file_and_a_build_on_ext4_and_ntfs3g(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_drivers("ext4", "ntfs-3g")
    src = _project(tmp_path)
    job = f"fio:{FIO / 'tiobench-small.fio'}:cache=cold"
    # The job file's ${TIOBENCH_SIZE}: 2 MiB a job (its four phases' files fill what the
    # image's budget holds at 3 MiB).
    monkeypatch.setenv("TIOBENCH_SIZE", "2m")
    ran = fsbench_released(
        state_dir,
        tmp_path / "out",
        *("compare", "ext4", "ntfs-3g", "--size", "128M", "--workloads", job),
        *("--repeat", "1", "--warmup", "0", "--min-sample-time", "0", "--no-trace"),
        *("--db", str(tmp_path / "results.db"), "--timeout", "120"),
        *("--input", str(src), "--prepare", "make -C src clean", "--command", "make -C src"),
    )
    doc = ran.doc
    assert doc["schema_version"] >= 3 and doc["status"] == "complete"
    ids = [f"fio:tiobench-small/f{i}" for i in (1, 2, 3, 4)] + ["command/make-C-src"]
    results = {(r["subject"], r["workload_id"]): r for r in doc["results"]}
    assert set(results) == {(s, w) for s in ("ext4", "ntfs-3g") for w in ids}
    for (subject, wid), r in results.items():
        assert r["status"] == "ok", (subject, wid, r["error"])
        assert r["median"] > 0 and r["cpu"]["app_user_s"] + r["cpu"]["app_sys_s"] > 0
    for subject in ("ext4", "ntfs-3g"):
        for phase in ("f3", "f4"):  # cache=cold: the read phases, verified by the device
            assert results[(subject, f"fio:tiobench-small/{phase}")]["cache"] == "cold-verified"
        f1 = results[(subject, "fio:tiobench-small/f1")]
        # Four jobs (numjobs=4) of 1 MiB each, every one's figures kept.
        (sample,) = f1["sample_details"]
        assert sample["bytes"] == 8 << 20 and len(sample["extra"]["jobs"]) == 4
    # The daemon's CPU over the four phases: one phase's 8 MiB can be under a clock tick
    # (10 ms), and f1's driver_s read 0.0 in CI at 1 MiB a job.
    phases = [results[("ntfs-3g", f"fio:tiobench-small/f{i}")] for i in (1, 2, 3, 4)]
    assert sum(r["cpu"]["driver_s"] for r in phases) > 0
    build = results[("ntfs-3g", "command/make-C-src")]
    assert build["unit"] == "s" and build["params"]["input"]["files"] == 3
    # The definitions reproduce both: the job file's text, its include and env, and every
    # section's options as written, effective and as fio itself reported them.
    defs = {d["kind"]: d for d in doc["definitions"]}
    fio_def = defs["fio-file"]
    assert fio_def["text"] == (FIO / "tiobench-small.fio").read_text()
    assert fio_def["env"] == {"TIOBENCH_SIZE": "2m"} and "tiobench-io.fio" in fio_def["includes"]
    for s in fio_def["sections"]:
        assert s["effective"]["numjobs"] == "4" and s["effective"]["size"] == "2m"
        assert s["reported_by_fio"]["direct"] == "1", s
    assert defs["command"]["command"] == "make -C src"
    assert defs["command"]["prepare"] == "make -C src clean"
    for subject in doc["subjects"]:
        assert subject["integrity"]["status"] == "ok", subject["integrity"]


def _sleepers(marker: str) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


@pytest.mark.root
def test_a_command_left_running_by_a_killed_fsbench_is_stopped_by_cleanup(
    tmp_path: Path, state_dir: Path
) -> None:
    """SIGKILL leaves the user's command running in the mount (nothing can stop it then);
    `fsbench cleanup` stops it (it works in the run's mount) before unmounting."""
    need_drivers("ext4")
    marker = f"{os.getpid() % 1000 + 9000}.25"  # a sleep nobody else runs
    proc = subprocess.Popen(
        fsbench_argv(
            *("compare", "ext4", "--size", "64M", "--repeat", "1", "--warmup", "0"),
            *("--no-trace", "--no-integrity", "--out", str(tmp_path / "out")),
            *("--db", str(tmp_path / "db"), "--command", f"sleep {marker}"),
        ),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        rec = read_record(state_dir)
        dirs = RunDirs.of(rec["run_id"], state_dir)
        assert wait_until(lambda: bool(_sleepers(marker)) or proc.poll() is not None, 120)
        (sleeper,) = _sleepers(marker)
        assert os.readlink(f"/proc/{sleeper}/cwd").startswith(dirs.mount_dir)
        os.kill(rec["pid"], signal.SIGKILL)  # fsbench itself: its command stays behind
        proc.wait(timeout=60)
        assert alive(sleeper) and mounts_under(dirs.mount_dir)
        # The chaos test's leftover checks see it too (by its working directory).
        assert str(sleeper) in " ".join(leftovers_anywhere(dirs)["processes working in the mounts"])
        res = fsbench("cleanup", timeout=120)
        assert res.returncode == 0, res.stderr
        # The sleep, and the shell around it where it did not exec.
        assert re.search(r"stopped [12] process\(es\) working in the run's mounts", res.stdout)
        assert _sleepers(marker) == []
        dirs.assert_released()
        assert leftovers_anywhere(dirs) == {}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        release_leftovers(state_dir)
