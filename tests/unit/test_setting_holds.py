"""Two fsbench runs at once that both want a kernel setting held (page reporting off,
enable_uring on): whichever ends last puts the original back, never the first under the
other's measurement, and never neither (both ending together)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsbench.lab import state
from fsbench.probes import processes


@pytest.fixture
def setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # A file under a path release() accepts as tunable is not writable here; the check that
    # only /sys/module/ paths are restored is kept, so the test points it at a tmp file.
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    param = tmp_path / "page_reporting_order"
    param.write_text("9\n")
    monkeypatch.setattr(state, "TUNABLE", (str(tmp_path),))
    return param


def _live() -> Iterator[int]:
    """A live process to own a run's record (owner_alive checks pid and start time; this
    process's own records never count as another live run)."""
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


other_process = pytest.fixture(_live)
third_process = pytest.fixture(_live)


def _record(run_id: str, pid: int, tmp: Path) -> state.StateRecord:
    rec = state.StateRecord(
        run_id, pid, str(tmp / run_id / "img"), str(tmp / run_id / "mnt"),
        pid_start=processes.start_time(pid),
    )  # fmt: skip
    rec.save()
    return rec


def _held(v: str) -> bool:
    return int(v) > 10


def test_the_first_run_to_end_leaves_the_setting_to_the_one_still_running(
    setting: Path, other_process: int, tmp_path: Path
) -> None:
    first = _record("first", other_process, tmp_path)  # still running throughout
    assert state.hold(first, str(setting), "11", _held) == "9"
    second = _record("second", os.getpid(), tmp_path)
    # Held already: nothing changed, but the original is adopted from the first run.
    assert state.hold(second, str(setting), "11", _held) is None
    assert second.restore == {str(setting): "9"}
    # The second ends first (its owner is this process, so release treats it as ending).
    notes = state.release(second)
    assert setting.read_text().strip() == "11", notes
    assert any("held for run first" in n for n in notes)


def test_the_last_run_to_end_restores(
    setting: Path, other_process: int, third_process: int, tmp_path: Path
) -> None:
    # Both runs live (two processes); the first ends while the second still runs.
    first = _record("first", third_process, tmp_path)
    assert state.hold(first, str(setting), "11", _held) == "9"
    second = _record("second", other_process, tmp_path)
    assert state.hold(second, str(setting), "11", _held) is None
    notes = state.release(first)
    assert setting.read_text().strip() == "11", notes
    # Now the second ends, with no holder left (the first's record is gone): it restores.
    second = state.StateRecord.load(Path(second.path))
    notes = state.release(second)
    assert setting.read_text().strip() == "9", notes
    assert f"restored {setting} = 9" in notes


def test_a_setting_the_user_held_is_left_alone(setting: Path, tmp_path: Path) -> None:
    setting.write_text("11\n")
    rec = _record("only", os.getpid(), tmp_path)
    assert state.hold(rec, str(setting), "11", _held) is None
    assert rec.restore == {}
    state.release(rec)
    assert setting.read_text().strip() == "11"
