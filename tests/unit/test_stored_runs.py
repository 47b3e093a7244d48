"""Runs stored before a field existed still read right: an old ntfs-3g run (no `quirks` on its
subjects) gets its driver's quirks from the driver table when it is loaded, so `show` and
`report` keep the big_writes remark the run would carry today."""

from __future__ import annotations

import json
from pathlib import Path

from fsbench.cli.commands.report import with_driver_quirks
from fsbench.lab.drivers import DRIVERS
from fsbench.records.schema import Quirk, Run
from fsbench.report.model.explain import explain_run

FIXTURE = Path(__file__).parent / "fixtures" / "default_compare.json"


def _old_run() -> Run:
    """The stored default comparison as a run written before `Subject.quirks` existed."""
    doc = json.loads(FIXTURE.read_text())
    for s in doc["subjects"]:
        s.pop("quirks", None)
    return Run.model_validate(doc)


def _ntfs3g_sentences(run: Run) -> str:
    return " ".join(e.sentence() for e in explain_run(run) if e.subject == "ntfs-3g")


def test_an_old_run_gets_its_drivers_quirks_on_load() -> None:
    run = _old_run()
    ntfs = next(s for s in run.subjects if s.id == "ntfs-3g")
    assert ntfs.quirks == []  # stored before subjects carried quirks
    assert "big_writes" not in _ntfs3g_sentences(run)
    with_driver_quirks(run)
    assert ntfs.quirks == list(DRIVERS["ntfs-3g"].quirks) != []
    assert "big_writes" in _ntfs3g_sentences(run)
    ext4 = next(s for s in run.subjects if s.id == "ext4")
    assert ext4.quirks == []  # a driver without quirks gets none


def test_recorded_quirks_are_kept() -> None:
    run = _old_run()
    ntfs = next(s for s in run.subjects if s.id == "ntfs-3g")
    own = Quirk.model_validate(DRIVERS["ntfs-3g"].quirks[0].model_dump() | {"name": "recorded"})
    ntfs.quirks = [own]
    assert with_driver_quirks(run).subjects[run.subjects.index(ntfs)].quirks == [own]
