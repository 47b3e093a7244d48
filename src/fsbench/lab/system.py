"""Running the tools the lab needs (mkfs, losetup, mount), with bounded waits."""

from __future__ import annotations

import os
import subprocess
from subprocess import run as run_process  # named apart from this module's own run()

from fsbench.errors import LabError

# Where the lab's tools and drivers' daemons are looked for (mkfs, mount helpers live in sbin).
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_ENV = {**os.environ, "PATH": SBIN_PATH + ":" + os.environ.get("PATH", ""), "LC_ALL": "C"}


def tool(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """A tool run as the lab runs them: the sbin PATH, C locale, no stdin, output captured,
    bounded (FileNotFoundError and TimeoutExpired are the caller's to word)."""
    return run_process(
        argv, capture_output=True, text=True, timeout=timeout, env=_ENV, stdin=subprocess.DEVNULL
    )


def run(argv: list[str], timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run a tool; on failure raise LabError with its last line of stderr (one-line reason)."""
    try:
        proc = tool(argv, timeout)
    except FileNotFoundError as e:
        raise LabError(f"{argv[0]} not found") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"{' '.join(argv)} did not finish within {timeout:.0f} s") from e
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed: {last_line(proc.stderr or proc.stdout)}")
    return proc


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def _dmesg() -> list[str]:
    try:
        proc = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return proc.stdout.splitlines()


def dmesg_mark() -> str:
    """The kernel log's last line now: what comes after it is new."""
    lines = _dmesg()
    return lines[-1] if lines else ""


def dmesg_since(mark: str, words: list[str], n: int = 2) -> str:
    """The kernel's words since `mark` about this mount ('Unknown parameter'): only new lines
    naming one of `words`, so another run's messages are not blamed on this one."""
    lines = _dmesg()
    if mark in lines:
        lines = lines[len(lines) - lines[::-1].index(mark) :]
    mine = [ln.split("] ", 1)[-1] for ln in lines if any(w and w in ln for w in words)]
    return "; ".join(mine[-n:])
