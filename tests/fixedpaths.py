"""No test reads, writes or expects to exist a fixed path outside its own temporary directory.

A test that opens /tmp/report-dm/out/report.html, or asks whether it exists, passes on the
machine where an earlier run left it and fails on a fresh one (issue 53). This module watches
the test process: an audit hook (`sys.addaudithook`) sees every open, listdir, scandir, mkdir,
remove, rename, chmod, rmtree and copy, and a wrapper of `os.stat`/`os.lstat` sees what the
audit events do not, `Path.exists`, `os.path.isdir` and their kind. An access counts when the
innermost frame outside the standard library that made it is not an installed library's (it is
a test's, or fsbench's under test): what a library does for itself (matplotlib's font cache,
its config) is the library's. Allowed (`allowed`):

- the system: /proc, /sys, /dev (and /dev/shm, the RAM backing), /run (mounts and state), the
  installed system (/usr, /etc, /lib*, /bin, /sbin, /opt, Python's own prefixes),
  /var/lib/fsbench (setup.sh's private apt lists) and /nonexistent (Debian's path that never
  exists: what a test gives a command to be refused);
- the repository itself (its fixtures, its .venv);
- the session's temporary directory ($TMPDIR, under which pytest makes every tmp_path) and the
  directories a test made itself under a unique name (`own`);
- a program looked for along $PATH (its stat only);
- what `scripts/setup.sh --test` fetches and builds into the user's cache,
  $XDG_CACHE_HOME/fsbench (guest kernels, libfuse, fuse2fs, ntfsck): the README's test
  command makes it, and `.ci/run` makes it afresh.

A path only passed along and never touched is not seen. What the commands a test starts (a
subprocess) touch is theirs: `tests/unit/test_fixed_paths.py` reads the tests' sources for the
literal paths they could be given. The suite's conftest fails the test that touched one
(`take`), or the collection when a module did at import.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_HERE = str(Path(__file__).resolve())

# /nonexistent: Debian's name for a path that never exists, a test's path to be refused.
SYSTEM = ("/proc", "/sys", "/dev", "/run", "/usr", "/etc", "/lib", "/lib64", "/bin", "/sbin",
          "/opt", "/var/lib/fsbench", "/nonexistent")  # fmt: skip
# The audit events that name a path, and which of their arguments are paths.
EVENTS: dict[str, tuple[int, ...]] = {
    "open": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.truncate": (0,),
    "os.symlink": (0, 1),
    "os.link": (0, 1),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.copytree": (0, 1),
    "shutil.move": (0, 1),
    "glob.glob": (0,),
}


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _ancestor(path: str, roots: tuple[str, ...]) -> bool:
    return path == "/" or any(r.startswith(path + "/") for r in roots)


@functools.lru_cache(maxsize=4096)
def _real(name: str) -> str:
    return os.path.realpath(name)


def _stdlib_dirs() -> tuple[str, ...]:
    # The base interpreter's: a venv's platstdlib would take its site-packages in too.
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    return tuple({os.path.realpath(paths["stdlib"]), os.path.realpath(paths["platstdlib"])})


class Guard:
    """The paths this session may touch, and what the project touched outside them."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.owned: list[str] = []
        self.lock = threading.Lock()
        self.stdlib = _stdlib_dirs()
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        self.fixed: tuple[str, ...] = ()
        self.fast: tuple[str, ...] = ()  # the fixed roots with their slash: one startswith
        self.set_fixed((*SYSTEM, str(REPO), *(p for p in prefixes if p not in ("/", ""))))
        self._tmp = ("", "")
        self.busy = threading.local()  # the guard's own looks at paths are not watched

    def set_fixed(self, roots: tuple[str, ...]) -> None:
        self.fixed = roots
        self.fast = tuple(r.rstrip("/") + "/" for r in roots)

    def allowed(self) -> tuple[str, ...]:
        tmp = tempfile.gettempdir()
        if self._tmp[0] != tmp:
            self._tmp = (tmp, os.path.realpath(tmp))
        # Read at each look: a test's monkeypatched XDG_CACHE_HOME is its own.
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        return (*self.fixed, *self._tmp, os.path.join(cache, "fsbench"), *self.owned)

    def own(self, path: str | os.PathLike[str]) -> None:
        """A directory this test made itself under a name no one else uses (a disk directory
        when the session's TMPDIR is memory): its own, like a tmp_path."""
        self.owned.append(os.path.abspath(path))

    def _who(self) -> str | None:
        """The project's frame that made this access, "file:line", or None when the innermost
        frame outside the standard library (and this module) is an installed library's."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if "-packages/" in name or name.startswith("<frozen importlib"):
                return None  # a library's (site-packages), or an import looking along sys.path
            if name == _HERE or name.startswith("<frozen") or _under(_real(name), self.stdlib):
                frame = frame.f_back
                continue
            where = os.path.relpath(name, REPO) if _under(name, (str(REPO),)) else name
            return f"{where}:{frame.f_lineno}"
        return None

    def check(self, what: str, path: object) -> None:
        if path is None or isinstance(path, int):
            return  # a file descriptor: its path was looked at when it was opened
        if isinstance(path, str) and path.startswith(self.fast) and "/." not in path:
            return  # the common case at once (a path to normalise takes the long way)
        if getattr(self.busy, "on", False):
            return
        self.busy.on = True
        try:
            self._check(what, path)
        finally:
            self.busy.on = False

    def _check(self, what: str, path: object) -> None:
        try:
            p = os.fsdecode(os.fspath(path))  # type: ignore[arg-type]
        except TypeError:
            return
        if not p:
            return
        if p[0] != "/":
            try:
                p = os.path.join(os.getcwd(), p)
            except OSError:
                return  # the working directory is gone: nothing fixed to name
        if "/." in p or "//" in p:
            p = os.path.normpath(p)
        if p.startswith(self.fast) or p in self.fixed:
            return  # the common case, without building the rest

        allowed = self.allowed()
        if _under(p, allowed):
            return
        if what.startswith("os.") and what.endswith("stat"):
            if _ancestor(p, allowed):
                return  # a parent of an allowed directory, looked at on the way (Path.resolve)
            if os.path.dirname(p) in os.environ.get("PATH", "").split(os.pathsep):
                return  # a program looked for along $PATH (shutil.which)
        who = self._who()
        if who is not None:
            with self.lock:
                self.found.append(f"{what} {p} (at {who})")

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        where = EVENTS.get(event)
        if where is None:
            return
        if event.startswith("os.") and len(args) > 1 and isinstance(args[-1], int):
            return  # relative to a dir_fd: the directory was looked at when it was opened
        for i in where:
            if i < len(args):
                self.check(event, args[i])

    def take(self) -> list[str]:
        """What was touched since the last call, and forget it."""
        with self.lock:
            found, self.found = self.found, []
        return found


GUARD = Guard()


def _watched(stat: Callable[..., os.stat_result], what: str) -> Callable[..., os.stat_result]:
    @functools.wraps(stat)
    def watched(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if kwargs.get("dir_fd") is None:
            GUARD.check(what, path)
        return stat(path, *args, **kwargs)

    return watched


def install() -> None:
    """Watch this process for the rest of its life (an audit hook cannot be removed)."""
    if getattr(os.stat, "__wrapped__", None) is not None:
        return  # installed already (the conftest imported twice)
    # The session's temporary directory as it is now, also while a test has pointed tempfile
    # (or $TMPDIR) at a directory of its own below it.
    tmp = tempfile.gettempdir()
    GUARD.set_fixed((*GUARD.fixed, tmp, os.path.realpath(tmp)))
    sys.addaudithook(GUARD.audit)
    for name in ("stat", "lstat"):
        original = getattr(os, name)
        wrapped = _watched(original, f"os.{name}")
        setattr(os, name, wrapped)
        # Code that asks `os.stat in os.supports_dir_fd` gets the same answer as before.
        for supports in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks):
            if original in supports:
                supports.add(wrapped)


own = GUARD.own
take = GUARD.take
