"""The run's subjects as the runner drives them (mounted.Mounted): one `LabMounted` per lab
subject (mounted, probed, its integrity set written, its file budget, how to release it and
bring it back), or one directory (`run --target`) as `AlwaysMounted`. Each hands the sampler a
`workloads.base.Target`, where a workload runs.

The pipeline builds them inside the lab and hands them to the runner.
"""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

from fsbench.errors import EnvironmentProblem, LabError, UsageError
from fsbench.lab import loops
from fsbench.lab.backing import copy_over, format_size, settle
from fsbench.lab.cold import flush_device
from fsbench.lab.drivers import driver_version, serving_proof
from fsbench.lab.integrity import Guard, directory_integrity
from fsbench.lab.lab import Lab, LabSubject, drop_caches
from fsbench.lab.subject import AGED_DIR
from fsbench.probes.procfs import ProcFS
from fsbench.probes.semantics import capabilities, probe_semantics
from fsbench.records.schema import Aging, Feature, Run, Subject
from fsbench.records.store import Store
from fsbench.schedule.mounted import AlwaysMounted, Mounted
from fsbench.schedule.phases import PhaseClock
from fsbench.schedule.plan import Plan
from fsbench.workloads.agedtree import MIRROR_DIR
from fsbench.workloads.base import FILE_FRACTION, AgedTree, Target, free_bytes

MiB = 1024 * 1024


def _subject_record(ls: LabSubject) -> Subject:
    d = ls.spec.driver
    return Subject(
        id=ls.spec.id,
        driver=d.name,
        fs=d.fs,
        kind=d.kind,
        mount_options=ls.spec.options,
        transport=ls.spec.transport or None,
        driver_version=driver_version(d),
        mkfs_command=ls.mkfs_command,
        image_sha256=ls.image_sha256,
        quirks=list(d.quirks),
        aging=Aging.model_validate(ls.aging) if ls.aging else None,
    )


