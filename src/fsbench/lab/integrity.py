"""Integrity beside speed: after a subject's workloads, did its volume come back undamaged?

Three witnesses, each able to mark the subject `integrity: failed`:

1. the format's own checker (lab/formats.py `Checker`), read-only, on the unmounted image;
2. the kernel log since the subject was first mounted: lines naming its device (`loop3`) at
   error level or worse, and warnings that speak of damage (corrupt, I/O error, checksum);
3. digests: a small integrity set fsbench writes itself right after the first mount (files of
   known content and awkward sizes, fsynced, outside the workloads' directory), tree-hash's
   tree when it is still there and on an aged image every file the aging left, re-read after
   the checker from a fresh read-only mount, so the bytes come from the device, not a cache.

A volume the checker calls damaged is not mounted again (mounting a damaged volume is where
kernel drivers hit their bugs); its digests are then reported as not checked.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from fsbench.errors import FsbenchError
from fsbench.lab import mounts, ntfsck, stacked, system
from fsbench.lab.formats import FORMATS, Checker
from fsbench.lab.lab import Lab, LabSubject
from fsbench.lab.subject import AGED_DIR
from fsbench.lab.system import SBIN_PATH, tool
from fsbench.records.notecodes import Note
from fsbench.records.schema import INTEGRITY_FAILED_FLAG, Integrity, Run, Subject
from fsbench.records.schema import Checker as CheckerRecord

KiB = 1024
MiB = 1024 * KiB
INTEGRITY_DIR = "fsbench-integrity"
# Tests only: an executable run between the unmount and the check, as `HOOK DEVICE SUBJECT`,
# to damage the image on purpose. Never set in normal use.
DAMAGE_HOOK_ENV = "FSBENCH_TEST_DAMAGE_HOOK"
# Sizes that meet block, page and extent boundaries, plus one spanning many blocks.
SET_SIZES = (1, 511, 4095, 4096, 4097, 65537, 1 * MiB + 3)
# Warning-level kernel lines that speak of damage (others, like a deprecated option, do not).
_DAMAGE_WORDS = re.compile(r"corrupt|error|checksum|invalid|bad |inconsistent|lost", re.I)


# -- the kernel log --------------------------------------------------------------------------
@dataclass(frozen=True)
class KmsgRecord:
    level: int  # 0 emerg .. 3 err, 4 warning, ... 7 debug
    seq: int
    text: str


def read_kmsg(path: str = "/dev/kmsg") -> list[KmsgRecord]:
    """Every record the kernel's ring buffer still holds (sequence numbered, with levels)."""
    out: list[KmsgRecord] = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return out
    try:
        while True:
            try:
                raw = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue  # records overwritten while reading: go on with the next
            except OSError:
                break
            if not raw:
                break
            head, _, msg = raw.decode("utf-8", "replace").partition(";")
            parts = head.split(",")
            try:
                out.append(KmsgRecord(int(parts[0]) & 7, int(parts[1]), msg.split("\n")[0]))
            except (IndexError, ValueError):
                continue
    finally:
        os.close(fd)
    return out


def kmsg_mark() -> int:
    """The last sequence number now: what has a larger one is new."""
    recs = read_kmsg()
    return recs[-1].seq if recs else -1


def kernel_lines(mark: int, device: str | None, records: list[KmsgRecord] | None = None):
    """(damage, notes): lines since `mark` naming `device`; damage = error level or worse, or a
    warning that speaks of damage. Lines about other devices (other runs) are left out."""
    if not device:
        return [], []
    word = re.compile(rf"\b{re.escape(device)}\b")
    damage, notes = [], []
    for r in read_kmsg() if records is None else records:
        if r.seq <= mark or r.level > 4 or not word.search(r.text):
            continue
        if r.level <= 3 or _DAMAGE_WORDS.search(r.text):
            damage.append(r.text)
        else:
            notes.append(r.text)
    return damage, notes


