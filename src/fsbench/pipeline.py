"""The pipeline behind `compare` and `run --target`: validate -> lab -> runner -> outputs.

Everything that can be wrong with the input is checked before anything is created. The lab is
a context manager, so every exit path (normal, exception, SIGINT, SIGTERM) releases it.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from fsbench.env import (
    capture,
    memory_notes,
    noise_floor,
    remeasure_noise_floor,
    remeasure_wakeups,
)
from fsbench.errors import EXIT_FAILED, EXIT_OK, EnvironmentProblem, LabError, UsageError
from fsbench.lab.backing import format_size
from fsbench.lab.drivers import DRIVERS, availability, built_daemons, driver_version
from fsbench.lab.formats import FORMATS
from fsbench.lab.integrity import Guard, directory_integrity
from fsbench.lab.lab import Lab, LabSubject, drop_caches
from fsbench.lab.subject import SubjectSpec, parse_subject, parse_subjects
from fsbench.plan import Plan
from fsbench.probes import processes
from fsbench.probes import trace as ktrace
from fsbench.probes.procfs import ProcFS
from fsbench.probes.semantics import capabilities, probe_semantics
from fsbench.runner import Runner, RunTarget, workload_id
from fsbench.schema import Aging, Feature, Run, Subject
from fsbench.store import Store
from fsbench.workloads.base import Target, Workload, free_bytes, hook
from fsbench.workloads.clients import check_clients

MiB = 1024 * 1024
# The share of an image the workloads' files may take: room for metadata, journals and the
# file systems that keep a reserve (btrfs, ext4's 5 %), identical for every subject.
FILE_FRACTION = 0.4


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: stop at once, keep what was measured, release everything.

    A KeyboardInterrupt, so no `except Exception` on the way swallows it and the command line
    reports it as an interruption (exit 130), wherever it lands."""


def resolve_subjects(texts: list[str]) -> tuple[list[SubjectSpec], list[Subject], bool]:
    """Subjects as given, or every available driver; also the drivers left out and why."""
    if texts:
        return parse_subjects(texts), [], True
    specs, skipped = [], []
    for d in DRIVERS.values():
        if not d.in_default:
            continue  # named to be compared (the FUSE floor, built on first use)
        av = availability(d)
        if av.available:
            specs.append(parse_subject(d.name))
        else:
            skipped.append(
                Subject(
                    id=d.name,
                    driver=d.name,
                    fs=d.fs,
                    kind=d.kind,
                    status="unavailable",
                    error=av.reason,
                    available_in=_kernel_with(d.name) if d.kind == "kernel" else None,
                )
            )
    if not specs:
        raise EnvironmentProblem("no driver is available on this machine; see `fsbench doctor`")
    return specs, skipped, False


