"""Cleanup on every exit path: the end of `with Lab`, an exception, SIGINT, SIGTERM, and
SIGKILL followed by `fsbench cleanup` — which releases only what fsbench itself created."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import (
    REPO,
    MiB,
    RunDirs,
    alive,
    cmdline,
    fsbench,
    fsbench_argv,
    loop_backing,
    mount_at,
    mounts_under,
    need_drivers,
    processes_naming,
    read_record,
    release_leftovers,
    wait_until,
)

from fsbench.lab.backing import Backing
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subject

pytestmark = pytest.mark.root


def _mount_both(lab: Lab, dirs: RunDirs) -> None:
    """Prepare and mount a kernel and a FUSE subject, and check that all of it exists."""
    specs = [parse_subject("ext4"), parse_subject("ntfs-3g")]
    lab.check(specs)
    subs = lab.prepare(specs)
    for s in subs:
        lab.mount(s)
    left = dirs.leftovers()
    assert len(left["loops"]) == 2
    assert sorted(m.fstype for m in left["mounts"]) == ["ext4", "fuseblk"]
    fuse = subs[1]
    assert fuse.daemon_pid in left["processes"]
    assert left["image_dir"] and left["mount_dir"] and left["record"]


def test_normal_end_of_with_releases_everything(dirs: RunDirs) -> None:
    need_drivers("ext4", "ntfs-3g")
    with Lab(dirs.run_id, Backing("ram"), 64 * MiB) as lab:
        _mount_both(lab, dirs)
    dirs.assert_released()


def test_exception_inside_with_releases_everything(dirs: RunDirs) -> None:
    need_drivers("ext4", "ntfs-3g")

    class Boom(Exception):
        pass

    with pytest.raises(Boom), Lab(dirs.run_id, Backing("ram"), 64 * MiB) as lab:
        _mount_both(lab, dirs)
        # A process still using the FUSE mount when the exception unwinds the lab.
        busy = subprocess.Popen(["sleep", "0.5"], cwd=lab.subjects[1].workdir)
        raise Boom
    busy.wait()
    dirs.assert_released()


# -- signals to a real `uv run fsbench compare` ----------------------------------------------
def _start_compare(tmp_path: Path) -> subprocess.Popen:
    need_drivers("ext4", "ntfs-3g")
    return subprocess.Popen(
        fsbench_argv(
            "compare",
            "ext4",
            "ntfs-3g",
            "--size",
            "256M",
            "--repeat",
            "50",
            "--warmup",
            "0",
            "--min-sample-time",
            "0.2",
            # fio's writer (:psync), not the native loop: a signal lands beside a child process
            "--workloads",
            "seq-write/fsync:psync,seq-read/cold",
            "--out",
            str(tmp_path / "out"),
            "--db",
            str(tmp_path / "results.db"),
        ),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job has
    )


def _wait_mounted(proc: subprocess.Popen, state_dir: Path) -> RunDirs:
    """Wait until both subjects are mounted under the run's own directory."""
    rec = read_record(state_dir)
    dirs = RunDirs.of(rec["run_id"], state_dir)
    assert rec["mount_dir"] == dirs.mount_dir and rec["image_dir"] == dirs.image_dir
    ok = wait_until(lambda: len(mounts_under(dirs.mount_dir)) == 2 or proc.poll() is not None, 90)
    assert ok and proc.poll() is None, f"fsbench did not mount both subjects: {_finish(proc)}"
    return dirs


def _finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"fsbench did not exit within {timeout} s; stderr: {err[-2000:]}")
    return proc.returncode, out, err


def _fio_running(mount_dir: str) -> bool:
    return any(Path("".join(cmdline(p)[:1])).name == "fio" for p in processes_naming(mount_dir))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_releases_everything_and_keeps_results(
    tmp_path: Path, state_dir: Path, sig: signal.Signals
) -> None:
    proc = _start_compare(tmp_path)
    try:
        dirs = _wait_mounted(proc, state_dir)
        daemons = [
            p for p in processes_naming(dirs.mount_dir) if "ntfs-3g" in "".join(cmdline(p)[:1])
        ]
        assert daemons, "no ntfs-3g daemon found while mounted"
        if sig == signal.SIGINT:
            # As Ctrl-C in a terminal: the whole process group (uv, fsbench, fio) gets it, and
            # uv forwards it once more: fsbench sees it twice.
            os.killpg(proc.pid, sig)
        else:
            # As `kill` or a service manager: only the process started, in the middle of a
            # measurement; uv forwards it to fsbench.
            assert wait_until(lambda: _fio_running(dirs.mount_dir), 60), "fio never started"
            os.kill(proc.pid, sig)
        code, _out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        release_leftovers(state_dir)

    assert code == 130, f"exit {code}; stderr: {err[-2000:]}"
    assert "Traceback" not in err
    assert "interrupted" in err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["status"] == "incomplete"
    assert results["run_id"] == dirs.run_id
    assert results["environment"]["interrupted_by"] == sig.name
    assert {s["id"] for s in results["subjects"]} == {"ext4", "ntfs-3g"}
    dirs.assert_released()
    assert not any(alive(p) for p in daemons)


