"""`--dry-run` on compare and run: the plan printed in under 2 s with nothing attached, mounted,
created or measured (`losetup -a`, the mount table and /dev/shm read before and after; under
strace, no program started and no mount or loop call), and what the plan says: subjects,
workloads with their variants, rounds, budget, images and their sizes, VMs, what is skipped
and why."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

GiB = 1024**3


def _fsbench(*args: str, home: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "XDG_DATA_HOME": str(home / "data")}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "fsbench", *args], capture_output=True,
                         text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    return res, time.monotonic() - t0


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _system() -> tuple[list[str], list[str], list[str]]:
    """fsbench's loop devices, mounts and RAM image directories, as they are now (a lab's
    images and mount points are named fsbench-*: what a dry run must not make). Only those:
    an integration test running beside this one attaches loops of its own (itest-volume-*),
    which made this test fail in CI."""
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    mounts = Path("/proc/self/mounts").read_text()
    shm = sorted(p.name for p in Path("/dev/shm").glob("fsbench-*"))
    return _ours(loops), _ours(mounts), shm


def _ours(table: str) -> list[str]:
    # Not the other tests' own loops and mounts, whose files live in the session's $TMPDIR
    # (named fsbench-tests-*, under CI's fsbench-ci.*): a RAM-backed lab's are in /dev/shm and
    # its mount base, each named fsbench-RUN_ID.
    tests = os.environ.get("FSBENCH_TEST_TMPDIR") or tempfile.gettempdir()
    return [line for line in table.splitlines() if "fsbench" in line and tests not in line]


def _others_idle() -> bool:
    """Another run on the machine (a test under the heavy lock) changes these by itself."""
    return not any(p.name.startswith("fsbench-") for p in Path("/dev/shm").iterdir())


def test_compare_dry_run_makes_nothing_and_says_the_plan(tmp_path: Path) -> None:
    before = _system()
    args = ["compare", "ext4", "ntfs-3g", "xfs:noatime", "--workloads", "seq-write,metadata",
            "--size", "2G", "--repeat", "auto", "--max-repeat", "6", "--time-budget", "90",
            "--out", str(tmp_path / "out"), "--db", str(tmp_path / "db"), "--dry-run",
            "--json"]  # fmt: skip
    # Under 2 s of CPU (1.1 s wall on an idle machine here): on a shared, loaded machine the
    # wall clock measures the neighbours. Waiting (a fetch, a mount) would show in the wall
    # time, which stays bounded.
    cpu0 = _children_cpu()
    res, took = _fsbench(*args, home=tmp_path)
    # The code the real run would end with: 3 where this machine refuses it (RAM now free).
    assert res.returncode == json.loads(res.stdout)["exit_code"], res.stderr
    assert _children_cpu() - cpu0 < 2.0 and took < 10.0, took
    if _others_idle() and not any(before):
        assert _system() == before  # no loop attached, nothing mounted, no image directory
    assert not (tmp_path / "out").exists() and not (tmp_path / "db").exists()
    assert not (tmp_path / "data").exists()
    plan = json.loads(res.stdout)
    assert plan["dry_run"] is True
    assert [s["id"] for s in plan["subjects"]] == ["ext4", "ntfs-3g", "xfs:noatime"]
    assert plan["subjects"][2]["mount_options"] == "noatime"
    ids = [w["id"] for w in plan["workloads"]]
    assert {"seq-write/fsync", "seq-write/buffered", "metadata/chmod-flat"} <= set(ids)
    assert all(w["variant"] for w in plan["workloads"])
    r = plan["rounds"]
    assert (r["repeat"], r["samples_at_least"], r["samples_at_most"]) == ("auto", 3, 6)
    assert r["results_on_host"] == 3 * len(ids)
    assert plan["budget_s"] == 90
    im = plan["images"]
    assert im["backing"] == "ram" and im["image_size"] == 2 * GiB
    assert [i["subject"] for i in im["per_subject"]] == ["ext4", "ntfs-3g", "xfs:noatime"]
    # Three formats, each formatted once; at most one pristine image beside the three copies.
    assert {p["format"] for p in im["pristine"]} == {"ext4", "ntfs", "xfs"}
    assert im["memory_at_most"] == 4 * 2 * GiB
    assert plan["vm"] == [] and plan["out_dir"] == str(tmp_path / "out")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is missing (setup.sh --test)")
def test_a_dry_run_runs_no_program_and_no_mount_or_loop_call(tmp_path: Path) -> None:
    """What the process itself does, whatever else runs on the machine: under strace, no
    program started (no losetup, mount, mkfs, fio), no mount(2) and no loop-device ioctl."""
    trace = tmp_path / "strace.txt"
    argv = ["strace", "-f", "-qq", "-e", "trace=execve,mount,umount2,ioctl", "-o", str(trace),
            sys.executable, "-m", "fsbench", "compare", "ext4", "ntfs-3g", "--suite", "diskmark",
            "--dry-run", "--out", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    calls = trace.read_text().splitlines()
    started = {ln.split('"')[1] for ln in calls if "execve(" in ln and "ENOENT" not in ln}
    # Itself, and `ldconfig -p`: ctypes' lookup of libc when the probes' modules load.
    assert {Path(p).name for p in started - {sys.executable}} <= {"ldconfig"}, started
    assert not [ln for ln in calls if "mount(" in ln or "umount2(" in ln or "LOOP_" in ln]


def test_the_plan_in_words_names_what_is_skipped_and_why(tmp_path: Path) -> None:
    # vfat has no POSIX permissions: metadata's chmod is skipped on it, said with why.
    res, _ = _fsbench("compare", "vfat", "ext4", "--workloads", "metadata", "--size", "64M",
                      "--repeat", "4", "--dry-run", "--out", str(tmp_path / "o"),
                      home=tmp_path)  # fmt: skip
    from fsbench.lab.drivers import DRIVERS, availability

    # The code the real run would end with: 3 where this kernel has no vfat (refused).
    refused = not availability(DRIVERS["vfat"]).available or os.geteuid() != 0
    assert res.returncode == (3 if refused else 0), res.stderr
    text = res.stdout
    assert text.startswith("plan (dry run: nothing is formatted, mounted, fetched or measured)")
    assert "subjects on this kernel (2): vfat (kernel, vfat), ext4 (kernel, ext4)" in text
    assert "rounds: 4 samples a result" in text and "budget: none" in text
    assert "images: 2 of 64 MiB on /dev/shm/" in text and "mkfs.vfat" in text
    assert "skipped: vfat · metadata/chmod-flat: needs POSIX permissions (chmod)" in text
    assert "skipped: ext4 ·" not in text
    assert not (tmp_path / "o").exists()


def test_default_compare_names_the_drivers_left_out(tmp_path: Path) -> None:
    res, _ = _fsbench("compare", "--dry-run", "--json", home=tmp_path)
    plan = json.loads(res.stdout)
    assert res.returncode == plan["exit_code"] == (3 if plan["refused"] else 0), res.stderr
    measured = {s["driver"] for s in plan["subjects"]}
    left_out = {s["subject"] for s in plan["skipped"] if not s["workload"]}
    assert measured and not measured & left_out
    assert all(s["why"] for s in plan["skipped"])
    # Together they are every driver compared by default.
    from fsbench.lab.drivers import DRIVERS

    assert measured | left_out == {d.name for d in DRIVERS.values() if d.in_default}


def test_run_dry_run_on_a_directory(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    res, _ = _fsbench("run", "--target", str(tmp_path / "t"), "--workloads", "seq-read",
                      "--placement", "free,same", "--dry-run", "--json", home=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["target"] == str(tmp_path / "t") and plan["subjects"] == []
    assert plan["images"]["per_subject"] == []
    # Each placement is its own result.
    assert {w["placement"] for w in plan["workloads"]} == {"free", "same"}
    assert list((tmp_path / "t").iterdir()) == []


def test_a_vm_plan_fetches_and_boots_nothing(tmp_path: Path) -> None:
    res, _ = _fsbench("compare", "ntfs3", "ext4@host", "--kernel", "debian-6.12", "--dry-run",
                         "--json", "--workloads", "seq-write/fsync", home=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert [s["id"] for s in plan["subjects"]] == ["ext4@host"]
    (vm,) = plan["vm"]
    assert vm["kernel"] == "debian-6.12" and "booted" in vm["how"]
    assert vm["subjects"] == ["ntfs3"] or vm["skipped"]
    # A VM cannot take a file backing: refused as the real run refuses it.
    res, _ = _fsbench("compare", "ntfs3", "--kernel", "debian-6.12", "--backing", "file:/tmp",
                      "--dry-run", home=tmp_path)  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1


# --read-only with a workload that writes: the plan itself is refused, before any lab.
@pytest.mark.parametrize(
    "bad", [["--size", "12X"], ["--repeat", "0"], ["--read-only", "--workloads", "seq-write"]]
)
def test_bad_input_is_refused_as_without_dry_run(tmp_path: Path, bad: list[str]) -> None:
    res, _ = _fsbench("compare", "ext4", "--dry-run", *bad, home=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_a_refused_plan_exits_as_the_run_would_and_names_the_kernel_that_has_it(
    tmp_path: Path,
) -> None:
    """`compare ntfs ntfs-3g --dry-run` on a kernel without ntfs: the plan, then "would be
    refused" naming the VM that has it (ntfs@debian-sid, --kernel debian-sid), and exit 3 as
    the real run's refusal; a --size too small for a format: 2; a plan nothing refuses: 0."""
    from fsbench.lab.drivers import DRIVERS, availability

    if availability(DRIVERS["ntfs"]).available or os.geteuid() != 0:
        pytest.skip("not applicable here: needs root and a kernel without the ntfs driver")
    res, _ = _fsbench("compare", "ntfs", "ntfs-3g", "--dry-run", home=tmp_path)
    assert res.returncode == 3, res.stderr
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("would be refused")]
    assert (
        "(ntfs@debian-sid)" in line and "fsbench compare ntfs ntfs-3g --kernel debian-sid" in line
    )
    res, _ = _fsbench("compare", "ntfs", "ntfs-3g", "--dry-run", "--json", home=tmp_path)
    assert res.returncode == 3 and json.loads(res.stdout)["exit_code"] == 3
    res, _ = _fsbench("compare", "ntfs", "ntfs3", "--dry-run", "--json", home=tmp_path)
    assert (
        "fsbench compare ntfs ntfs3@debian-6.12 --kernel debian-sid"
        in json.loads(res.stdout)["refused"][0]
    )
    res, _ = _fsbench("compare", "ext4", "--size", "1M", "--dry-run", home=tmp_path)
    assert res.returncode == 2, res.stdout
    res, _ = _fsbench("compare", "ext4", "--dry-run", "--json", home=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["exit_code"] == 0
