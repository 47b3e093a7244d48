"""`fsbench diff A B --fail-on worse`: the regression gate a CI step runs. Stored pairs are made
by the scheduler from the fake workload (its values from FSBENCH_FAKE_VALUES), written as run
directories as `compare` writes them, and from a stored real run against itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsbench.errors import UsageError
from fsbench.pipeline import write_results
from fsbench.records.schema import Run, Subject
from fsbench.report.model.diff import FAIL_ON, check_fail_on, gate_failures, verdict_word
from fsbench.schedule.mounted import AlwaysMounted
from fsbench.schedule.runner import Runner
from fsbench.workloads.base import Target
from fsbench.workloads.fake import FakeWorkload

FIXTURES = Path(__file__).parent / "fixtures"
SIZE = 64 * 1024 * 1024


def _stored(tmp: Path, run_id: str, values: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of two fake subjects, 6 samples each, written to its own directory."""
    monkeypatch.setenv("FSBENCH_FAKE_VALUES", values)
    targets = [
        AlwaysMounted(
            Subject(id=sid, driver="fake", fs="fake", kind="fake"),
            Target(sid, str(tmp), "fake", SIZE),
        )
        for sid in ("base", "other")
    ]
    run = Runner(Run(run_id=run_id, started="2026-01-01T00:00:00"), targets, [FakeWorkload()],
                 repeat=6).execute()  # fmt: skip
    run.status = "complete"
    out = tmp / run_id
    write_results(run, out)
    return out


def _diff(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_DATA_HOME": str(home)}  # no store: run directories only
    return subprocess.run([sys.executable, "-m", "fsbench", "diff", *args], capture_output=True,
                          text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


# Six samples: from 6 a side Welch's degrees (below, Hsu's: at 5 samples of 1 % the same
# samples twice are "open", not within the ±2 % band; docs/verdicts.md).
A = "base=100,101,99,100,102,100;other=50,51,49,50,52,50"


def test_a_pair_with_a_worse_result_fails_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _stored(tmp_path, "20260101-000000-aaaa", A, monkeypatch)
    # B: `other` lost half its rate, `base` is as it was.
    worse = "base=100,101,99,100,102,100;other=25,26,24,25,26,25"
    b = _stored(tmp_path, "20260102-000000-bbbb", worse, monkeypatch)
    res = _diff(str(a), str(b), "--json", "--fail-on", "worse", home=tmp_path)
    assert res.returncode == 1, res.stderr
    rows = {r["subject"]: r["verdict"] for r in json.loads(res.stdout)["results"]}
    assert rows == {"base": "same", "other": "worse"}  # the comparison is printed all the same
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("fsbench: --fail-on worse: 1 of 2 results worse in B (other · ")
    # Without the gate, the same pair exits 0; the table marks the row ▼.
    res = _diff(str(a), str(b), home=tmp_path)
    assert res.returncode == 0 and "▼" in res.stdout, res.stderr
    # Reversed, B is better: ▲ passes the gate.
    res = _diff(str(b), str(a), "--fail-on", "worse", home=tmp_path)
    assert res.returncode == 0 and "▲" in res.stdout, res.stderr


def test_an_a_a_pair_passes_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _stored(tmp_path, "20260101-000000-aaaa", A, monkeypatch)
    b = _stored(tmp_path, "20260102-000000-bbbb", A, monkeypatch)
    res = _diff(str(a), str(b), "--json", "--fail-on", "worse", home=tmp_path)
    assert res.returncode == 0, res.stderr
    # The same samples: no side decided ("open" where the spread is wider than the ±2 % band).
    verdicts = [r["verdict"] for r in json.loads(res.stdout)["results"]]
    assert len(verdicts) == 2 and set(verdicts) <= {"same", "open"} and "same" in verdicts


def test_a_stored_real_run_against_itself_passes(tmp_path: Path) -> None:
    for name in ("compare_ext4_ntfs3g.json", "default_compare.json"):
        run = Run.model_validate_json((FIXTURES / name).read_text())
        dirs = []
        for side in ("a", "b"):
            write_results(run, tmp_path / name / side)
            dirs.append(str(tmp_path / name / side))
        res = _diff(*dirs, "--json", "--fail-on", "worse", home=tmp_path)
        assert res.returncode == 0, (name, res.stderr)
        verdicts = [r["verdict"] for r in json.loads(res.stdout)["results"]]
        assert verdicts and "worse" not in verdicts and "better" not in verdicts


def test_a_bad_gate_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = _diff("x", "y", "--fail-on", "slower", home=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "fsbench: --fail-on 'slower': give worse\n"


def test_the_gate_function_judge_shares() -> None:
    assert check_fail_on(None) is None and check_fail_on(" Worse ") == "worse"
    with pytest.raises(UsageError):
        check_fail_on("better")
    marks = (("above", True), ("below", True), ("above", False), ("same", True), ("none", True))
    words = [verdict_word(m, higher) for m, higher in marks]
    assert words == ["better", "worse", "worse", "same", "untested"]
    assert gate_failures(words, "worse") == 2
    assert gate_failures(words, None) == 0
    assert set(FAIL_ON) == {"worse"}