def _kernel_with(driver: str) -> str | None:
    """A known kernel (vm/kernels.py) whose modules have the driver this host lacks."""
    from fsbench.vm.kernels import providers

    hit = providers([driver])
    return hit[0] if hit else None


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM (and SIGINT) raise Interrupted so `with` blocks unwind and release the lab."""

    def handler(signum: int, _frame: object) -> None:
        # Wind down undisturbed: a second Ctrl-C must not cut the teardown short.
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def tools_used(plan: Plan) -> list[str]:
    """Every outside tool whose version can move a result: the lab's, each format's mkfs and
    each workload's own (nginx, wrk, cc, ...). Drivers' versions are on their subjects."""
    names = ["fio", "losetup", "mount"]
    for spec in plan.subjects or []:
        fmt = FORMATS.get(spec.driver.fs)
        if fmt is not None:
            names.append(fmt.mkfs[0])
    for wl in plan.workloads:
        names.extend(hook(wl, "tools"))
    return list(dict.fromkeys(names))


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
        quirks=list(d.quirks),
        aging=Aging.model_validate(ls.aging) if ls.aging else None,
    )


def execute(
    plan: Plan,
    on_step: Callable[[str], None] = lambda _m: None,
    on_sample: Callable[[], None] = lambda: None,
    on_total: Callable[[int], None] = lambda _n: None,
    on_eta: Callable[[float | None], None] = lambda _s: None,
) -> tuple[Run, int]:
    """Run the plan; returns the run record and the exit code (0 all measured, 1 some failed)."""
    run_id = plan.run_id
    lab = (
        Lab(
            run_id,
            plan.backing,
            plan.size,
            plan.read_only,
            plan.destroy_data,
            plan.tune,
            age_seed=plan.age_seed,
            on_step=on_step,
        )
        if plan.subjects is not None and (plan.subjects or plan.vm_stage is None)
        else None
    )
    host = lab is not None or plan.subjects is None  # anything measured on this kernel
    # Everything that can be known to be wrong is refused before anything is created.
    if lab is not None and plan.subjects is not None:
        lab.check(plan.subjects)
    if plan.read_only:
        writers = [workload_id(w) for w in plan.workloads if not read_only_ok(w)]
        if writers:
            raise UsageError(
                f"--read-only runs only read workloads; {', '.join(writers)} would write"
            )
    run = Run(run_id=run_id, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=plan.command)
    # A guest's environment is not kept (the host records the VM's): no tool versions, no
    # wake-up probe; each is a process start, a second or more under emulation.
    run.environment = capture([], wakeups=False) if in_guest() else capture(tools_used(plan))
    memory = set(memory_notes())  # the notes the lab's tuning may answer
    run.environment.backing = plan.backing.describe()
    run.environment.backing_note = plan.backing.note
    run.environment.image_size = plan.size if plan.subjects is not None else None
    run.subjects.extend(plan.unavailable)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    store = Store(plan.db)
    store.begin_run(run, plan.out_dir)
    runner: Runner | None = None
    tracer: ktrace.Tracer | None = None
    guard = Guard(enabled=plan.integrity)
    with signals_raise():
        try:
            with lab if lab is not None else scratch_dir(plan) if host else nullcontext():
                if lab is not None and lab.record is not None and not in_guest():
                    # In the run's own image directory, which release() removes.
                    run.environment.noise_floor = noise_floor(Path(lab.record.image_dir))
                if lab is not None and lab.tuned:
                    # The run is no longer exposed to what the note warns about: say what
                    # was done instead.
                    kept = [n for n in run.environment.notes if n not in memory]
                    run.environment.notes = [*lab.tuned, *kept]
                if plan.target_dir is not None:
                    # Each fio server answers (version, OS) before the first sample.
                    run.environment.clients = check_clients(plan.workloads, str(_workdir(plan)))
                targets = (
                    _lab_targets(plan, lab, run, store, on_step, guard)
                    if lab is not None
                    else [_dir_target(plan)]
                    if host
                    else []
                )
                tracer = start_tracer(plan, lab, run)
                # The minimum rounds first; the runner revises the total as answers settle.
                on_total(len(targets) * len(plan.workloads) * plan.repeat)
                done = [0]

                def counted() -> None:
                    done[0] += 1
                    on_sample()

                runner = Runner(
                    run,
                    targets,
                    plan.workloads,
                    plan.repeat,
                    sink=store,
                    on_step=on_step,
                    on_sample=counted,
                    on_remaining=lambda n: on_total(done[0] + n),
                    on_eta=on_eta,
                    adaptive=plan.adaptive,
                    settle=plan.adaptive,
                    max_repeat=plan.max_repeat,
                    time_budget_s=plan.time_budget_s,
                    budget_origin=plan.started,
                    warmup=plan.warmup,
                    min_sample_s=plan.min_sample_s,
                    tracer=tracer,
                    # Every round's subject order shuffled, reproducibly from the run's id.
                    order_seed=zlib.crc32(run.run_id.encode()),
                )
                runner.execute()
                remeasure_wakeups(run.environment)  # before the checks and teardown load it
                if lab is not None and lab.record is not None and not in_guest():
                    # Its start's twin: a floor that moved says so in the run's notes.
                    remeasure_noise_floor(
                        run.environment,
                        Path(lab.record.image_dir),
                        time.monotonic() - plan.started,
                    )
                if lab is not None:
                    # Before the lab is torn down: the checks need its loop devices.
                    guard.conclude(lab, run, on_step)
                if plan.vm_stage is not None:
                    plan.vm_stage(run, store, on_step)
                run.status = "complete"
        except Interrupted as e:
            run.status = "incomplete"
            run.environment.interrupted_by = str(e)
            if runner is not None:
                runner.finish()
        finally:
            if tracer is not None:
                tracer.stop()  # the lab's release stops it too, after a crash or SIGKILL
                run.environment.trace_probes = dict(tracer.status)
            run.finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            if run.status == "running":
                run.status = "incomplete"
            if runner is not None and not run.results:
                run.results = list(runner.results.values())
            run.definitions = definitions(plan.workloads)  # after close(): cleanups' outcome
            # The report first: a rendering failure is then recorded in results.json and the
            # store, and the terminal says so, instead of being lost after the data is written.
            write_report_safely(run, plan.out_dir)
            write_results(run, plan.out_dir)
            store.finish_run(run)
            store.close()
    failed = any(s.status == "failed" for s in run.subjects) or any(
        r.status == "failed" for r in run.results
    )
    if run.status == "incomplete":
        return run, 130
    return run, EXIT_FAILED if failed else EXIT_OK


def start_tracer(plan: Plan, lab: Lab | None, run: Run) -> ktrace.Tracer | None:
    """The run's tracer: it starts bpftrace for each traced run (runner._warm_up_and_trace),
    and records each bpftrace in the lab's state record the moment it exists, so `release`
    (normal teardown and `fsbench cleanup`) stops it on every exit path."""
    if not plan.trace:
        run.environment.trace_probes = dict.fromkeys(ktrace.PROBE_NAMES, "off (--no-trace)")
        return None
    if lab is None or lab.record is None:
        why = "not traced: only lab runs are (a directory target has no state record)"
        run.environment.trace_probes = dict.fromkeys(ktrace.PROBE_NAMES, why)
        return None
    record = lab.record

    def recorded(pid: int) -> None:
        record.tracers.append([pid, processes.start_time(pid)])
        record.save()

    def gone(pid: int) -> None:
        record.tracers = [t for t in record.tracers if t[0] != pid]
        record.save()

    daemons = tuple(built_daemons(s.driver for s in plan.subjects or []))
    tracer = ktrace.Tracer(
        ktrace.availability(wanted=plan.trace_probes, daemons=daemons),
        on_started=recorded,
        on_stopped=gone,
        daemons=daemons,
    )
    if ktrace.MOUNTED_NOTES:
        run.environment.notes = [*run.environment.notes, *ktrace.MOUNTED_NOTES]
    run.environment.trace_probes = dict(tracer.status)
    return tracer


def in_guest() -> bool:
    """A run inside a throw-away VM (src/fsbench/vm): the host keeps only its subjects and
    results, so the guest skips what only its own environment and report would show — under
    emulation the report's imports alone (matplotlib) cost over a minute."""
    return bool(os.environ.get("FSBENCH_IN_VM"))