def _make_foreign(tmp_path: Path) -> tuple[str, str, Path]:
    """A loop device and a mount that fsbench did not create (outside its directories)."""
    image = tmp_path / "foreign.img"
    with open(image, "wb") as f:
        f.truncate(32 * MiB)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
    mnt = tmp_path / "foreign-mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "ext4", dev, str(mnt)], check=True, capture_output=True)
    (mnt / "keep").write_text("still here")
    return dev, str(image), mnt


def _drop_foreign(dev: str, mnt: Path) -> None:
    if mount_at(str(mnt)) is not None:
        subprocess.run(["umount", str(mnt)], check=False)
    subprocess.run(["losetup", "-d", dev], check=False)


def test_sigkill_leaves_resources_and_cleanup_releases_only_its_own(
    tmp_path: Path, state_dir: Path
) -> None:
    dev, image, mnt = _make_foreign(tmp_path)
    proc = _start_compare(tmp_path)
    try:
        dirs = _wait_mounted(proc, state_dir)
        rec = json.loads(Path(dirs.record).read_text())
        assert cmdline(rec["pid"]) and "fsbench" in " ".join(cmdline(rec["pid"]))
        os.kill(rec["pid"], signal.SIGKILL)  # fsbench itself, not uv: nothing can run after
        code, _out, _err = _finish(proc)
        assert code in (137, -9), code
        assert wait_until(lambda: not alive(rec["pid"]), 10)

        # SIGKILL leaves everything behind: that is what `fsbench cleanup` is for.
        left = dirs.leftovers()
        assert len(left.get("loops", [])) == 2, left
        assert sorted(m.fstype for m in left.get("mounts", [])) == ["ext4", "fuseblk"], left
        daemons = [p for p in left.get("processes", []) if "ntfs-3g" in "".join(cmdline(p)[:1])]
        assert daemons, f"no ntfs-3g daemon left running: {left}"
        assert left.get("image_dir") and left.get("mount_dir") and left.get("record"), left

        # Cleanup must not need the record's own file: as when the run's FSBENCH_STATE_DIR is
        # not cleanup's (a killed test's), the copy in its mount directory is enough.
        Path(dirs.record).unlink()
        res = fsbench("cleanup", timeout=120)
        assert res.returncode == 0, res.stderr
        assert dirs.run_id in res.stdout
        assert "Traceback" not in res.stderr
        dirs.assert_released()
        assert all(not alive(p) for p in daemons)

        # What fsbench did not create is untouched.
        assert loop_backing(dev) == image
        m = mount_at(str(mnt))
        assert m is not None and m.source == dev
        assert (mnt / "keep").read_text() == "still here"

        again = fsbench("cleanup")
        assert again.returncode == 0 and "nothing to clean up" in again.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        release_leftovers(state_dir)
        _drop_foreign(dev, mnt)
    assert mount_at(str(mnt)) is None and loop_backing(dev) != image


