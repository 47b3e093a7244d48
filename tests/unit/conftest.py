"""What the unit tests of the command line share: `sandbox`, a directory where fsbench runs
in-process as a user types it, with measuring replaced by a recorder of the plans it would
have measured, so a command that is accepted shows its plan and one that is refused leaves
nothing behind."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest

from fsbench import pipeline
from fsbench.cli import app as cli
from fsbench.records.schema import Run
from fsbench.records.store import Store


class Called(NamedTuple):
    code: int
    out: str
    err: str


@dataclass
class Sandbox:
    """The working directory (a `target` directory, a `proj` directory and a fio job file
    `job.fio` in it; HOME and the data directory below it) and the plans measuring got."""

    path: Path
    plans: list[pipeline.Plan] = field(default_factory=list)

    def files(self) -> set[str]:
        """Every path below the sandbox: what a refused command must leave as it was."""
        return {str(p.relative_to(self.path)) for p in self.path.rglob("*")}

    def fsbench(self, argv: list[str]) -> Called:
        """fsbench with these arguments, in this process: its exit code, stdout and stderr."""
        out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
        old = sys.argv
        sys.argv = ["fsbench", *argv]
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    cli.main()
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        finally:
            sys.argv = old
        out.flush()  # `hash` writes bytes to stdout's buffer, the rest text
        stdout = out.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]
        return Called(code, stdout, err.getvalue())


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "target").mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "job.fio").write_text("[j]\nrw=read\nsize=1M\n")
    monkeypatch.chdir(tmp_path)
    box = Sandbox(tmp_path)

    def record(plan: pipeline.Plan, **_kw: object) -> tuple[Run, int]:
        box.plans.append(plan)
        # Begun in the store as the real one does: tune finishes its last run there.
        run = Run(run_id=plan.run_id, started="now", status="complete")
        with Store(plan.db) as store:
            store.begin_run(run, plan.out_dir)
        return run, 0

    monkeypatch.setattr(pipeline, "execute", record)
    # cleanup is harmless here: its own tests release real leftovers.
    monkeypatch.setattr("fsbench.lab.state.cleanup_all", lambda *_a: ([], []))
    return box
