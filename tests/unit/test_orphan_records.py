"""`fsbench cleanup` finds a killed run whose record is in another state directory, by the copy
its mount directory keeps (lab/state.py: orphan_mount_records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsbench.lab import state


def _run(base: Path, run_id: str) -> state.StateRecord:
    mount_dir = base / f"fsbench-{run_id}"
    mount_dir.mkdir()
    rec = state.StateRecord(run_id, 1, str(base / f"img-{run_id}"), str(mount_dir))
    rec.path = str(base / "elsewhere" / f"{run_id}.json")
    (base / "elsewhere").mkdir(exist_ok=True)
    rec.save()
    return rec


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    return tmp_path


def test_a_mount_directory_keeps_a_copy_and_cleanup_finds_the_whole_record(base: Path) -> None:
    rec = _run(base, "a")
    found = state.orphan_mount_records(base)
    assert [r.run_id for r in found] == ["a"]
    # The whole record: release unmounts under, detaches over and removes exactly these.
    assert found[0].mount_dir == rec.mount_dir and found[0].image_dir == rec.image_dir
    assert found[0].path == ""  # never the other state directory's file


def test_a_copy_naming_another_directory_or_one_with_a_record_is_ignored(base: Path) -> None:
    rec = _run(base, "b")
    moved = base / "fsbench-moved"
    Path(rec.mount_dir).rename(moved)  # its copy still names the old path
    assert state.orphan_mount_records(base) == []
    live = _run(base, "c")
    named = state.StateRecord("c", 1, live.image_dir, live.mount_dir)
    named.path = str(base / "state" / "c.json")
    named.save()
    assert state.orphan_mount_records(base) == []  # the record itself is cleanup's to read
    bad = base / "fsbench-bad"
    bad.mkdir()
    (bad / state.OWNER_FILE).write_text("{not json")
    assert state.orphan_mount_records(base) == []
    assert json.loads((moved / state.OWNER_FILE).read_text())["run_id"] == "b"