def lab_targets(
    plan: Plan,
    lab: Lab,
    run: Run,
    store: Store,
    on_step: Callable[[str], None],
    guard: Guard | None = None,
    clock: PhaseClock | None = None,
) -> list[Mounted]:
    assert plan.subjects is not None
    guard = guard or Guard(enabled=False)
    ph = (clock or PhaseClock()).phase  # the set-up's steps (Schedule.setup)
    on_step(
        f"formatting {len({(s.driver.fs, s.mkfs) for s in plan.subjects})} image(s) of "
        f"{format_size(plan.size)}"
    )
    with ph("images"):
        guard.fetch_checkers({s.driver.fs for s in plan.subjects})
        lab_subjects = lab.prepare(plan.subjects)
    # --scale grows every workload's files alike (longer samples; > 2.5 fills the image).
    file_size = max(MiB, int(plan.size * FILE_FRACTION * plan.scale) // MiB * MiB)
    file_size = aged_budget(lab_subjects, file_size)
    targets = []
    rejected: list[str] = []
    for ls in lab_subjects:
        rec = _subject_record(ls)
        # Listed before mounting: an interrupt during the mount still names the subject.
        run.subjects.append(rec)
        on_step(f"mounting {ls.spec.id}")
        try:
            with ph("integrity set"):
                guard.before_mount(ls, rec)
            with ph("mounts"):
                lab.mount(ls)
            rec.effective_mount_options = ls.entry.effective_options if ls.entry else None
            if ls.entry:
                try:
                    rec.served_by = serving_proof(ls.spec.driver, ls.entry.fstype)
                except ValueError as e:
                    raise LabError(str(e)) from None
            with ph("semantics"):
                rec.semantics = probe_semantics(ls.mountpoint, ls.block_device, lab.read_only)
            with ph("integrity set"):
                guard.after_mount(ls, lab.read_only)
        except LabError as e:
            rec.status, rec.error = "failed", f"mount failed: {e}"
            # mount(8) says "bad option" whatever went wrong, so ask the driver instead: a
            # subject that mounts once its options are left out was refused for its options.
            if plan.explicit and ls.spec.options and lab.mounts_without_options(ls):
                rejected.append(f"{ls.spec.id}: {e}")
        store.save_subject(run.run_id, rec)
        tree = aged_tree(ls)
        between = plan.backing.kind == "device"  # one device: released between turns
        targets.append(LabMounted(lab, ls, rec, file_size, plan.scale, tree, between))
    if rejected:
        # The user named an option the driver refuses: bad input, not a measurement failure.
        raise UsageError(f"mount option rejected by the driver: {rejected[0]}")
    return targets


def aged_budget(subjects: list[LabSubject], file_size: int) -> int:
    """An aged image leaves less room: every subject's file budget is cut to what the fullest
    aged image can hold (FILE_FRACTION of its free space, like the fresh images' share of their
    size), so fresh and aged subjects do the same work and their ratio means something."""
    free = [s.aging["free_space"].get("free_bytes", 0) for s in subjects if s.aging]
    if not free:
        return file_size
    return max(MiB, min(file_size, int(min(free) * FILE_FRACTION) // MiB * MiB))


def aged_tree(ls: LabSubject) -> AgedTree | None:
    """The aging's files for this subject's workloads: on an aged image where they are, on a
    fresh one where their fresh copy goes (workloads/agedtree.py)."""
    t = ls.aged_tree
    if not t:
        return None
    mirror = bool(t.get("mirror"))
    root = os.path.join(ls.workdir, MIRROR_DIR) if mirror else os.path.join(ls.mountpoint, AGED_DIR)
    files = tuple((str(f[0]), int(f[1]), str(f[2])) for f in t.get("files", ()))
    return AgedTree(str(t["profile"]), root, mirror, files, tuple(t.get("dirs", ())))


def _existing_file(root: str, limit: int = 20000) -> str | None:
    """The largest file among the first `limit` entries: what a read-only fio job reads."""
    best, best_size, seen = None, 0, 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            seen += 1
            p = os.path.join(dirpath, f)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size > best_size:
                best, best_size = p, st.st_size
        if seen >= limit:
            break
    return best


def _lab_target(
    lab: Lab,
    ls: LabSubject,
    file_size: int,
    scale: float = 1.0,
    existing: str | None = None,
    semantics: dict[str, Feature] | None = None,
    tree: AgedTree | None = None,
) -> Target:
    return Target(
        aged_tree=tree,
        read_only=lab.read_only,
        existing_file=existing,
        scale=scale,
        mountpoint=ls.mountpoint,
        subject_id=ls.spec.id,
        workdir=ls.workdir,
        kind=ls.spec.driver.kind,
        size=file_size,
        block_device=ls.block_device,
        daemon_pid=ls.daemon_pid,
        fs=ls.spec.driver.fs,
        # The driver record's claims, overridden by what was probed on this mount.
        capabilities=capabilities(
            semantics,
            {
                "posix_permissions": ls.spec.driver.posix_permissions,
                "symlinks": ls.spec.driver.symlinks,
                "direct_io": ls.spec.driver.direct_io,
            },
        ),
    )


class LabMounted:
    """A lab subject as the runner sees it (mounted.Mounted): mounted on demand and checked,
    made cold by the lab's two methods (lab/cold.py), released between turns when subjects
    share one device, discarded when broken."""

    def __init__(
        self,
        lab: Lab,
        ls: LabSubject,
        subject: Subject,
        file_size: int,
        scale: float = 1.0,
        tree: AgedTree | None = None,
        release_between: bool = False,
    ) -> None:
        self.lab, self.ls, self.subject = lab, ls, subject
        self.file_size, self.scale, self.tree = file_size, scale, tree
        self._chosen: list[str | None] = []  # the existing file a --read-only run reads
        self._between = release_between
        self._writes = lab.device_writes() if release_between else 0

    def ensure(self) -> Target:
        lab, ls, rec = self.lab, self.ls, self.subject
        broken = lab.health(ls) if ls.mounted else None
        if broken:
            raise LabError(broken)
        if not ls.mounted:
            lab.mount(ls)
        if ls.spec.driver.kind == "fuse" and ls.daemon_pid is None:
            raise LabError(f"{ls.spec.driver.name} daemon not found after mounting")
        if rec.effective_mount_options is None and ls.entry:
            rec.effective_mount_options = ls.entry.effective_options
        if lab.read_only and not self._chosen:
            # Walking the volume reads its metadata: done once, at the first mount, never
            # again after make_cold (it would warm the very caches the sample wants cold).
            self._chosen.append(_existing_file(ls.mountpoint))
        existing = self._chosen[0] if self._chosen else None
        return _lab_target(
            lab, ls, self.file_size, self.scale, existing, semantics=rec.semantics, tree=self.tree
        )

    def release(self) -> None:
        """Between subjects on one device: unmount, and in --read-only prove nothing was
        written."""
        if not self._between:
            return
        self.lab.unmount(self.ls)
        written = self.lab.device_writes() - self._writes
        if self.lab.read_only and written:
            self.subject.status = "failed"
            self.subject.error = (
                f"the device was written ({written} bytes) during a --read-only run"
            )
        self._writes = self.lab.device_writes()

    def health(self) -> str | None:
        return self.lab.health(self.ls)

    def discard(self) -> None:
        self.lab.discard(self.ls)

    def make_cold(self) -> str | None:
        self.lab.make_cold(self.ls)
        return None

    def evict(self) -> str | None:
        return self.lab.evict(self.ls)


class Rotation:
    """file: backing, before every round after the first: the images are dealt out to the
    subjects again (a seeded shuffle per round) and each subject's pristine image is written
    onto the one it is dealt, its loop settings moved with it. Where an image lies on the disk
    then varies across each subject's rounds, inside its interval, instead of staying with the
    subject: images written side by side here lay in two regions ~20 GiB apart, and identical
    xfs subjects ran 1.27x apart by which they had; writing each image over in place, without
    dealing them out, made that worse (docs/verdicts.md, "Setups")."""

    def __init__(self, lab: Lab, targets: list[LabMounted], guard: Guard, seed: int) -> None:
        self.lab, self.guard, self.seed = lab, guard, seed
        self.targets = [t for t in targets if t.ls.pristine and t.ls.image and t.ls.device]
        self.dealt: list[dict[str, str]] = []  # per round: subject -> the image it used

    def __call__(self, rep: int, going: set[str]) -> dict[str, str]:
        """Deal and write this round's images among the subjects it samples (`going`; the
        others keep theirs, untouched); subject -> why it could not be set up."""
        if not self.dealt:  # the first round's, as prepare() dealt them
            self.dealt.append(self._images())
        live = [t for t in self.targets if t.subject.status == "ok" and t.subject.id in going]
        if len(live) < 2:
            return {}
        rec = self.lab.record
        assert rec is not None  # the lab is open
        failed = {}
        for t in list(live):  # every image free before any is written over
            try:
                self.lab.unmount(t.ls)
                loops.restore_device(rec, str(t.ls.device))
            except (LabError, OSError) as e:
                failed[t.subject.id] = f"unmounting it before round {rep + 1}: {e}"
                live.remove(t)  # its image stays its own: nothing may write over a mount
        slots = [(t.ls.image, t.ls.device) for t in live]
        random.Random(f"{self.seed}:images:{rep}").shuffle(slots)
        for t, (image, device) in zip(live, slots, strict=True):
            t.ls.image, t.ls.device = image, device
            try:
                loops.set_device(rec, str(device), t.ls.spec.knobs)
                copy_over(Path(str(t.ls.pristine)), Path(str(image)))
                settle(str(image))
                flush_device(str(device))
                self.lab.mount(t.ls)
                self.guard.renewed(t.ls)
            except (LabError, OSError) as e:
                failed[t.subject.id] = f"setting up its image for round {rep + 1}: {e}"
            t.ls.events.append("dealt")
        self.dealt.append(self._images())
        return failed

    def _images(self) -> dict[str, str]:
        return {t.subject.id: Path(str(t.ls.image)).name for t in self.targets}


def dir_target(plan: Plan) -> AlwaysMounted:
    assert plan.target_dir is not None
    d = plan.target_dir
    workdir = plan.workdir
    device = _device_of(d)
    free = free_bytes(str(d))
    size = int(min(1024 * MiB * plan.scale, free * FILE_FRACTION)) // MiB * MiB
    if size < 16 * MiB:
        raise EnvironmentProblem(f"{d} has less than 40 MiB free; free some space first")
    rec = Subject(id=str(d), driver="directory", fs=_fstype_of(d), kind="directory")
    rec.semantics = probe_semantics(str(workdir), device, False)
    if plan.integrity:
        rec.integrity = directory_integrity()
    make_cold, why_not = _dir_cold(rec.fs)
    target = Target(
        subject_id=str(d),
        workdir=str(workdir),
        kind="directory",
        size=size,
        block_device=device,
        fs=rec.fs,
        scale=plan.scale,
        mountpoint=str(d),
        capabilities=capabilities(rec.semantics, {}),
    )
    return AlwaysMounted(rec, target, make_cold, why_not or "")


def _dir_cold(fstype: str) -> tuple[Callable[[], None] | None, str | None]:
    """How to make an existing directory cold, or why it cannot be."""
    if fstype in ("tmpfs", "ramfs", "devtmpfs"):
        return None, f"{fstype} lives in the page cache: it cannot be made cold"
    if os.geteuid() != 0:
        return None, "dropping caches needs root"
    # On FUSE, drop_caches leaves the daemon's own caches: the device counters will tell.
    return drop_caches, None


def _fstype_of(path: Path) -> str:
    from fsbench.lab.mounts import mountinfo

    best = None
    for e in mountinfo():
        if (
            str(path.resolve()).startswith(e.mountpoint.rstrip("/") + "/")
            or str(path.resolve()) == e.mountpoint
        ) and (best is None or len(e.mountpoint) >= len(best.mountpoint)):
            best = e
    return best.fstype if best else "unknown"


def _device_of(path: Path) -> str | None:
    dev = os.stat(path).st_dev
    fs = ProcFS()
    if not fs.exists(f"sys/dev/block/{os.major(dev)}:{os.minor(dev)}"):
        return None
    return fs.block_name(os.major(dev), os.minor(dev))
