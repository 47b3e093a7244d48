"""A user's own command as a workload: `--command 'CMD'`, in hyperfine's vocabulary.

* `--input DIR`: copied onto every subject before its first run (same bytes everywhere: the
  copy is hashed and compared with the original), as `<mount>/<basename of DIR>`;
* `--setup 'CMD'` once per subject after the copy, `--prepare 'CMD'` before every run (both
  untimed), `--cleanup 'CMD'` once per subject after its last sample;
* the command runs through `/bin/sh -c` in the subject's mount (fsbench's directory there,
  where the input is), in its own process group, stdin closed; its wall time is the time from
  start until its process exits, its CPU the whole process tree's (the children's rusage);
* a non-zero exit fails that subject's sample with the tail of its stderr, never a time; a
  signal is named; `--timeout S` bounds every one of these commands (the process group is
  killed: SIGTERM, then SIGKILL); anything still in the group after the command ends is
  killed, so nothing is left running on the mount;
* `--as-user USER` runs all of them as USER (fsbench's lab runs as root); the input copy is
  given to USER.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.probes import processes
from fsbench.treehash.manifest import hash_paths, walk_tree
from fsbench.workloads import base
from fsbench.workloads.base import Measurement, Target, Usage, children_usage

DEFAULT_TIMEOUT_S = 3600.0
TAIL_LINES = 3
SHELL = "/bin/sh"
# Words the shell runs itself: no program to look for on PATH.
_SHELL_WORDS = {
    *("cd", "exec", "export", "set", "test", "[", "true", "false", "for", "if", "while"),
    *("case", ":", ".", "eval", "umask", "ulimit", "env", "time", "!", "{", "("),
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class InputTree:
    """The --input directory as it was when checked: what every subject gets a copy of."""

    path: str
    files: int
    bytes: int
    digest: str  # sha256 over every file's name and XXH128 (symlinks: their target)

    @property
    def name(self) -> str:
        return os.path.basename(self.path.rstrip("/"))

    def record(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes, "digest": self.digest}


def tree_digest(root: str) -> tuple[int, int, str]:
    """(files, bytes, digest) of a tree: names relative to root, contents by XXH128."""
    files, errors = walk_tree(root)
    if errors:
        path, err = errors[0]
        raise WorkloadFailed(f"cannot list {path}: {os.strerror(err)}")
    h = hashlib.sha256()
    total = 0
    for fh in hash_paths(files):
        if fh.digest is None:
            raise WorkloadFailed(f"cannot read {fh.path}: {fh.error}")
        h.update(f"{os.path.relpath(fh.path, root)}\0{fh.digest}\0".encode())
        total += fh.size
    for dirpath, dirs, names in os.walk(root):
        for n in sorted(dirs + names):
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                h.update(f"{os.path.relpath(p, root)}\0->{os.readlink(p)}\0".encode())
    return len(files), total, h.hexdigest()


def check_input(path: Path) -> InputTree:
    if not path.is_dir():
        raise UsageError(f"--input {path}: no such directory")
    try:
        files, size, digest = tree_digest(str(path.resolve()))
    except WorkloadFailed as e:
        raise UsageError(f"--input {path}: {e}") from None
    return InputTree(str(path.resolve()), files, size, digest)


def check_user(name: str) -> pwd.struct_passwd:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise UsageError(f"--as-user {name}: no such user") from None
    if os.geteuid() != 0 and pw.pw_uid != os.geteuid():
        raise UsageError(f"--as-user {name}: only root can run commands as another user")
    return pw


def check_program(flag: str, cmd: str, inp: InputTree | None) -> None:
    """The command's first word must be something the shell can run: refused before anything
    is formatted when it is not (a typo fails here, not after the images are made)."""
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        raise UsageError(f"{flag} {cmd!r}: {e}") from None
    words = [w for w in words if not _ASSIGNMENT.match(w)]  # VAR=value cmd
    if not words:
        raise UsageError(f"{flag} {cmd!r}: no command")
    word = words[0]
    if word in _SHELL_WORDS or any(c in word for c in "$`;&|<>(){}"):
        return
    if "/" in word:
        if os.path.isabs(word):
            if os.access(word, os.X_OK):
                return
        elif inp is not None:
            # A program of the input tree, as the command will find it in the mount.
            first, _, rest = os.path.normpath(word).partition("/")
            if first == inp.name and os.path.exists(os.path.join(inp.path, rest)):
                return
        raise UsageError(f"{flag} {cmd!r}: {word}: no such program (in the mount, the input "
                         f"is {inp.name + '/' if inp else 'not given: see --input'})")  # fmt: skip
    found = subprocess.run(
        [SHELL, "-c", 'command -v "$1"', "sh", word], capture_output=True, text=True
    )
    if found.returncode != 0:
        raise UsageError(f"{flag} {cmd!r}: {word}: command not found")


@dataclass
class Outcome:
    """How one of the user's commands ended."""

    returncode: int
    seconds: float
    user_s: float
    sys_s: float
    ctx: int
    stderr_tail: str
    leftovers: int  # processes still in its group after it ended (killed)

    @property
    def used(self) -> Usage:
        return Usage(self.user_s, self.sys_s, self.ctx)

    def failure(self) -> str | None:
        rc = self.returncode
        if rc == 0:
            return None
        if rc < 0:
            why = f"killed by signal {_signame(-rc) or -rc}"
        elif rc > 128 and _signame(rc - 128):
            why = f"exit status {rc} (the shell's report of signal {_signame(rc - 128)})"
        elif rc == 127:
            why = "exit status 127 (command not found)"
        else:
            why = f"exit status {rc}"
        return f"{why}: {self.stderr_tail}" if self.stderr_tail else why


