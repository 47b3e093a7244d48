"""The remedies table against the real drivers: every mount option a remedy names is one its
driver accepts, proven by mounting a small image with it (one lab per format, each remedy a
subject) and finding the mount in /proc/self/mountinfo."""

from __future__ import annotations

from typing import NoReturn

import pytest
from conftest import MiB, RunDirs, mount_at

from fsbench.lab.backing import Backing
from fsbench.lab.drivers import DRIVERS, Driver, availability
from fsbench.lab.formats import FORMATS
from fsbench.lab.lab import Lab
from fsbench.lab.loops import Knob, current, mount_bdi, queue_path, read_ahead_kb
from fsbench.lab.subject import parse_subject, with_lab_changes
from fsbench.tune.remedies import REMEDIES
from fsbench.tune.session import candidate_spec

pytestmark = pytest.mark.root


def subjects_by_format() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in REMEDIES.values():
        for name in r.drivers:
            if r.option_names():
                d = DRIVERS[name]
                out.setdefault(d.fs, []).append(f"{name}:{','.join(r.option_names())}")
    return {fs: list(dict.fromkeys(ids)) for fs, ids in out.items()}


CASES = subjects_by_format()


def skip_without_drivers(drivers: list[Driver], what: str) -> NoReturn:
    """Skip a test none of whose drivers is available here. Not applicable (a skip strict CI
    lets through, in conftest's words) only when every one is a kernel driver this kernel
    lacks; a FUSE daemon or a build missing is what CI installs, so its skip fails there."""
    lacking = {d.name: availability(d) for d in drivers}
    said = "; ".join(f"{n}: {a.reason}" for n, a in lacking.items())
    if all(a.lacks == "kernel" for a in lacking.values()):
        pytest.skip(f"not applicable here: no driver of {what} in this kernel ({said})")
    pytest.skip(f"no driver of {what} available ({said})")


def test_the_table_names_options_for_the_drivers_here() -> None:
    # The formats whose drivers this machine has (CI installs them all): each one tested below.
    assert {"ntfs", "ext4", "exfat", "xfs", "btrfs"} <= set(CASES)


@pytest.mark.parametrize("fs", sorted(CASES))
def test_every_remedy_option_mounts(dirs: RunDirs, fs: str) -> None:
    specs = [parse_subject(s) for s in CASES[fs]]
    # A driver this host lacks (ntfs3, exfat in the kernel) is for another host's tune.
    specs = [s for s in specs if availability(s.driver).available]
    if not specs:
        skip_without_drivers([s.driver for s in map(parse_subject, CASES[fs])], fs)
    size = max(FORMATS[fs].min_size, 32 * MiB)
    refused = []
    with Lab(dirs.run_id, Backing("ram"), size, tune_memory=False) as lab:
        lab.check(specs)
        for s in lab.prepare(specs):
            try:
                lab.mount(s)
            except Exception as e:  # the driver's own words: which option it refused
                refused.append(f"{s.spec.id}: {e}")
                continue
            assert mount_at(s.mountpoint) is not None, s.spec.id
            lab.unmount(s)
    assert refused == []
    dirs.assert_released()


def test_the_lab_makes_a_subjects_own_mkfs_and_device_settings(dirs: RunDirs) -> None:
    """A tune candidate's lab change, made for it alone and undone: its own image formatted
    with its mkfs options (exFAT's cluster size, read from the boot sector), read_ahead_kb on
    its loop device and on its FUSE mount's bdi; the untuned subject beside it keeps the lab's,
    and the loop device's setting is put back before it is detached."""
    plain = parse_subject("exfat-fuse")
    av = availability(plain.driver)
    if not av.available:  # a package CI installs: strict CI fails this skip, as it should
        pytest.skip(f"exfat-fuse not available: {av.reason}")
    made = with_lab_changes(
        plain, ("-c", "1M"), (Knob("device", "read_ahead_kb", "1024"),
                              Knob("mount", "read_ahead_kb", "2048"))
    )  # fmt: skip
    said = "mkfs -c 1M, loop read_ahead_kb=1024, FUSE bdi read_ahead_kb=2048"
    assert made.id == f"exfat-fuse ({said})"
    with Lab(dirs.run_id, Backing("ram"), 32 * MiB, tune_memory=False) as lab:
        lab.check([plain, made])
        a, b = lab.prepare([plain, made])
        assert b.mkfs_command is not None and b.mkfs_command[-3:-1] == ["-c", "1M"]
        for s in (a, b):
            assert s.image is not None
            boot = s.image.read_bytes()[:512]  # BytesPerSectorShift, SectorsPerClusterShift
            s.events.append(f"cluster {1 << (boot[108] + boot[109])}")
            lab.mount(s)
        # 4 KiB: mkfs.exfat's own choice for a 32 MiB volume.
        assert "cluster 4096" in a.events and "cluster 1048576" in b.events
        assert read_ahead_kb(a.device or "") == 128 and read_ahead_kb(b.device or "") == 1024
        bdis = [mount_bdi(s.mountpoint) for s in (a, b)]
        assert [int((p / "read_ahead_kb").read_text()) for p in bdis if p] == [128, 2048]
        lab.remount(b)  # a cold read's remount: the mount's bdi is new, and set again
        assert int((mount_bdi(b.mountpoint) / "read_ahead_kb").read_text()) == 2048  # type: ignore[operator]
        loop = b.device or ""
    assert read_ahead_kb(loop) == 128  # put back before the loop device was released
    dirs.assert_released()


LAB_MADE = [r for r in REMEDIES.values() if r.kind in ("mkfs-option", "block-device")]


@pytest.mark.parametrize("name", [r.name for r in LAB_MADE])
def test_every_lab_made_remedy_is_made_and_mounts(dirs: RunDirs, name: str) -> None:
    """Each mkfs or block-device remedy of the table, made by the lab for its first driver
    available here (its mkfs options accepted, its settings written) and mounted."""
    r = REMEDIES[name]
    here = [d for d in r.drivers if availability(DRIVERS[d]).available]
    if not here:
        skip_without_drivers([DRIVERS[d] for d in r.drivers], name)
    spec = candidate_spec(parse_subject(here[0]), r)
    assert spec.mkfs or spec.knobs
    with Lab(dirs.run_id, Backing("ram"), max(FORMATS[spec.driver.fs].min_size, 32 * MiB),
             tune_memory=False) as lab:  # fmt: skip
        lab.check([spec])
        (s,) = lab.prepare([spec])
        lab.mount(s)
        assert mount_at(s.mountpoint) is not None
        for k in spec.knobs:
            where = mount_bdi(s.mountpoint) if k.where == "mount" else None
            path = where / k.name if where else queue_path(s.device or "", k.name)
            assert current(path) == k.value, (name, str(path))
    dirs.assert_released()
