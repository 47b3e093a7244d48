"""Real VMs (issues 10 and 33): Debian unstable's 7.x kernel measuring the new in-kernel ntfs
against ntfs-3g beside ext4 on the host kernel in the same run, and Debian's 6.12 booted and
SIGKILLed mid-run; nothing left behind either way.

Each test boots one guest, so the suite boots both kernels without a boot more than before
(an emulated boot and run cost ~2 minutes here): the new kernel and driver take the full run
(split-package kernel, ntfs proven to be the kernel's driver, ntfsck, the shared image), and
6.12 the kill-and-cleanup test; 6.12's fetch and the run over several kernels are covered by
unit tests (test_kernel_fetch.py, test_vm_kernels_compare.py) and the issue's acceptance run.

The kernels are fetched on first use into the user's cache (`scripts/setup.sh --test` does it
ahead, so this test does not pay the download). On a machine without KVM the guest runs under
software emulation and its results are flagged `emulated`. Leftovers are read from the system
directly: /proc/*/environ for the VM's marker, /proc/self/mountinfo, the files themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO, need_drivers, system_mounts, wait_until

KERNEL = "debian-sid"  # the full run: the new ntfs driver
KILLED = "debian-6.12"  # the SIGKILL test: 6.12 still boots
# Small and short: the point is that it works end to end, not the figures (emulated anyway).
ARGS = [
    "--size",
    "64M",
    "--workloads",
    "seq-write/fsync,seq-read/cold",
    "--repeat",
    "1",
    "--warmup",
    "0",
    "--scale",
    "0.2",  # 5 MiB files: ntfs-3g writes ~1 MiB/s under emulation
    "--min-sample-time",
    "0.2",
    "--no-trace",  # bpftrace compiles for seconds natively, minutes emulated
    # One emulated CPU, not the sized two (size_vm, unit-tested): under emulation each vCPU is
    # a busy host thread, and beside the lab scope on a 2-CPU machine the second only slowed
    # both (alone: 64 s with one, 68 s with two).
    "--vm-cpus",
    "1",
]


def _vm_problem() -> str | None:
    if not Path("/usr/bin/qemu-system-x86_64").exists():
        return "qemu-system-x86 is not installed (scripts/setup.sh installs it)"
    if not (Path(sys.executable).parent / "vng").exists():
        return "virtme-ng is not in the environment (uv sync)"
    return None


def _command(*args: str) -> list[str]:
    # The venv's Python itself, not `uv run`: the PID killed below must be fsbench's own.
    return [sys.executable, "-m", "fsbench", *args]


def _marked(marker: str) -> list[int]:
    """Processes carrying the VM's marker in their environment (qemu, virtme-run, vng)."""
    found = []
    needle = f"FSBENCH_VM={marker}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if needle in Path(entry.path, "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _why(r: subprocess.CompletedProcess, out: Path) -> str:
    """A failed run's reasons: stderr's tail, the output's failure lines and the VM's own error
    (a guest that dies says so only in stdout and results.json, not on stderr)."""
    lines = [x for x in r.stdout.splitlines() if "fail" in x or "✗" in x or "did not" in x]
    vms = ""
    with contextlib.suppress(OSError, ValueError, KeyError):
        vms = str(json.loads((out / "results.json").read_text())["environment"]["vms"])
    return "\n".join([r.stderr[-1500:], *lines[-10:], vms[-1500:]])


def _guest_tail(work: Path) -> str:
    """The VM's console and the guest fsbench's stderr, last lines: why a guest stopped."""
    parts = []
    for f in (work / "console.log", work / "share" / "stderr", work / "share" / "rc"):
        with contextlib.suppress(OSError):
            parts.append(
                f"{f.name}: " + " | ".join(f.read_text(errors="replace").splitlines()[-8:])
            )
    return "\n".join(parts)


# A qemu of the VM's that has run this long is the guest's, not one of virtme-ng's probes.
QEMU_RUNNING_S = 3.0


def _age(pid: int) -> float:
    """Seconds since the process started (0 when it is gone)."""
    try:
        return time.time() - psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def _qemus() -> set[int]:
    out = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(entry.path, "comm").read_text().startswith("qemu-system"):
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


def _leftovers(run_id: str, state_dir: Path, kernel: str = KERNEL) -> dict[str, object]:
    marker = f"{run_id}-vm-{kernel}"
    work = Path(tempfile.gettempdir()) / f"fsbench-{marker}"
    found: dict[str, object] = {
        "processes": _marked(marker),
        "work_dir": work.exists(),
        "guest_images": (Path(tempfile.gettempdir()) / f"fsbench-{run_id}-vm-images").exists(),
        "images": Path(f"/dev/shm/fsbench-{run_id}").exists(),
        "mounts": [m.mountpoint for m in system_mounts() if run_id in m.mountpoint],
        "loops": [
            str(b)
            for b in Path("/sys/block").glob("loop*/loop/backing_file")
            if run_id in b.read_text()
        ],
        "records": sorted(p.name for p in state_dir.glob("*.json")),
    }
    return {k: v for k, v in found.items() if v}