def _signame(n: int) -> str | None:
    try:
        return signal.Signals(n).name
    except ValueError:
        return None


def _tail(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - 4096))
    lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-TAIL_LINES:])[-400:]


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. A zombie does not count: it holds no file
    and no mount busy, and reaping an orphan is up to init (here it took ~1 s)."""
    return processes.group_alive(pgid)


def _wait_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)  # polling the process table: bounded by the deadline
    return True


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    """SIGTERM the whole group (a build may remove what it half made), SIGKILL what is left
    after the grace time; reap the leader."""
    _killpg(proc.pid, signal.SIGTERM)
    if not _wait_gone(proc.pid, grace_s):
        _killpg(proc.pid, signal.SIGKILL)
        _wait_gone(proc.pid, 10.0)
    proc.wait()


def _reap_group(pgid: int) -> int:
    """Kill whatever is still in the group after its leader ended (a background child the
    command left): 1 if there was something (how many is not knowable from outside), else 0."""
    if not group_alive(pgid):
        return 0
    _killpg(pgid, signal.SIGKILL)
    _wait_gone(pgid, 10.0)
    return 1


def _user_env(pw: pwd.struct_passwd | None) -> dict[str, str]:
    env = dict(os.environ)
    if pw is not None:
        env.update(HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
    return env


def run_shell(
    cmd: str, cwd: str, timeout_s: float, user: pwd.struct_passwd | None = None
) -> Outcome:
    """Run `sh -c cmd` in its own process group, bounded; wall time and the tree's CPU."""
    check = base._watchdog.get()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before = children_usage()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [SHELL, "-c", cmd],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            env=_user_env(user),
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=os.getgrouplist(user.pw_name, user.pw_gid) if user else None,
        )
        try:
            while True:
                left = t0 + timeout_s - time.perf_counter()
                try:
                    proc.wait(timeout=max(0.0, min(1.0, left)))
                    break
                except subprocess.TimeoutExpired:
                    broken = check() if check else None
                    if broken or time.perf_counter() >= t0 + timeout_s:
                        _stop_group(proc)
                        why = broken or f"did not finish within {timeout_s:g} s (--timeout)"
                        raise WorkloadFailed(
                            f"{_short(cmd)}: {why}; its process group was killed"
                        ) from None
            seconds = time.perf_counter() - t0
            used = children_usage() - before
            leftovers = _reap_group(proc.pid)
        finally:
            if proc.returncode is None:  # interrupted (SIGINT/SIGTERM): nothing stays
                _stop_group(proc)
        return Outcome(
            proc.returncode, seconds, used.user_s, used.sys_s, used.ctx, _tail(err), leftovers
        )