def write_report_safely(run: Run, out_dir: Path) -> None:
    """report.html beside results.json; a rendering problem must never cost the run's data."""
    if in_guest():
        return  # the host renders the one report of the merged run
    from fsbench.report.html import write_report

    try:
        write_report(run, out_dir)
    except Exception as e:
        run.environment.report_error = f"report.html not written: {e}"


def write_results(run: Run, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "results.json.tmp"
    tmp.write_text(run.to_json())
    os.replace(tmp, out_dir / "results.json")


def _lab_targets(
    plan: Plan,
    lab: Lab,
    run: Run,
    store: Store,
    on_step: Callable[[str], None],
    guard: Guard | None = None,
) -> list[RunTarget]:
    assert plan.subjects is not None
    guard = guard or Guard(enabled=False)
    on_step(
        f"formatting {len({s.driver.fs for s in plan.subjects})} image(s) of "
        f"{format_size(plan.size)}"
    )
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
            guard.before_mount(ls, rec)
            lab.mount(ls)
            rec.effective_mount_options = ls.entry.effective_options if ls.entry else None
            rec.semantics = probe_semantics(ls.mountpoint, ls.block_device, lab.read_only)
            guard.after_mount(ls, lab.read_only)
        except LabError as e:
            rec.status, rec.error = "failed", f"mount failed: {e}"
            # mount(8) says "bad option" whatever went wrong, so ask the driver instead: a
            # subject that mounts once its options are left out was refused for its options.
            if plan.explicit and ls.spec.options and lab.mounts_without_options(ls):
                rejected.append(f"{ls.spec.id}: {e}")
        store.save_subject(run.run_id, rec)
        targets.append(
            RunTarget(
                rec,
                _lab_target(lab, ls, file_size, plan.scale, semantics=rec.semantics),
                ensure=_ensurer(lab, ls, file_size, rec, plan.scale),
                release=_releaser(lab, ls, rec) if plan.backing.kind == "device" else None,
                health=lambda ls=ls: lab.health(ls),
                discard=lambda ls=ls: lab.discard(ls),
            )
        )
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


def _releaser(lab: Lab, ls: LabSubject, rec: Subject) -> Callable[[], None]:
    """Between subjects on one device: unmount, and in --read-only prove nothing was written."""
    start = lab.device_writes()

    def release() -> None:
        nonlocal start
        lab.unmount(ls)
        written = lab.device_writes() - start
        if lab.read_only and written:
            rec.status = "failed"
            rec.error = f"the device was written ({written} bytes) during a --read-only run"
        start = lab.device_writes()

    return release


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
) -> Target:
    return Target(
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
        make_cold=lambda: lab.make_cold(ls),
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


def _ensurer(
    lab: Lab, ls: LabSubject, file_size: int, rec: Subject, scale: float = 1.0
) -> Callable[[], Target]:
    chosen: list[str | None] = []  # the existing file a --read-only run reads, chosen once

    def ensure() -> Target:
        broken = lab.health(ls) if ls.mounted else None
        if broken:
            raise LabError(broken)
        if not ls.mounted:
            lab.mount(ls)
        if ls.spec.driver.kind == "fuse" and ls.daemon_pid is None:
            raise LabError(f"{ls.spec.driver.name} daemon not found after mounting")
        if rec.effective_mount_options is None and ls.entry:
            rec.effective_mount_options = ls.entry.effective_options
        if lab.read_only and not chosen:
            # Walking the volume reads its metadata: done once, at the first mount, never
            # again after make_cold (it would warm the very caches the sample wants cold).
            chosen.append(_existing_file(ls.mountpoint))
        return _lab_target(
            lab, ls, file_size, scale, chosen[0] if chosen else None, semantics=rec.semantics
        )

    return ensure


def _workdir(plan: Plan) -> Path:
    assert plan.target_dir is not None
    return plan.target_dir / f".fsbench-{os.getpid()}"


@contextmanager
def scratch_dir(plan: Plan) -> Iterator[None]:
    """A directory target gets fsbench's files in one scratch directory, removed at the end."""
    try:
        yield None
    finally:
        shutil.rmtree(_workdir(plan), ignore_errors=True)


def _dir_target(plan: Plan) -> RunTarget:
    assert plan.target_dir is not None
    d = plan.target_dir
    workdir = _workdir(plan)
    free = free_bytes(str(d))
    size = int(min(1024 * MiB * plan.scale, free * FILE_FRACTION)) // MiB * MiB
    if size < 16 * MiB:
        raise EnvironmentProblem(f"{d} has less than 40 MiB free; free some space first")
    rec = Subject(id=str(d), driver="directory", fs=_fstype_of(d), kind="directory")
    rec.semantics = probe_semantics(str(workdir), _device_of(d), False)
    if plan.integrity:
        rec.integrity = directory_integrity()
    make_cold, why_not = _dir_cold(rec.fs)
    target = Target(
        subject_id=str(d),
        workdir=str(workdir),
        kind="directory",
        size=size,
        block_device=_device_of(d),
        fs=rec.fs,
        make_cold=make_cold,
        cold_impossible=why_not,
        scale=plan.scale,
        mountpoint=str(d),
        capabilities=capabilities(rec.semantics, {}),
    )
    return RunTarget(rec, target)


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


def definitions(workloads: list[Workload]) -> list[dict]:
    """Each user workload's definition once (a job file's phases share theirs)."""
    out: dict[str, dict] = {}
    for wl in workloads:
        d = hook(wl, "definition")
        if callable(d):
            rec = d()
            out.setdefault(str(rec.get("id") or rec.get("name")), rec)
    return list(out.values())


def read_only_ok(wl: Workload) -> bool:
    """Whether a workload only reads (and can read what is already on a volume)."""
    return bool(hook(wl, "read_only_ok"))
