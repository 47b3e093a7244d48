"""No test reads or expects a fixed path outside its own temporary directory (issue 53).

The guard (tests/fixedpaths.py, installed by tests/conftest.py) watches this process: these
tests prove it sees an open and an `exists` of a fixed path, lets the test's own paths through,
and fails a test that touched one. What the commands a test starts would touch, no hook here
sees: the scan below reads every test's source for the literal paths it could give them.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import fixedpaths
from fsbench.records.schema import Run
from fsbench.report.views.sections import render

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
# What a machine keeps between sessions: /tmp, /var/tmp and the user's home.
FIXED = re.compile(r"^(/tmp|/var/tmp)(/|$)|^~(/|$)")
HOME_CALLS = ("home", "expanduser")  # Path.home(), os.path.expanduser, Path.expanduser
PRAGMA = "fixed-path-ok:"  # on the line, with the reason: a fixed path the test owns
# What an earlier session left on one machine: the guard must see a test touch them.
LEFTOVER = "/tmp/report-dm/out"  # fixed-path-ok: never made, only looked for
ELSEWHERE = "/var/tmp/fsbench-no-such"  # fixed-path-ok: as above


def test_the_guard_sees_a_fixed_path_opened_or_asked_for() -> None:
    fixedpaths.take()
    Path(f"{LEFTOVER}/report.html").exists()
    with pytest.raises(OSError):
        Path(f"{ELSEWHERE}/results.json").read_text()
    found = fixedpaths.take()
    assert [f.split(" (at ")[0] for f in found] == [
        f"os.stat {LEFTOVER}/report.html",
        f"open {ELSEWHERE}/results.json",
    ]
    assert all("tests/unit/test_fixed_paths.py:" in f for f in found), found


def test_the_guard_sees_what_the_code_under_test_touches() -> None:
    """The snapshot of old: rendering into a fixed out directory asked whether its report.html
    existed, from the renderer (src/fsbench), on the developer's machine."""
    fixture = TESTS / "unit" / "fixtures" / "compare_ext4_ntfs3g.json"
    run = Run.model_validate_json(fixture.read_text())
    fixedpaths.take()
    render(run, Console(width=100, record=True), out_dir=LEFTOVER)
    found = fixedpaths.take()
    assert len(found) == 1 and f"{LEFTOVER}/report.html" in found[0], found
    assert "src/fsbench/report/views/sections.py:" in found[0]


def test_the_tests_own_paths_and_the_system_pass(tmp_path: Path) -> None:
    fixedpaths.take()
    (tmp_path / "a").write_text("x")
    assert (tmp_path / "a").exists() and os.listdir(tmp_path) == ["a"]
    assert Path("/proc/self/status").read_text() and Path("/dev/null").exists()
    assert (REPO / "README.md").read_text()
    assert fixedpaths.take() == []


def test_a_test_that_touches_a_fixed_path_fails(tmp_path: Path) -> None:
    """The whole path: the suite's conftest, a test that passes on its own, failed."""
    test = tmp_path / "test_fixed.py"
    test.write_text(
        "from pathlib import Path\n\n\n"
        "def test_reads_a_leftover() -> None:\n"
        f"    assert not Path('{LEFTOVER}/report.html').exists() or True\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FSBENCH_TEST_TMPDIR"}
    env.update(TMPDIR=str(tmp_path), PYTHONPATH=str(TESTS), FSBENCH_STRICT_SKIPS="0")
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n0", "-p", "conftest", "--rootdir", str(tmp_path),
         "-c", os.devnull, "-p", "no:cacheprovider", str(test)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "touched a path outside its own temporary directory" in ran.stdout, ran.stdout
    assert f"{LEFTOVER}/report.html" in ran.stdout
    assert "1 failed" in ran.stdout


def _offences(path: Path, root: Path = REPO) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if FIXED.search(node.value):
                what = repr(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in HOME_CALLS
        ):
            what = f"{node.func.attr}()"
        if what is None:
            continue
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if not any(PRAGMA in ln for ln in span):
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {what}"))
    return [f for _, f in sorted(found)]


def test_no_test_names_a_fixed_tmp_or_home_path() -> None:
    """Every literal /tmp, /var/tmp or ~ path and every Path.home()/expanduser in tests/: a
    test's paths are its tmp_path's. A path the test makes itself under a unique name says why
    on its line (`# fixed-path-ok: …`)."""
    own = Path(fixedpaths.__file__).resolve()
    found = [o for p in sorted(TESTS.rglob("*.py")) if p != own for o in _offences(p)]
    assert found == [], "\n".join(found)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    src = tmp_path / "t.py"
    src.write_text(
        f'A = "{LEFTOVER}"\nB = Path.home() / "x"\nC = "/run/fsbench"\n'
        'D = "/var/tmp/y"  # fixed-path-ok: made here\n'
    )
    got = [o.split(": ", 1)[1] for o in _offences(src, tmp_path)]
    assert got == [repr(LEFTOVER), "home()"]
