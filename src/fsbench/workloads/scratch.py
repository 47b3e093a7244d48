"""The tmpfs scratch area a workload keeps beside the target (the copies' source side):
/dev/shm/fsbench-src-<pid>, private to this process, shared by every subject, removed at close
and at exit; areas of processes that no longer exist are reaped when a new one is made."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil

SOURCE_ROOT = "/dev/shm"


class SourceArea:
    """/dev/shm/fsbench-src-<pid>: the copies' tmpfs side, removed at close and at exit.

    A process killed by SIGKILL cannot clean up, so creating the area also removes areas of
    processes that no longer exist.
    """

    def __init__(self, root: str = SOURCE_ROOT) -> None:
        self.root = root
        self._at_exit = False

    @property
    def path(self) -> str:
        return os.path.join(self.root, f"fsbench-src-{os.getpid()}")

    def ensure(self, sub: str) -> str:
        if not os.path.isdir(self.path):
            reap_stale_areas(self.root)
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        if not self._at_exit:
            atexit.register(self.release)
            self._at_exit = True
        return os.path.join(self.path, sub)

    def release(self, sub: str | None = None) -> None:
        """Remove one entry of the area, or (sub None) the whole area."""
        if sub is None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        remove_path(os.path.join(self.path, sub))
        with contextlib.suppress(OSError):
            os.rmdir(self.path)  # only when nothing else lives there


_AREAS: dict[str, SourceArea] = {}


def source_area(root: str = SOURCE_ROOT) -> SourceArea:
    if root not in _AREAS:
        _AREAS[root] = SourceArea(root)
    return _AREAS[root]


def reap_stale_areas(root: str) -> list[str]:
    """Remove fsbench-src-<pid> directories whose process is gone."""
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        pid_text = name.removeprefix("fsbench-src-")
        if pid_text == name or not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed


def remove_path(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
