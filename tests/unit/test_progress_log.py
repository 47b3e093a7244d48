"""Progress where stderr is not a terminal (CI logs, `2>file`): one plain line per finished
sample with subject, workload, sample number, value or failure, and the budget left, instead
of a live display that shows nothing there. Run with the fake workload through the command."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from fsbench.cli.commands.progress import LogLines, shown
from fsbench.schedule.plan import Plan


def _run(tmp_path: Path, values: str, *args: str) -> subprocess.CompletedProcess:
    target = tmp_path / "t"
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "FSBENCH_FAKE_VALUES": values.replace("T", str(target))}  # fmt: skip
    argv = [sys.executable, "-m", "fsbench", "run", "--target", str(target), "--workloads",
            "fake", "--out", str(tmp_path / "out"), *args]  # fmt: skip
    # stderr a pipe, as in CI: no terminal.
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)  # fmt: skip


LINE = re.compile(r"^fsbench \[\d+:\d\d\] (.+) · fake · sample (\d+)(/\d+)?: (.+) · (.+)$")


def test_a_log_gets_a_line_per_finished_sample_with_the_budget_left(tmp_path: Path) -> None:
    res = _run(tmp_path, "T=100,101,99,100", "--repeat", "auto", "--max-repeat", "4",
               "--time-budget", "120")  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = [m for ln in res.stderr.splitlines() if (m := LINE.match(ln))]
    assert len(lines) >= 3  # at least the minimum rounds, one line each
    assert [int(m[2]) for m in lines] == list(range(1, len(lines) + 1))
    assert all(m[1] == str(tmp_path / "t") for m in lines)
    assert [m[4] for m in lines[:3]] == ["100 MiB/s", "101 MiB/s", "99.0 MiB/s"]
    left = [int(re.fullmatch(r"budget (\d+) s left", m[5])[1]) for m in lines]  # type: ignore[index]
    assert all(0 < s <= 120 for s in left) and left == sorted(left, reverse=True)
    assert "\x1b[" not in res.stderr  # no terminal codes in a log


def test_fixed_rounds_say_n_of_planned_and_a_failure_says_why(tmp_path: Path) -> None:
    res = _run(tmp_path, "T=-1", "--repeat", "2")
    lines = [m for ln in res.stderr.splitlines() if (m := LINE.match(ln))]
    assert lines, res.stderr
    assert lines[0][3] == "/2"
    assert lines[0][4] == "failed: fake failure: No space left on device"
    res = _run(tmp_path / "b", "T=50", "--repeat", "2")
    lines = [m for ln in res.stderr.splitlines() if (m := LINE.match(ln))]
    assert [(m[2], m[3], m[4]) for m in lines] == [
        ("1", "/2", "50.0 MiB/s"),
        ("2", "/2", "50.0 MiB/s"),
    ]


def test_log_lines_skip_a_samples_own_steps_and_say_the_labs() -> None:
    out = io.StringIO()
    log = LogLines(out, 3, None, time.monotonic())
    log.step("ext4 · seq-write/fsync · sample 2/3")
    log.step("ext4 · seq-write/fsync · warm-up")
    log.step("formatting ext4")
    assert out.getvalue().count("\n") == 1 and out.getvalue().endswith("formatting ext4\n")
    assert log.left() == "time left: after the first round"
    log.eta = 125
    assert log.left() == "~2:05 left"


def test_a_terminal_keeps_the_live_bar(tmp_path: Path) -> None:
    from fsbench.lab.backing import Backing

    plan = Plan(subjects=None, explicit=True, workloads=[], repeat=3, backing=Backing("dir", "."),
                size=0, out_dir=tmp_path, db=tmp_path / "db", command=[])  # fmt: skip
    with shown(Console(file=io.StringIO(), force_terminal=True), plan) as cb:
        assert set(cb) == {"on_step", "on_sample", "on_total", "on_eta"}
    with shown(Console(file=io.StringIO(), force_terminal=False), plan) as cb:
        assert set(cb) == {"on_step", "on_result", "on_eta"}