def test_cleanup_spares_lookalike_mounts_loops_and_daemons(tmp_path: Path, dirs: RunDirs) -> None:
    """Resources whose paths merely start like a dead run's directories are not its own.

    A lab is abandoned (as after SIGKILL) with a FUSE mount; beside it live a loop device over
    `<image_dir>-other.img` and a FUSE mount at `<mount_dir>-other` with their own daemon.
    """
    need_drivers("fuse2fs")
    dead = subprocess.Popen(["true"])
    dead.wait()

    lab = Lab(dirs.run_id, Backing("ram"), 64 * MiB)
    lab.__enter__()
    other_img = Path(dirs.image_dir + "-other.img")
    other_mnt = Path(dirs.mount_dir + "-other")
    other_dev = None
    try:
        specs = [parse_subject("fuse2fs")]
        lab.check(specs)
        (s,) = lab.prepare(specs)
        lab.mount(s)
        assert s.daemon_pid and alive(s.daemon_pid)
        # Abandon the lab as a killed process would: its record names a dead owner.
        assert lab.record is not None
        lab.record.pid = dead.pid
        lab.record.save()
        lab.record = None

        # A look-alike of our own making: same format, its own loop and FUSE daemon.
        with open(other_img, "wb") as f:
            f.truncate(32 * MiB)
        other_dev = subprocess.run(
            ["losetup", "--find", "--show", str(other_img)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", other_dev], check=True, capture_output=True)
        other_mnt.mkdir()
        subprocess.run(["fuse2fs", other_dev, str(other_mnt)], check=True, capture_output=True)
        assert mount_at(str(other_mnt)) is not None
        other_daemons = processes_naming(str(other_mnt))
        assert other_daemons

        res = fsbench("cleanup", timeout=120)
        assert res.returncode == 0, res.stderr
        assert dirs.run_id in res.stdout
        dirs.assert_released()
        assert wait_until(lambda: not alive(s.daemon_pid or 0), 10)

        assert mount_at(str(other_mnt)) is not None
        assert all(alive(p) for p in other_daemons)
        assert loop_backing(other_dev) == str(other_img)
        assert other_img.exists()
    finally:
        if lab.record is not None:
            lab.close()
        if mount_at(str(other_mnt)) is not None:
            subprocess.run(["umount", str(other_mnt)], check=False)
        if other_dev:
            subprocess.run(["losetup", "-d", other_dev], check=False)
        other_img.unlink(missing_ok=True)
        if other_mnt.exists():
            wait_until(lambda: mount_at(str(other_mnt)) is None, 10)
            other_mnt.rmdir()


def _leak_frozen(image_dir: Path, name: str, tmp_path: Path) -> str:
    """What a run without deferred signals left after an interrupt in the freeze window: an
    ext4 image frozen, unmounted lazily and deleted with its directory; the superblock lives on
    with no mount and pins the loop device and the image."""
    image_dir.mkdir()
    image = image_dir / name
    with open(image, "wb") as f:
        f.truncate(32 * MiB)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
    mnt = tmp_path / f"mnt-{image_dir.name}"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True, capture_output=True)
    subprocess.run(["fsfreeze", "--freeze", str(mnt)], check=True)
    subprocess.run(["umount", "-l", str(mnt)], check=True)
    subprocess.run(["losetup", "-d", dev], check=False)  # autoclear: it stays, pinned
    image.unlink()
    image_dir.rmdir()
    return dev


def _superblock_alive(dev: str) -> bool:
    return Path("/proc/fs/ext4", Path(dev).name).exists()


def _rescue(dev: str, tmp_path: Path) -> None:
    if loop_backing(dev) is None:
        return
    where = tmp_path / f"rescue-{Path(dev).name}"
    where.mkdir(exist_ok=True)
    if subprocess.run(["mount", dev, str(where)], capture_output=True).returncode == 0:
        subprocess.run(["fsfreeze", "--unfreeze", str(where)], capture_output=True)
        subprocess.run(["umount", str(where)], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_cleanup_thaws_and_releases_a_frozen_orphan_and_nothing_else(
    tmp_path: Path, state_dir: Path, run_id: str
) -> None:
    """No record names it any more; `fsbench cleanup` still finds the loop over the deleted
    fsbench image, mounts it again, thaws, unmounts and detaches it. A loop over a deleted
    image of another program, frozen the same way, is left alone."""
    ours = Path(f"/dev/shm/fsbench-{run_id}")
    theirs = Path(f"/dev/shm/other-{run_id}")
    devs: list[str] = []
    try:
        devs.append(_leak_frozen(ours, "0-ext4.img", tmp_path))
        devs.append(_leak_frozen(theirs, "0-ext4.img", tmp_path))
        orphan, other = devs
        assert loop_backing(orphan) == f"{ours}/0-ext4.img" and _superblock_alive(orphan)
        assert _superblock_alive(other)

        res = fsbench("cleanup", timeout=120)
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
        line = next((ln for ln in res.stdout.splitlines() if orphan in ln), "")
        assert "thawed" in line and "detached" in line and str(ours) in line, res.stdout
        assert wait_until(lambda: loop_backing(orphan) is None, 10), res.stdout
        assert not _superblock_alive(orphan)

        # Not an fsbench image: untouched, still frozen and pinned.
        assert other not in res.stdout
        assert loop_backing(other) == f"{theirs}/0-ext4.img" and _superblock_alive(other)
    finally:
        for dev in devs:
            _rescue(dev, tmp_path)
