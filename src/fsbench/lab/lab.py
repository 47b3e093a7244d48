"""The lab: one pristine image per format, an identical copy per subject, each attached through
a loop device and mounted by its driver; every resource released on every exit path.

Lifecycle of a subject (tested for order): format -> copy -> attach -> mount -> (prepare cache
-> measure)* -> unmount -> detach -> delete.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from fsbench.errors import EnvironmentProblem, LabError, UsageError
from fsbench.fuse import transports
from fsbench.lab import cold, loops, mounts, safety, stacked, state
from fsbench.lab.backing import (
    Backing,
    copy_over,
    fill_interleaved,
    fill_zeros,
    format_size,
    settle,
)
from fsbench.lab.cold import drop_caches, signals_deferred
from fsbench.lab.drivers import availability
from fsbench.lab.formats import FORMATS
from fsbench.lab.state import MOUNT_BASE, StateRecord, release
from fsbench.lab.subject import NONE, AgedImages, SubjectSpec
from fsbench.lab.system import dmesg_mark, dmesg_since, run
from fsbench.probes import processes
from fsbench.probes.procfs import PAGE_REPORTING, ProcFS

# A guest's directory of images the host made once for every guest (vm/images.py): each
# fresh format's image and PRISTINE_MANIFEST (format -> {image, mkfs, sha256}).
PRISTINE_DIR_ENV = "FSBENCH_PRISTINE_DIR"
PRISTINE_MANIFEST = "pristine.json"


def shared_pristine(fs: str) -> dict[str, Any] | None:
    """The shared image of format `fs` ({path, mkfs, sha256}), when this lab was given one."""
    d = os.environ.get(PRISTINE_DIR_ENV)
    if not d:
        return None
    try:
        entry = json.loads((Path(d) / PRISTINE_MANIFEST).read_text()).get(fs)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict) or not (Path(d) / str(entry.get("image"))).is_file():
        return None
    return {**entry, "path": str(Path(d) / entry["image"])}


@dataclass
class LabSubject:
    spec: SubjectSpec
    mountpoint: str
    image: Path | None = None
    device: str | None = None  # /dev/loopN or the real device
    entry: mounts.MountEntry | None = None
    daemon_pid: int | None = None
    mkfs_command: list[str] | None = None
    aging: dict[str, Any] | None = None  # what made its aged image and what aging did
    # The files aging left ({profile, mirror, dirs, files}): on an aged subject its own; on a
    # fresh one the same format's aged tree in this run, which its workloads write fresh.
    aged_tree: dict[str, Any] | None = None
    # The sha256 of the pristine image its copy was made from, when that image was made once
    # for several guests (identical bytes across kernels: vm/images.py).
    image_sha256: str | None = None
    pristine: Path | None = None  # file: kept, written onto the image it is dealt each round
    error: str | None = None
    events: list[str] = field(default_factory=list)  # lifecycle order, for tests and debugging

    @property
    def mounted(self) -> bool:
        return self.entry is not None

    @property
    def block_device(self) -> str | None:
        """Kernel name of the device (loop3, sdb1) for /sys/class/block/<name>/stat."""
        return Path(os.path.realpath(self.device)).name if self.device else None

    @property
    def workdir(self) -> str:
        return os.path.join(self.mountpoint, "fsbench")


# The share of free memory a run's RAM-backed images may take (check).
RAM_SHARE = 0.7


def is_root() -> bool:
    return os.geteuid() == 0


class Lab:
    def __init__(
        self,
        run_id: str,
        backing: Backing,
        size: int,
        read_only: bool = False,
        destroy_data: bool = False,
        tune_memory: bool = True,
        age_seed: int = 1,
        on_step: Callable[[str], None] | None = None,
        aged_images: AgedImages | None = None,
    ) -> None:
        self.run_id = run_id
        self.backing = backing
        self.size = size
        self.read_only = read_only
        self.destroy_data = destroy_data
        self.tune_memory = tune_memory
        self.tuned: list[str] = []  # what was held for the run, in words
        self.subjects: list[LabSubject] = []
        self.mkfs_commands: dict[str, list[str]] = {}
        self.record: StateRecord | None = None
        self.uring = False  # a subject uses FUSE over io_uring: enable_uring held on (check)
        self.age_seed = age_seed
        self.aged_images = aged_images  # None: this lab refuses --age
        self.on_step = on_step or (lambda _m: None)

    # -- set-up ---------------------------------------------------------------------------
    def check(self, specs: list[SubjectSpec]) -> None:
        """Everything that can be known before creating anything: root, what the options ask
        of the images and the device, each driver's availability, the images' room."""
        if not is_root():
            raise EnvironmentProblem(
                "formatting and mounting need root; run as root, or use --target DIR for an "
                "existing directory"
            )
        formats = {s.driver.fs for s in specs}
        loops.check_subjects(specs, self.backing.kind)
        if any(s.age != NONE for s in specs):
            if self.aged_images is None:
                raise UsageError("--age: this lab was made without aged images")
            self.aged_images.aged_check(specs, self.backing.kind)
        if self.read_only and self.backing.kind != "device":
            raise UsageError(
                "--read-only benchmarks an existing volume: give --backing device:PATH"
            )
        if self.backing.kind == "device":
            if len(formats) != 1:
                raise UsageError(
                    "--backing device: compares drivers of one format at a time "
                    "(e.g. ntfs-3g lowntfs-3g); run once per format"
                )
            path = self.backing.path or ""
            if self.read_only:
                safety.check_for_read_only(path, formats)
            else:
                safety.check_for_format(path, self.destroy_data)
        self.uring = any(s.transport == "uring" for s in specs)
        for s in specs:
            why = transports.subject_problem(s)  # builds the FUSE floor on first use
            if why:
                raise EnvironmentProblem(f"subject {s.id} is not available: {why}")
            av = availability(s.driver)
            if not av.available:
                raise EnvironmentProblem(f"driver {s.driver.name} is not available: {av.reason}")
            fmt = FORMATS[s.driver.fs]
            if shutil.which(fmt.tool, path="/usr/sbin:/sbin:/usr/bin:/bin") is None:
                raise EnvironmentProblem(
                    f"{fmt.tool} is missing (needed to format {fmt.name}); "
                    f"apt-get install {fmt.package}"
                )
            if self.size < fmt.min_size:
                raise UsageError(
                    f"--size {format_size(self.size)} is too small for {fmt.name}; "
                    f"use at least {format_size(fmt.min_size)}"
                )
        if self.backing.kind == "ram":
            # A pristine image is sparse (only what mkfs wrote) and freed once copied: the
            # subjects' images are what fills memory, and 30 % stays for the page cache and
            # the daemons the workloads use.
            need = self.size * len(specs)
            avail = psutil.virtual_memory().available
            if need > RAM_SHARE * avail:
                raise EnvironmentProblem(
                    f"{len(specs)} RAM-backed images of {format_size(self.size)} need "
                    f"{format_size(need)}, more than {RAM_SHARE * 100:.0f} % of the "
                    f"{format_size(avail)} of memory free (the rest is the page cache's); "
                    f"use a smaller --size, fewer subjects, or --backing file:DIR"
                )
        if self.backing.kind == "file":
            # Every image is written in full (prepare), and each pristine image is kept to
            # deal the images out again every round (targets.Rotation): taken up front.
            need = self.size * (len(specs) + len({(s.driver.fs, s.age, s.mkfs) for s in specs}))
            free = shutil.disk_usage(self.backing.path or ".").free
            if need > free:
                raise EnvironmentProblem(
                    f"{len(specs)} image(s) of {format_size(self.size)} in {self.backing.path} "
                    f"need {format_size(need)} but only {format_size(free)} is free there; "
                    f"use a smaller --size, fewer subjects, or another directory"
                )

    def _image_dir(self) -> Path:
        if self.backing.kind == "ram":
            return Path("/dev/shm") / f"fsbench-{self.run_id}"
        if self.backing.kind == "file":
            return Path(self.backing.path or ".") / f"fsbench-{self.run_id}"
        return Path("/dev/shm") / f"fsbench-{self.run_id}"  # device: nothing stored there

    def __enter__(self) -> Lab:
        image_dir = self._image_dir()
        mount_dir = MOUNT_BASE / f"fsbench-{self.run_id}"
        self.record = StateRecord(
            self.run_id,
            os.getpid(),
            str(image_dir),
            str(mount_dir),
            pid_start=processes.start_time(os.getpid()),
        )
        if self.backing.kind == "device" and self.backing.path:
            self.record.devices.append(self.backing.path)
        self.record.save()  # written before anything exists, so cleanup can always find it
        if self.tune_memory:
            self._hold_page_reporting()
        if self.uring:  # not a tuning: the transport does not exist without it
            # A failure shows at the mount: the daemon is checked for its rings.
            with contextlib.suppress(OSError):
                held = state.hold_uring(self.record)
                if held:
                    self.tuned.append(held)
        image_dir.mkdir(parents=True, exist_ok=True)
        mount_dir.mkdir(parents=True, exist_ok=True)
        self.record.save()  # again, now that the mount directory can hold its copy
        return self

    def _hold_page_reporting(self) -> None:
        """Free page reporting hands freed memory to the hypervisor, and every page cache
        dropped for a cold read or file deleted is then slow to reuse: samples swing by 10x.
        Held off for the run (order above the largest block) and put back by `release`, which
        also runs in `fsbench cleanup` after a SIGKILL — by the last of several runs to end."""
        assert self.record is not None
        try:
            old = state.hold(self.record, PAGE_REPORTING, "11", lambda v: int(v) > 10)
        except (OSError, ValueError):
            return
        if old is None:
            if PAGE_REPORTING in self.record.restore:
                self.tuned.append(
                    "free page reporting held off by another fsbench run (restored by the "
                    "last to end)"
                )
            return
        self.tuned.append(
            f"free page reporting held off during the run (order {old} -> 11, restored after)"
        )

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> list[str]:
        if self.record is None:
            return []
        for s in self.subjects:
            if s.mounted:
                s.events.append("unmount")
        notes = release(self.record)
        self.record = None
        for s in self.subjects:
            s.entry = None
        return notes

    def _mkfs(self, fmt_name: str, device: str, extra: tuple[str, ...] = ()) -> list[str]:
        argv = [*FORMATS[fmt_name].mkfs, *extra, device]
        run(argv, timeout=600)
        return argv

    def prepare(self, specs: list[SubjectSpec]) -> list[LabSubject]:
        """Format once per format, copy the pristine image per subject and attach it."""
        assert self.record is not None, "use Lab as a context manager"
        image_dir = Path(self.record.image_dir)
        mount_dir = Path(self.record.mount_dir)
        for i, spec in enumerate(specs):
            # The index keeps names apart when two ids make the same slug (a:b=c, a:b_c).
            mp = mount_dir / f"{i}-{spec.slug}"
            mp.mkdir(exist_ok=True)
            self.subjects.append(LabSubject(spec, str(mp)))
        if self.backing.kind == "device":
            fs = specs[0].driver.fs
            dev = self.backing.path or ""
            if self.read_only:
                # The volume as it is, behind a read-only loop: the kernel refuses any write
                # a driver might try, whatever its mount options say.
                loop = loops.attach(Path(dev), read_only=True)
                self.record.loops.append([loop, os.path.realpath(dev)])
                self.record.save()
                dev, mkfs = loop, None
            else:
                mkfs = self.mkfs_commands[fs] = self._mkfs(fs, dev)
            for s in self.subjects:
                s.device, s.mkfs_command = dev, mkfs
                s.events += ["attach"] if self.read_only else ["format", "attach"]
            return self.subjects
        for i, s in enumerate(self.subjects):  # file: images are dealt out anew each round
            name = f"image-{i}" if self.backing.kind == "file" else Path(s.mountpoint).name
            s.image = image_dir / f"{name}.img"
        if self.backing.kind in ("ram", "file"):
            images = [s.image for s in self.subjects if s.image]
            if self.backing.kind == "file":  # a disk: seconds a GiB, worth saying
                n, size, where = len(images), format_size(self.size), self.backing.path
                self.on_step(f"writing {n} image(s) of {size} in full in {where}")
            fill_interleaved(images, self.size)
        trees: dict[str, dict[str, Any]] = {}  # format -> its first aged profile's tree
        # One pristine image per format and age, and one per subject's own mkfs options.
        for i, (fs, age, extra) in enumerate(dict.fromkeys((s.driver.fs, s.age, s.mkfs)
                                                           for s in specs)):  # fmt: skip
            pristine = image_dir / f"pristine.{i}.{fs}.{age}.img"
            aging = tree = shared = None
            if extra:
                mkfs = self._format(pristine, fs, extra)
            elif age != NONE:
                assert self.aged_images is not None  # check() refused an age without it
                mkfs, aging = self.aged_images.aged_image(self, fs, age, pristine)
                tree = aging.pop("tree", None)  # thousands of paths: not the subject's record
                if tree is not None:
                    tree = {**tree, "profile": age}
                    trees.setdefault(fs, tree)
            elif (shared := shared_pristine(fs)) is not None:
                # A guest of a run over several kernels: the host's one image for them all.
                sparse = "--sparse=never" if self.backing.kind == "ram" else "--sparse=always"
                run(["cp", sparse, shared["path"], str(pristine)], timeout=600)
                mkfs = list(shared["mkfs"])
            else:
                mkfs = self._format(pristine, fs)
            if not extra:
                self.mkfs_commands[fs] = mkfs
            for s in self.subjects:
                if (s.spec.driver.fs, s.spec.age, s.spec.mkfs) != (fs, age, extra):
                    continue
                s.aging, s.aged_tree, s.mkfs_command = aging, tree, mkfs
                s.image_sha256 = shared["sha256"] if shared else None
                assert s.image is not None
                copy_over(pristine, s.image)  # into the pages (or blocks) it was dealt
                if self.backing.kind == "file":
                    settle(s.image)
                direct = self.backing.kind == "file"
                s.device = loops.attach(s.image, read_only=self.read_only, direct_io=direct)
                loops.set_device(self.record, s.device, s.spec.knobs)
                s.events += ["format", "copy", "attach"]
                s.pristine = pristine if direct else None
            if self.backing.kind != "file":
                pristine.unlink()
        for s in self.subjects:
            if s.spec.age == NONE and s.spec.driver.fs in trees:
                s.aged_tree = {**trees[s.spec.driver.fs], "mirror": True}
        return self.subjects

    def _format(self, pristine: Path, fs: str, extra: tuple[str, ...] = ()) -> list[str]:
        # Sparse: a pristine image is only read, into the subjects' images that were filled
        # (fill_interleaved); filling it too touched a GiB more of memory per format, and on a
        # fresh VM first touches run at ~200 MB/s: 6 formats took 30 s before the first sample.
        with open(pristine, "wb") as f:
            f.truncate(self.size)
        dev = loops.attach(pristine)
        try:
            return self._mkfs(fs, dev, extra)
        finally:
            loops.detach(dev)

    def _allocate(self, image: Path) -> None:
        if self.backing.kind == "ram":
            fill_zeros(image, self.size)
        else:
            with open(image, "wb") as f:
                f.truncate(self.size)

    # -- mounts ---------------------------------------------------------------------------
    def mount(self, s: LabSubject) -> None:
        if s.mounted:
            return
        if self.backing.kind == "device":
            for other in self.subjects:  # one device: one driver at a time
                if other is not s and other.mounted:
                    self.unmount(other)
        opts = s.spec.options
        if self.read_only:
            opts = ",".join(o for o in ("ro", opts) if o)
        mark = dmesg_mark() if s.spec.driver.kind == "kernel" else ""
        try:
            s.entry = stacked.mount(
                s.spec.driver, s.device or "", s.mountpoint, opts, s.spec.transport
            )
        except LabError as e:
            if s.spec.driver.kind == "kernel":
                # mount(8) says "wrong fs type, bad option, bad superblock" whatever happened;
                # the kernel's log names the real reason.
                dev, fstype = s.block_device or "", s.spec.driver.fstype
                kernel_says = dmesg_since(mark, [f"({dev})", f"{fstype}:"])
                if kernel_says:
                    raise LabError(
                        f"{fstype} refused to mount {s.device} with "
                        f"'{opts or 'defaults'}': {kernel_says}"
                    ) from e
                raise
            raise
        s.events.append("mount")
        if s.spec.driver.kind == "fuse":
            s.daemon_pid = self._find_daemon(s)
            why = transports.check_daemon(s.spec.transport, s.daemon_pid)
            try:
                if why:
                    raise LabError(f"{s.spec.id}: {why}")
                loops.set_mount(s.mountpoint, s.spec.knobs)  # the bdi is new at every mount
            except LabError:
                self.unmount(s)
                raise
        if not self.read_only:
            os.makedirs(s.workdir, exist_ok=True)

    def mounts_without_options(self, s: LabSubject) -> bool:
        """Whether a subject that failed to mount does mount with its own options left out:
        tells an option the driver refuses from a broken image or driver. Leaves it unmounted."""
        if s.mounted or not s.spec.options:
            return False
        if self.backing.kind == "device":
            for other in self.subjects:  # one device: one driver at a time
                if other is not s and other.mounted:
                    self.unmount(other)
        d, ro = s.spec.driver, "ro" if self.read_only else ""
        try:
            stacked.mount(d, s.device or "", s.mountpoint, ro, s.spec.transport)
        except LabError:
            return False
        stacked.unmount(d, s.mountpoint, mounts.processes_mentioning(s.mountpoint))
        return True

    def _find_daemon(self, s: LabSubject) -> int | None:
        # The daemon forks into the background; its command line names our unique mount point.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pids = [p for p in mounts.processes_mentioning(s.mountpoint) if processes.running(p)]
            if pids:
                return min(pids)
            time.sleep(0.05)
        return None

    def unmount(self, s: LabSubject) -> list[str]:
        if not s.mounted:
            return []
        os.sync()
        pids = [s.daemon_pid] if s.daemon_pid else []
        notes = stacked.unmount(s.spec.driver, s.mountpoint, pids)
        s.entry, s.daemon_pid = None, None
        s.events.append("unmount")
        return notes

    def device_writes(self) -> int:
        """Bytes written so far to the backing device (and the loop over it): must not move
        during a --read-only run."""
        total = 0
        names = {Path(os.path.realpath(self.backing.path or "")).name}
        names |= {Path(d).name for d, _ in (self.record.loops if self.record else [])}
        for n in names:
            try:
                total += ProcFS().block_stat(n).write_bytes
            except (OSError, ValueError):
                continue
        return total

    def health(self, s: LabSubject) -> str | None:
        """Why the subject is broken (its FUSE daemon died), or None when it is fine."""
        if s.spec.driver.kind == "fuse" and s.daemon_pid:
            if not processes.running(s.daemon_pid):
                return f"{s.spec.driver.name} daemon (pid {s.daemon_pid}) exited"
            if processes.stopped(s.daemon_pid):
                return f"{s.spec.driver.name} daemon (pid {s.daemon_pid}) is stopped (unresponsive)"
        if s.mounted and mounts.find_mount(s.mountpoint) is None:
            return f"{s.spec.id} is no longer mounted"
        return None

    def discard(self, s: LabSubject) -> None:
        """Take a broken subject down now: bounded unmount (lazy if needed), daemon killed."""
        pids = [s.daemon_pid] if s.daemon_pid else []
        # A broken daemon is not asked to shut down nicely: SIGKILL reaches even a stopped
        # one, and the kernel then fails its requests so the unmount cannot hang.
        processes.stop(pids, grace=5)
        stacked.unmount(s.spec.driver, s.mountpoint, pids, timeout=10)
        s.entry, s.daemon_pid = None, None
        s.events.append("discard")

    def remount(self, s: LabSubject) -> None:
        self.unmount(s)
        self.mount(s)

    def evict(self, s: LabSubject) -> str | None:
        """The cheap cold cache (lab/cold.py): the workdir's files and the device's buffers
        evicted; None when done, else why the full method (make_cold) is needed."""
        if self.read_only:
            return "a read-only volume's files are not fsbench's to write back"
        if not s.mounted:
            return "not mounted"
        why = cold.evict(s.workdir, s.device)
        if why is None:
            s.events.append("evict")
        return why

    def make_cold(self, s: LabSubject) -> None:
        """sync, drop the page cache, and for FUSE remount (the daemon keeps caches of its own)."""
        os.sync()
        if s.spec.driver.kind == "fuse":
            self.remount(s)
        elif s.mounted and not self.read_only:
            self._checkpoint(s)
        drop_caches()
        s.events.append("cold")

    def _checkpoint(self, s: LabSubject) -> None:
        """Freeze and thaw at once: a journal keeps metadata blocks pinned until it
        checkpoints, and freezing checkpoints it, so drop_caches can evict inode tables too.

        Nothing may end the run in between: a frozen file system that is unmounted keeps its
        loop device and image until reboot. So the freeze is recorded before it happens (a
        SIGKILL leaves `release` a note to thaw) and SIGINT/SIGTERM wait until the thaw."""
        assert self.record is not None
        with signals_deferred():
            self.record.frozen.append(s.mountpoint)
            self.record.save()
            try:
                mounts.freeze(s.mountpoint)
            except OSError:
                pass  # cannot be frozen (busy, unsupported): the caches drop all the same
            finally:
                why = mounts.try_thaw(s.mountpoint)
            if why is not None:
                raise LabError(f"{s.spec.id}: {why}")  # left in the record: release retries
            self.record.frozen.remove(s.mountpoint)
            self.record.save()
