"""`fsbench run --target` as an unprivileged user (nobody): on a tmpfs of its own, no loop
device, no mount of fsbench's and no drop_caches (nobody cannot; the result says so), so it
runs beside the lab scope (tests/conftest.py's BESIDE_THE_LAB), not in its queue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, asks_cold, mount_at, results_of

NOBODY = 65534


AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _nobody_python(repo: Path) -> tuple[str, dict[str, str]]:
    """An interpreter that user nobody can start with fsbench and its dependencies importable,
    from `repo` (the repository as nobody sees it, below): the interpreter and its environment.

    On a machine where the venv's interpreter links into a directory nobody cannot enter
    (pyenv under /root), `sh -c .venv/bin/python` fails for nobody, but setpriv still holds
    root's capabilities at its own execve, so the binary starts, and the loader falls back to
    the system's libpython of the same minor version: the probe below is what decides.
    """
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is missing: cannot drop to user nobody")
    python = str(repo / ".venv" / "bin" / "python")
    # The editable install names the clone's own src/, which nobody may not reach.
    env = {"PYTHONPATH": str(repo / "src")}
    probe = "import fsbench.cli.app, fsbench.pipeline, numpy, scipy, pydantic, psutil"
    proc = subprocess.run(
        [*AS_NOBODY, python, "-c", probe],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, **env},
        timeout=60,
    )
    if proc.returncode != 0:
        pytest.skip(
            f"user nobody cannot run {python} with fsbench importable "
            f"({proc.stderr.strip().splitlines()[-1:]}); the venv's interpreter must be "
            f"readable and executable by other users"
        )
    return python, env


@pytest.fixture
def nobody_dirs() -> Iterator[tuple[Path, Path, Path]]:
    """(target, home, repo): a 128 MiB tmpfs owned by nobody to measure, a writable home, and
    the repository bound read-only where nobody can enter (a clone may live below a directory
    only its owner enters, as `git clone . $(mktemp -d)/c` makes it)."""
    base = Path(tempfile.mkdtemp(prefix="fsbench-itest-nobody-"))
    os.chmod(base, 0o755)
    target, home, repo = base / "target", base / "home", base / "repo"
    target.mkdir()
    home.mkdir()
    repo.mkdir()
    os.chown(home, NOBODY, NOBODY)
    tmpfs = f"size=128m,uid={NOBODY},gid={NOBODY},mode=0755"
    subprocess.run(["mount", "--bind", str(REPO), str(repo)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(repo)], check=True)
        # A small file system of its own, so the workload's file stays small (40 % of free).
        subprocess.run(["mount", "-t", "tmpfs", "-o", tmpfs, "fsbench-itest", str(target)],
                       check=True, capture_output=True)  # fmt: skip
        yield target, home, repo
    finally:
        subprocess.run(["umount", str(target)], check=False, capture_output=True)
        # Never emptied through the bind (it is read-only, and kept when it will not let go).
        if subprocess.run(["umount", str(repo)], check=False).returncode == 0:
            shutil.rmtree(base, ignore_errors=True)


@pytest.mark.root(why="root sets up the directories and becomes user nobody to run it")
def test_run_target_as_unprivileged_user(nobody_dirs: tuple[Path, Path, Path]) -> None:
    need = shutil.which("fio")
    if need is None:
        pytest.skip("fio not installed")
    target, home, repo = nobody_dirs
    python, py_env = _nobody_python(repo)
    out = home / "out"
    env = {
        **py_env,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "LC_ALL": "C.UTF-8",
    }
    proc = subprocess.run(
        [
            *AS_NOBODY,
            python,
            "-m",
            "fsbench",
            "run",
            "--target",
            str(target),
            "--workloads",
            "seq-write,seq-read",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--min-sample-time",
            "0",
            "--out",
            str(out),
            "--db",
            str(home / "results.db"),
            "--json",
        ],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # Really written by nobody, and nothing of the workload left in the measured directory.
    assert (out / "results.json").stat().st_uid == NOBODY
    assert list(target.iterdir()) == []
    assert mount_at(str(target)) is not None

    doc = json.loads((out / "results.json").read_text())
    assert doc["status"] == "complete"
    (subject,) = doc["subjects"]
    assert subject["kind"] == "directory" and subject["status"] == "ok"
    assert subject["fs"] == "tmpfs"
    assert {r["workload"] for r in doc["results"]} == {"seq-write", "seq-read"}
    for r in doc["results"]:
        assert r["status"] == "ok", r["error"]
        assert len(r["samples"]) == 1 and r["samples"][0] > 0
    cold = [r for r in results_of(doc, str(target), "seq-read") if asks_cold(r)]
    assert cold, "no cold seq-read result"
    for r in cold:
        # Not root: caches cannot be dropped, and the result says so instead of claiming cold.
        assert r["cache"] == "cold-unverified"
        assert any("drop" in f.lower() and "cache" in f.lower() for f in r["flags"]), r["flags"]
        assert all(s["cache"] == "cold-unverified" for s in r["sample_details"])