# -- the integrity set -----------------------------------------------------------------------
def set_files() -> dict[str, bytes]:
    """The integrity set: relative path -> content (deterministic, so digests are known)."""
    rnd = random.Random("fsbench integrity set")
    files = {f"f{i}-{n}.bin": rnd.randbytes(n) for i, n in enumerate(SET_SIZES)}
    files["dir/nested/text.txt"] = b"fsbench integrity set\n" * 100
    return files


def digest(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def write_set(mountpoint: str) -> dict[str, str]:
    """Write the set below the mount and fsync it; returns path (relative to the mount) ->
    XXH128 digest."""
    root = os.path.join(mountpoint, INTEGRITY_DIR)
    expected: dict[str, str] = {}
    for rel, data in set_files().items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        expected[os.path.join(INTEGRITY_DIR, rel)] = digest(data)
    return expected


def tree_hash_expected(mountpoint: str) -> dict[str, str]:
    """tree-hash's tree, when a workload left it on the volume: every digest is known from its
    layout (the marker records the byte budget and scale it was planned from)."""
    from fsbench.treehash.tree import TREE_DIR, expected_digests, plan_tree, signature

    workdir = os.path.join(mountpoint, "fsbench")
    try:
        with open(os.path.join(workdir, TREE_DIR + ".layout")) as f:
            marker = json.load(f)
        files = plan_tree(int(marker["budget"]), float(marker["scale"]))
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if signature(files) != marker.get("signature"):
        return {}
    digests = expected_digests(files)
    return {os.path.join("fsbench", TREE_DIR, f.rel): digests[f.rel] for f in files}


def aged_tree_expected(ls: LabSubject) -> dict[str, str]:
    """On an aged image, every file the aging left, as the reference mount read it right after
    aging: a driver that damaged what was already on the volume is caught too."""
    t = ls.aged_tree
    if not t or t.get("mirror"):
        return {}
    return {os.path.join(AGED_DIR, rel): dig for rel, _size, dig in t.get("files", ())}


def verify(mountpoint: str, expected: dict[str, str]) -> tuple[int, int, list[str]]:
    """(files read, bytes read, failures as 'path: why')."""
    n, total, failures = 0, 0, []
    for rel, want in expected.items():
        try:
            with open(os.path.join(mountpoint, rel), "rb") as f:
                h = xxhash.xxh3_128()
                while chunk := f.read(MiB):
                    h.update(chunk)
                    total += len(chunk)
        except OSError as e:
            failures.append(f"{rel}: {e.strerror or e}")
            continue
        n += 1
        if h.hexdigest() != want:
            failures.append(f"{rel}: XXH128 {h.hexdigest()}, expected {want}")
    return n, total, failures


# -- the checker -----------------------------------------------------------------------------
def checker_version(c: Checker) -> str | None:
    try:
        p = tool(list(c.version_argv), 10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (p.stdout + "\n" + p.stderr).splitlines():
        if re.search(r"\d+\.\d+", line):
            return line.strip()
    return None


def notable(output: str, noise: tuple[str, ...], n: int = 4) -> str:
    """The checker's own words on the problem: its lines minus banners and progress."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    keep = [ln for ln in lines if not any(ln.startswith(x) for x in noise)]
    # Answers to its own questions (-n says no to each) and banners say nothing new.
    keep = [ln for ln in keep if not ln.endswith("? no") and ln != "No change made"]
    keep = [ln for ln in keep if "**********" not in ln]
    return "; ".join(keep[:n])


def run_checker(c: Checker, device: str, timeout: float = 600) -> CheckerRecord:
    argv = c.command(device)
    rec = CheckerRecord(command=argv, version=checker_version(c), covers=c.covers)
    t0 = time.monotonic()
    try:
        p = tool(argv, timeout)
    except FileNotFoundError:
        rec.says = f"{argv[0]} not found; apt-get install {c.package}"
        return rec
    except subprocess.TimeoutExpired:
        rec.seconds = time.monotonic() - t0
        rec.says = f"did not finish within {timeout:.0f} s"
        return rec
    rec.seconds = round(time.monotonic() - t0, 3)
    rec.exit_code = p.returncode
    out = (p.stdout + "\n" + p.stderr).strip()
    rec.output_tail = "\n".join(out.splitlines()[-20:])
    if p.returncode != 0:
        rec.says = notable(out, c.noise) or f"exit status {p.returncode}"
    return rec


# -- per run ---------------------------------------------------------------------------------
@dataclass
class _Watch:
    rec: Subject
    mark: int
    expected: dict[str, str] = field(default_factory=dict)
    set_error: str | None = None


@dataclass
class Guard:
    """Follows a lab run: marks the kernel log at first mount, writes the integrity set, and
    at the end checks every subject. `enabled=False` (--no-integrity) does nothing."""

    enabled: bool = True
    watches: dict[str, _Watch] = field(default_factory=dict)

    def fetch_checkers(self, formats: set[str]) -> None:
        """NTFS's deeper checker (ntfsck), fetched on first use when a volume will need it;
        when it cannot be, the check says so and uses the format's own (check)."""
        if self.enabled:
            ntfsck.fetch_for(formats)

    def before_mount(self, ls: LabSubject, rec: Subject) -> None:
        if self.enabled and ls.spec.id not in self.watches:
            self.watches[ls.spec.id] = _Watch(rec, kmsg_mark())

    def after_mount(self, ls: LabSubject, read_only: bool) -> None:
        w = self.watches.get(ls.spec.id)
        if w is None or read_only or w.expected:
            return
        try:
            w.expected = write_set(ls.mountpoint)
        except OSError as e:
            w.set_error = f"writing the integrity set: {e.strerror or e}"

    def renewed(self, ls: LabSubject) -> None:
        """The subject's image was written over with its pristine image (targets.Rotation)
        and mounted: the integrity set goes on it again (the same bytes, the same digests), so
        the check at the end covers what the last round did to the image it ended on."""
        w = self.watches.get(ls.spec.id)
        if w is None or not w.expected:
            return
        try:
            again = write_set(ls.mountpoint)
        except OSError as e:
            w.set_error = f"writing the integrity set again: {e.strerror or e}"
            return
        if again != w.expected:
            w.set_error = "the integrity set's digests changed between rounds"

    def conclude(self, lab: Lab, run: Run, on_step: Callable[[str], None]) -> None:
        """At the end of the run: every subject checked, and its results told of a failure."""
        self.check_all(lab, on_step)
        for rec in run.subjects:
            if rec.integrity is None or rec.integrity.status != "failed":
                continue
            note = Note(code=INTEGRITY_FAILED_FLAG, params={"problem": rec.integrity.problems[0]})
            for res in run.results:
                if res.subject == rec.id:
                    res.add_note(note)

    def check_all(self, lab: Lab, on_step: Callable[[str], None] = lambda _m: None) -> None:
        if not self.enabled:
            return
        for ls in lab.subjects:
            w = self.watches.get(ls.spec.id)
            if w is None or ls.device is None:
                continue
            on_step(f"checking {ls.spec.id}: unmount, {_checker_name(ls)}, kernel log, digests")
            try:
                w.rec.integrity = check(lab, ls, w)
            except FsbenchError as e:
                w.rec.integrity = Integrity(
                    status="not-checked", not_checked=[f"the check itself failed: {e}"]
                )


# A deeper checker fsbench fetches itself, used instead of the format's own when it is fetched
# and verified: NTFS's ntfsck -n (ntfsprogs-plus) walks what ntfsfix -n never reads.
FETCHED_CHECKERS: dict[str, Callable[[], Checker | None]] = {"ntfs": ntfsck.checker}


def checker_for(fs: str) -> Checker | None:
    fetched = FETCHED_CHECKERS.get(fs)
    return (fetched() if fetched else None) or FORMATS[fs].checker


def _checker_name(ls: LabSubject) -> str:
    c = checker_for(ls.spec.driver.fs)
    return (
        " ".join(Path(c.argv[0]).name if i == 0 else a for i, a in enumerate(c.argv))
        if c
        else "no checker"
    )


def _damage_hook(device: str, subject: str) -> None:
    hook = os.environ.get(DAMAGE_HOOK_ENV)
    if hook:
        system.run([hook, device, subject], timeout=60)  # a failure is the check's: LabError


def check(lab: Lab, ls: LabSubject, w: _Watch) -> Integrity:
    t0 = time.monotonic()
    out = Integrity(status="ok")
    # A daemon killed at unmount may leave the volume unclean: the checker will say how.
    out.not_checked += [f"unmount: {n}" for n in lab.unmount(ls)]
    device = ls.device or ""
    _damage_hook(device, ls.spec.id)
    fmt = FORMATS[ls.spec.driver.fs]
    c = checker_for(fmt.name)
    if fmt.name in FETCHED_CHECKERS and c is fmt.checker:
        why = (ntfsck.last_failure() or {}).get("reason", "not fetched")
        out.not_checked.append(
            f"ntfsck (ntfsprogs-plus) is not here ({why}): the format's own checker checks far less"
        )
    if c is None:
        out.not_checked.append(f"{fmt.name} has no read-only checker declared")
    elif shutil.which(c.argv[0], path=SBIN_PATH) is None:
        out.not_checked.append(f"{c.argv[0]} is missing; apt-get install {c.package}")
    else:
        out.checker = run_checker(c, device)
        if out.checker.exit_code != 0:
            out.problems.append(f"{Path(c.argv[0]).name}: {out.checker.says}")
    if w.set_error:
        out.not_checked.append(w.set_error)
    if out.problems:
        out.not_checked.append("digests: not read (the checker found damage; not remounted)")
    elif lab.read_only:
        out.not_checked.append("digests: none (a read-only volume: fsbench wrote nothing)")
    elif not w.expected and not w.set_error:
        out.not_checked.append("digests: none (the subject never mounted: nothing was written)")
    else:
        _verify_digests(ls, w, out)
    damage, notes = kernel_lines(w.mark, ls.block_device)
    out.kernel_log = [*damage, *notes]
    out.problems += [f"kernel: {line}" for line in damage]
    out.status = "failed" if out.problems else "ok"
    out.seconds = round(time.monotonic() - t0, 3)
    return out


def _verify_digests(ls: LabSubject, w: _Watch, out: Integrity) -> None:
    """A fresh read-only mount, so every byte comes from the device."""
    d = ls.spec.driver
    opts = ",".join(o for o in ("ro", ls.spec.options) if o)
    try:
        stacked.mount(d, ls.device or "", ls.mountpoint, opts, ls.spec.transport)
    except FsbenchError as e:
        out.problems.append(f"the volume no longer mounts read-only: {e}")
        return
    try:
        expected = {**w.expected, **tree_hash_expected(ls.mountpoint), **aged_tree_expected(ls)}
        n, total, failures = verify(ls.mountpoint, expected)
        out.digest_files, out.digest_bytes, out.digest_failures = n, total, failures
        out.problems += [f"digest: {f}" for f in failures]
    finally:
        pids = mounts.processes_mentioning(ls.mountpoint) if d.kind == "fuse" else []
        stacked.unmount(d, ls.mountpoint, pids)


def directory_integrity() -> Integrity:
    """`run --target DIR`: the volume is the user's and stays mounted, so no checker runs."""
    return Integrity(
        status="not-checked",
        not_checked=[
            "an existing directory: its volume stays mounted (a checker needs it unmounted) "
            "and is not fsbench's to unmount"
        ],
    )