def _short(cmd: str, n: int = 60) -> str:
    one = " ".join(cmd.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def slug(cmd: str) -> str:
    """A result id part from the command: its words, filesystem-safe, at most 40 characters."""
    s = re.sub(r"-+", "-", re.sub(r"[^A-Za-z0-9._+-]+", "-", cmd)).strip("-")
    return (s[:40].rstrip("-") or "cmd") if s else "cmd"


@dataclass
class CommandSpec:
    command: str
    prepare: str | None = None
    setup: str | None = None
    cleanup: str | None = None
    input: InputTree | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    as_user: str | None = None


@dataclass(eq=False)
class UserCommand(base.Declared):
    # cache: Declared's "none", as the command leaves it; --prepare may do more.
    metric, unit, higher_is_better = base.TIME
    merge_extra: ClassVar[dict[str, Any]] = {"cpu_share_of_wall": "rate:cpu"}
    spec: CommandSpec
    name: str = "command"
    space_group: str | None = None  # the input tree and what the command writes: theirs
    tools: tuple[str, ...] = ()
    read_only_ok: bool = False
    _ready: dict[str, str] = field(default_factory=dict, repr=False)  # subject -> workdir
    _cleanups: dict[str, str] = field(default_factory=dict, repr=False)  # subject -> outcome

    @property
    def variant(self) -> str:
        return slug(self.spec.command)

    @property
    def description(self) -> str:
        return f"the user's command: {self.spec.command}"

    @property
    def app_comms(self) -> tuple[str, ...]:
        words = shlex.split(self.spec.command)
        return ("sh", os.path.basename(words[0])[:15]) if words else ("sh",)

    def _user(self) -> pwd.struct_passwd | None:
        return pwd.getpwnam(self.spec.as_user) if self.spec.as_user else None

    def params(self, target: Target) -> dict[str, Any]:
        s = self.spec
        return {
            "engine": "command",
            "variant": self.variant,
            "command": s.command,
            "prepare": s.prepare,
            "setup": s.setup,
            "cleanup": s.cleanup,
            "input": s.input.record() if s.input else None,
            "timeout_s": s.timeout_s,
            "as_user": s.as_user,
            "cache": self.cache,
        }

    def definition(self) -> dict[str, Any]:
        return {
            "kind": "command",
            "name": self.name,
            "id": self.id,
            "shell": SHELL,
            "cwd": "fsbench's directory in the subject's mount (the input copied there)",
            **{k: v for k, v in self.params(Target("", "", "", 0)).items() if k != "variant"},
            "cleanup_outcome": dict(self._cleanups),
        }

    def _step(self, what: str, cmd: str, target: Target) -> Outcome:
        got = run_shell(cmd, target.workdir, self.spec.timeout_s, self._user())
        bad = got.failure()
        if bad:
            raise WorkloadFailed(f"{what} {_short(cmd)!r} failed: {bad}")
        return got

    def _set_up(self, target: Target) -> None:
        """Once per subject: the input copied (and proven identical), then --setup."""
        os.makedirs(target.workdir, exist_ok=True)
        user = self._user()
        inp = self.spec.input
        if inp is not None:
            dest = os.path.join(target.workdir, inp.name)
            shutil.rmtree(dest, ignore_errors=True)
            try:
                copy_tree(inp.path, dest)
            except OSError as e:
                raise WorkloadFailed(f"copying --input: {e.strerror or e} ({e.filename})") from e
            _, _, digest = tree_digest(dest)
            if digest != inp.digest:
                raise WorkloadFailed(f"the copy of --input {inp.path} differs from the original")
        if user is not None:
            give_to(target.workdir, user)
        if self.spec.setup:
            self._step("--setup", self.spec.setup, target)
        self._ready[target.subject_id] = target.workdir

    def prepare(self, target: Target) -> None:
        if target.subject_id not in self._ready:
            self._set_up(target)
        if self.spec.prepare:
            self._step("--prepare", self.spec.prepare, target)

    def run(self, target: Target) -> Measurement:
        got = run_shell(self.spec.command, target.workdir, self.spec.timeout_s, self._user())
        bad = got.failure()
        if bad:
            raise WorkloadFailed(f"the command failed: {bad}")
        flags = []
        if got.leftovers:
            flags.append("processes-left: the command left processes running; fsbench killed them")
        return Measurement.elapsed(
            got.seconds,
            got.used,
            ops=1,  # one run: the CPU per run is the table's (CPU s/run)
            extra={"cpu_share_of_wall": round((got.user_s + got.sys_s) / got.seconds, 4)}
            if got.seconds > 0
            else {},
            flags=flags,
        )

    def close(self) -> None:
        """--cleanup once per subject, where its mount still is (after its last sample)."""
        if not self.spec.cleanup:
            return
        for subject, workdir in self._ready.items():
            # The workdir lives inside the file system: gone when it is no longer mounted.
            if not os.path.isdir(workdir):
                self._cleanups[subject] = "not run: the subject was no longer mounted"
                continue
            try:
                self._step("--cleanup", self.spec.cleanup, Target(subject, workdir, "", 0))
                self._cleanups[subject] = "ok"
            except WorkloadFailed as e:
                self._cleanups[subject] = str(e)


def copy_tree(src: str, dest: str) -> None:
    """Files, directories and symlinks with their contents and times; modes where the file
    system keeps them (FAT and ntfs-3g without permissions refuse chmod: not an error)."""
    os.makedirs(dest, exist_ok=True)
    for dirpath, dirs, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        out = os.path.normpath(os.path.join(dest, rel))
        for d in sorted(dirs):
            s, o = os.path.join(dirpath, d), os.path.join(out, d)
            if os.path.islink(s):
                os.symlink(os.readlink(s), o)
            else:
                os.makedirs(o, exist_ok=True)
        for f in sorted(files):
            s, o = os.path.join(dirpath, f), os.path.join(out, f)
            if os.path.islink(s):
                os.symlink(os.readlink(s), o)
                continue
            shutil.copyfile(s, o)
            # A file system without modes: the content is what is compared.
            with contextlib.suppress(OSError):
                shutil.copystat(s, o)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(dirpath, d))]