@pytest.fixture
def vm_ready() -> None:
    why = _vm_problem()
    if why:
        pytest.fail(why)  # setup.sh installs both: missing is a broken set-up, not a skip
    need_drivers("ntfs-3g")


@pytest.mark.root
def test_the_new_ntfs_against_ntfs3g_in_an_emulated_7x_guest_beside_ext4_on_the_host(
    vm_ready: None, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FSBENCH_TEST_NO_NOISE_FLOOR")  # the host's floor is checked below
    out = tmp_path / "out"
    before = _qemus()
    t0 = time.monotonic()
    # With a host subject: one run over two kernels (ids tagged @kernel), the host's lab and
    # the guest's results merged into one results.json and report (~25 s more than without).
    subjects = ["ext4@host", f"ntfs@{KERNEL}", f"ntfs-3g@{KERNEL}"]
    r = subprocess.run(
        _command("compare", *subjects, *ARGS, "--out", str(out), "--db", str(tmp_path / "db")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=560,  # under pytest's 600 s cap: a hang fails here, with the stderr
        stdin=subprocess.DEVNULL,
    )
    wall = time.monotonic() - t0
    assert r.returncode == 0, _why(r, out)
    run = json.loads((out / "results.json").read_text())
    vm = run["environment"]["vms"][0]
    assert vm["kernel"] == KERNEL and int(vm["release"].split(".")[0]) >= 7
    # The split packages, each with its exact version.
    assert any(p.startswith("linux-modules-") for p in vm["packages"]), vm["packages"]
    assert vm["status"] == "ok" and vm["boot_seconds"] > 0
    assert vm["cpus"] == 1 and vm["memory_bytes"] >= 512 * 1024 * 1024
    ntfs, ntfs3g = f"ntfs@{KERNEL}", f"ntfs-3g@{KERNEL}"
    assert vm["subjects"] == [ntfs, ntfs3g]
    found = {s["id"]: s for s in run["subjects"]}
    assert set(found) == set(subjects)
    assert all(s["status"] == "ok" for s in found.values())
    assert found[ntfs]["kernel"] == found[ntfs3g]["kernel"] == KERNEL
    assert found["ext4@host"]["kernel"] in (None, "host")
    assert found[ntfs]["kind"] == "kernel" and found[ntfs3g]["kind"] == "fuse"
    # The kernel's ntfs served it (not ntfs-3g's mount.ntfs), proven by the kernel's lists.
    assert found[ntfs]["served_by"].startswith("kernel ntfs (mount type ntfs;"), found[ntfs]
    assert "fuseblk" in found[ntfs3g]["served_by"]
    # Both copies of the one image the host made, checked by ntfsck -n where it is fetched.
    assert found[ntfs]["image_sha256"] == found[ntfs3g]["image_sha256"] is not None
    for sid in (ntfs, ntfs3g):
        integrity = found[sid]["integrity"]
        assert integrity["status"] == "ok", integrity
        assert integrity["digest_files"] > 0
        tool = Path(integrity["checker"]["command"][0]).name
        assert tool in ("ntfsck", "ntfsfix"), integrity["checker"]
    # The guest's measuring time is the run's (the host measured only ext4 itself).
    assert run["schedule"]["spent_s"] > 0
    results = {(x["subject"], x["workload_id"]): x for x in run["results"]}
    assert set(results) == {(s, w) for s in subjects for w in ("seq-write/fsync", "seq-read/cold")}
    for key, res in results.items():
        assert res["status"] == "ok" and res["median"] > 0, key
        guest = key[0] != "ext4@host"
        if vm["virtualization"] == "emulated":
            assert ("emulated" in res["flags"]) == guest, key
    for s in subjects:
        assert results[(s, "seq-read/cold")]["cache"] == "cold-verified"
    # The host's own environment is the host's: its kernel, its noise floor.
    assert run["environment"]["kernel"] != vm["release"]
    assert run["environment"]["noise_floor"] is not None
    # The terminal and the HTML report say plainly what an emulated run is worth.
    if vm["virtualization"] == "emulated":
        assert "NOT representative" in r.stdout
        assert "NOT representative" in (out / "report.html").read_text()
    assert _leftovers(run["run_id"], state_dir) == {}
    assert _qemus() <= before
    print(f"\nVM run: {wall:.0f} s wall, boot {vm['boot_seconds']} s, {vm['virtualization']}")
    # No timed assertion (the project measures its own speed in bench/, never in tests). The
    # issue's budget is 3 minutes; without KVM here it takes ~110 s with the host's ext4
    # (boot 16-20 s, the guest's fsbench ~80 s: imports from the bytecode cache ~20 s, six fio
    # runs ~30 s, formatting, mounting and integrity checks the rest).


@pytest.mark.root
def test_sigkill_during_the_vm_then_cleanup_leaves_nothing(
    vm_ready: None, tmp_path: Path, state_dir: Path
) -> None:
    proc = subprocess.Popen(
        _command(
            "compare",
            "ntfs3",
            "--kernel",
            KILLED,
            *ARGS,
            "--out",
            str(tmp_path / "out"),
            "--db",
            str(tmp_path / "db"),
        ),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The VM's record names its process group once qemu's parent is started.
        def vm_record() -> dict | None:
            for p in state_dir.glob("*-vm-*.json"):
                rec = json.loads(p.read_text())
                if rec["processes"]:
                    return rec
            return None

        assert wait_until(lambda: vm_record() is not None, 120), "the VM was never started"
        rec = vm_record()
        assert rec is not None
        marker = rec["env_marker"]

        # The guest's qemu running for seconds (virtme-ng's own short qemu probes before the
        # boot do not count as the VM running): killed while it boots, emulated, so the kill
        # never races the guest's end. After its first line the guest's run, with fsbench's
        # own write loop and no fio to start, was over before the check below in CI.
        def booting() -> bool:
            return any(_age(pid) >= QEMU_RUNNING_S for pid in _qemus() & set(_marked(marker)))

        assert wait_until(booting, 240), "no qemu ran the guest"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        gone = wait_until(lambda: not (_qemus() & set(_marked(marker))), 1)
        work = Path(tempfile.gettempdir()) / f"fsbench-{marker}"
        assert not gone, f"qemu should outlive a SIGKILLed fsbench\n{_guest_tail(work)}"
    finally:
        if proc.poll() is None:
            proc.kill()
    run_id = marker.split("-vm-")[0]
    assert work.is_dir()
    # First as if the state directory were gone (a test's private one, deleted): cleanup finds
    # the VM's work directory by the record's copy inside it, and its qemu by the marker.
    elsewhere = tmp_path / "no-state"
    env = {**os.environ, "FSBENCH_STATE_DIR": str(elsewhere)}
    r = subprocess.run(
        _command("cleanup"), cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "killed VM processes" in r.stdout and f"removed {work}" in r.stdout, r.stdout
    assert wait_until(lambda: not _marked(marker), 15)
    assert not work.exists()
    # Then with the record: nothing left to do but the record itself.
    r = subprocess.run(_command("cleanup"), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _leftovers(run_id, state_dir, KILLED) == {}


@pytest.mark.root
def test_the_tune_plans_ntfs3_beside_ntfs3g_in_one_guest_of_the_real_kernel(
    vm_ready: None, state_dir: Path
) -> None:
    """`fsbench tune`'s VM step as far as it goes without booting: the ntfs3 kernel driver
    remedy's kernel (debian-6.12, from the cache, its digest checked) offers ntfs3, and one guest
    measures the untuned ntfs-3g and ntfs3 together, with the settings the guest's `compare`
    takes. Booting and measuring that guest is the tests above (the same VM stage) and the
    by-hand tune of docs/tune.md: a guest run costs ~2-3 minutes here, emulated, beyond what
    the suite can give one test."""
    from fsbench.cli import options
    from fsbench.cli.app import compare
    from fsbench.tune import invm
    from fsbench.tune.remedies import REMEDIES

    remedy = REMEDIES["ntfs3 kernel driver"]
    assert remedy.kernel == KILLED
    vmplan = invm.vm_plan(remedy.kernel, ["ntfs-3g", remedy.change])
    assert vmplan.host == []
    (group,) = vmplan.groups
    assert group.subjects == ["ntfs-3g", "ntfs3"] and not group.failed and not group.tag
    assert group.kernel.release.startswith("6.12.") and "ntfs3" in group.kernel.drivers()
    how = invm.virtualization()
    args = invm.guest_args(["seq-write/fsync"], 1024**3, how, 300)
    ctx = compare.make_context("compare", [*group.subjects, *args])
    o = options.parse("compare", ctx.params, tuple(group.subjects))
    # No --placement: the guest's compare places them as compare does by default (pinned), as
    # tune measures the untuned subject everywhere (issue 55: one subject, one name).
    assert o["placement"] is None and o["size"] == invm.guest_size(1024**3, how)
    # An unknown driver in the guest is refused before anything boots.
    with pytest.raises(Exception, match="unknown driver"):
        invm.vm_plan(KILLED, ["ntfs-3g", "nosuchfs"])
    assert list(state_dir.glob("*.json")) == []  # nothing was made
