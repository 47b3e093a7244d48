"""The remedies table against the real drivers: every mount option a remedy names is one its
driver accepts, proven by mounting a small image with it (one lab per format, each remedy a
subject) and finding the mount in /proc/self/mountinfo."""

from __future__ import annotations

import pytest
from conftest import MiB, RunDirs, mount_at

from fsbench.lab.backing import Backing
from fsbench.lab.drivers import DRIVERS, availability
from fsbench.lab.formats import FORMATS
from fsbench.lab.lab import Lab
from fsbench.lab.subject import parse_subject
from fsbench.tune.remedies import REMEDIES

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


def test_the_table_names_options_for_the_drivers_here() -> None:
    # The formats whose drivers this machine has (CI installs them all): each one tested below.
    assert {"ntfs", "ext4", "exfat", "xfs", "btrfs"} <= set(CASES)


@pytest.mark.parametrize("fs", sorted(CASES))
def test_every_remedy_option_mounts(dirs: RunDirs, fs: str) -> None:
    specs = [parse_subject(s) for s in CASES[fs]]
    # A driver this host lacks (ntfs3, exfat in the kernel) is for another host's tune.
    specs = [s for s in specs if availability(s.driver).available]
    if not specs:
        pytest.skip(f"NOT_APPLICABLE: no driver of {fs} named by a remedy is available here")
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