def give_to(root: str, pw: pwd.struct_passwd) -> None:
    """The user's own working tree; a file system without owners (FAT, ntfs-3g) keeps root's,
    and a command that cannot write there fails with its own message."""
    for dirpath, dirs, files in os.walk(root):
        for n in [dirpath, *(os.path.join(dirpath, x) for x in dirs + files)]:
            with contextlib.suppress(OSError):
                os.lchown(n, pw.pw_uid, pw.pw_gid)


def build(
    command: str,
    prepare: str | None,
    setup: str | None,
    cleanup: str | None,
    input_dir: Path | None,
    timeout_s: float | None,
    as_user: str | None,
) -> UserCommand:
    """The command workload from the checked options; refused before anything is formatted."""
    if not command.strip():
        raise UsageError("--command is empty")
    if as_user:
        check_user(as_user)
    inp = check_input(input_dir) if input_dir is not None else None
    check_program("--command", command, inp)
    for flag, cmd in (("--prepare", prepare), ("--setup", setup), ("--cleanup", cleanup)):
        if cmd is not None:
            check_program(flag, cmd, inp)
    spec = CommandSpec(
        command, prepare, setup, cleanup, inp, timeout_s or DEFAULT_TIMEOUT_S, as_user
    )
    return UserCommand(spec)
