"""The pipeline behind `compare` and `run --target`: validate -> lab -> runner -> outputs.

Everything that can be wrong with the input is checked before anything is created. The lab is
a context manager, so every exit path (normal, exception, SIGINT, SIGTERM) releases it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from fsbench.aging import prepare as aged_images
from fsbench.environment import (
    NO_NOISE_FLOOR_NOTE,
    capture,
    memory_notes,
    noise_floor,
    noise_floor_wanted,
    remeasure_noise_floor,
    remeasure_wakeups,
)
from fsbench.errors import (
    EXIT_FAILED,
    EXIT_INTEGRITY,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EnvironmentProblem,
)
from fsbench.lab.drivers import built_daemons
from fsbench.lab.formats import FORMATS
from fsbench.lab.integrity import Guard
from fsbench.lab.lab import Lab
from fsbench.probes import processes
from fsbench.probes import trace as ktrace
from fsbench.probes.others import OthersWatch
from fsbench.probes.semantics import prove_o_direct
from fsbench.records.schema import Result, Run
from fsbench.records.store import Store
from fsbench.schedule.dimensions.clients import check_clients
from fsbench.schedule.mounted import Mounted
from fsbench.schedule.phases import PhaseClock
from fsbench.schedule.plan import Plan, vm_hint
from fsbench.schedule.runner import Runner
from fsbench.schedule.targets import (
    LabMounted,
    Rotation,
    dir_target,
    lab_targets,
)
from fsbench.stats import decide
from fsbench.workloads.base import Workload


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: stop at once, keep what was measured, release everything.

    A KeyboardInterrupt, so no `except Exception` on the way swallows it and the command line
    reports it as an interruption (exit 130), wherever it lands."""


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
        names.extend(wl.tools)
    return list(dict.fromkeys(names))


@dataclass
class _Progress:
    """The caller's callbacks (the CLI's progress bar)."""

    on_step: Callable[[str], None]
    on_sample: Callable[[], None]
    on_total: Callable[[int], None]
    on_eta: Callable[[float | None], None]
    on_result: Callable[[Result], None]


@dataclass
class _Session:
    """What the run's last step needs whichever way measuring ended."""

    runner: Runner | None = None
    tracer: ktrace.Tracer | None = None


def execute(
    plan: Plan,
    on_step: Callable[[str], None] = lambda _m: None,
    on_sample: Callable[[], None] = lambda: None,
    on_total: Callable[[int], None] = lambda _n: None,
    on_eta: Callable[[float | None], None] = lambda _s: None,
    on_result: Callable[[Result], None] = lambda _r: None,
) -> tuple[Run, int]:
    """Run the plan; returns the run record and the exit code (`exit_code`: 0 all measured and
    sound, 1 some failed, 4 a volume failed its integrity check, 130 interrupted). The steps:
    refuse what can be known wrong before anything exists, start the run's record, then inside
    the lab measure, check and run the VM stage, and whatever happened write the report,
    results.json and the store."""
    lab = _lab(plan, on_step)
    memory = set(memory_notes())  # the notes the lab's tuning may answer
    run = _new_run(plan)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    store = Store(plan.db)
    store.begin_run(run, plan.out_dir)
    progress = _Progress(on_step, on_sample, on_total, on_eta, on_result)
    session = _Session()
    setup = PhaseClock()  # the steps before the first round (Schedule.setup)
    guard = Guard(enabled=plan.integrity)
    with signals_raise():
        try:
            with _place(plan, lab):
                targets = _targets(plan, lab, run, store, memory, guard, setup, on_step)
                if targets or plan.vm_stage is None:  # VMs alone: the guests' runners measure
                    _measure(plan, lab, run, targets, store, guard, setup, progress, session)
                _after_measuring(plan, lab, run, store, guard, on_step)
                run.status = "complete"
        except Interrupted as e:
            run.status = "incomplete"
            run.environment.interrupted_by = str(e)
            if session.runner is not None:
                session.runner.finish()
        finally:
            _conclude(plan, run, store, session)
    return run, exit_code(run)


def _place(plan: Plan, lab: Lab | None) -> AbstractContextManager[object]:
    """Where the run keeps its files, released on every exit: the lab, a directory target's
    scratch directory, or nothing (only VMs measure)."""
    if lab is not None:
        return lab
    return _scratch(plan.workdir) if plan.target_dir is not None else nullcontext()


@contextmanager
def _scratch(workdir: Path) -> Iterator[None]:
    """A directory target gets fsbench's files in one scratch directory, removed at the end."""
    try:
        yield None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _targets(
    plan: Plan,
    lab: Lab | None,
    run: Run,
    store: Store,
    memory: set[str],
    guard: Guard,
    setup: PhaseClock,
    on_step: Callable[[str], None],
) -> list[Mounted]:
    """What the runner drives on this kernel: the lab's subjects, mounted and probed, or the
    directory target (none when only VMs measure); the environment learns first what the
    lab's existence tells (_environment_in_lab)."""
    with setup.phase("noise floor"):
        _environment_in_lab(plan, lab, run, memory)
    if lab is not None:
        return lab_targets(plan, lab, run, store, on_step, guard, setup)
    return [dir_target(plan)] if plan.target_dir is not None else []


def _measure(
    plan: Plan,
    lab: Lab | None,
    run: Run,
    targets: list[Mounted],
    store: Store,
    guard: Guard,
    setup: PhaseClock,
    progress: _Progress,
    session: _Session,
) -> None:
    """The rounds: the runner (traced, its images dealt out again on file: backing), with
    what else ran on the machine meanwhile named in the run's notes."""
    session.tracer = start_tracer(plan, lab, run)
    session.runner = runner = _runner(plan, run, targets, store, progress, session.tracer, setup)
    rotation = _rotation(plan, lab, targets, guard, runner)
    others = OthersWatch.start(run.run_id)  # what else ran meanwhile
    sampled = runner.on_sample  # read again between samples
    runner.on_sample = lambda: (others.tick(), sampled())[1]
    runner.execute()
    if busy := others.note():
        run.environment.notes.append(busy)
    if rotation is not None and run.schedule is not None:
        run.schedule.images = rotation.dealt


def damaged(run: Run) -> list[str]:
    """The measured subjects whose volume failed its integrity check after the workloads (a
    subject that failed, e.g. never mounted, is a failure of its own: exit 1)."""
    return [
        s.id
        for s in run.subjects
        if s.status != "failed" and s.integrity is not None and s.integrity.status == "failed"
    ]


def exit_code(run: Run) -> int:
    """130 interrupted; 4 a volume failed its integrity check (its results are stored and shown,
    but a script must not read the run as sound); 1 a subject or workload failed; 0 otherwise."""
    if run.status == "incomplete":
        return EXIT_INTERRUPTED
    if damaged(run):
        return EXIT_INTEGRITY
    failed = any(s.status == "failed" for s in run.subjects) or any(
        r.status == "failed" for r in run.results
    )
    return EXIT_FAILED if failed else EXIT_OK


def _lab(plan: Plan, on_step: Callable[[str], None]) -> Lab | None:
    """The lab, when the host measures subjects (None: a directory target, or only VMs),
    checked: everything that can be known to be wrong is refused before anything exists."""
    if plan.subjects is None or not (plan.subjects or plan.vm_stage is None):
        return None
    lab = Lab(
        plan.run_id,
        plan.backing,
        plan.size,
        plan.read_only,
        plan.destroy_data,
        plan.tune,
        age_seed=plan.age_seed,
        on_step=on_step,
        aged_images=aged_images,
    )
    try:
        lab.check(plan.subjects)
    except EnvironmentProblem as e:
        raise EnvironmentProblem(f"{e}{vm_hint(plan.subjects)}") from None
    return lab


def _new_run(plan: Plan) -> Run:
    run = Run(
        run_id=plan.run_id, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=plan.command
    )
    # A guest's environment is not kept (the host records the VM's): no tool versions, no
    # wake-up probe; each is a process start, a second or more under emulation.
    guest = in_guest()
    tools = [] if guest else tools_used(plan)
    run.environment = capture(tools, wakeups=not guest)
    run.environment.backing = plan.backing.describe()
    run.environment.backing_note = plan.backing.note
    run.environment.image_size = plan.size if plan.subjects is not None else None
    run.subjects.extend(plan.unavailable)
    return run


def _environment_in_lab(plan: Plan, lab: Lab | None, run: Run, memory: set[str]) -> None:
    """What the environment learns once the lab exists: the noise floor (in the run's own
    image directory, which release() removes), the tuning done, the clients' answers."""
    if plan.target_dir is not None:
        # Each fio server answers (version, OS) before the first sample.
        run.environment.clients = check_clients(plan.workloads, str(plan.workdir))
    if lab is not None and lab.record is not None and not in_guest():
        if noise_floor_wanted():
            run.environment.noise_floor = noise_floor(Path(lab.record.image_dir))
        else:
            run.environment.notes.append(NO_NOISE_FLOOR_NOTE)
    if lab is not None and lab.tuned:
        # The run is no longer exposed to what the note warns about: say what was done.
        kept = [n for n in run.environment.notes if n not in memory]
        run.environment.notes = [*lab.tuned, *kept]
    elif lab is None and plan.vm_stage is not None and not in_guest():
        # Only VMs measure: no lab here held anything off, so the note must not say it did.
        kept = [n for n in run.environment.notes if n not in memory]
        run.environment.notes = [*memory_notes(vms_only=True), *kept]


def _runner(
    plan: Plan,
    run: Run,
    targets: Sequence[Mounted],
    store: Store,
    progress: _Progress,
    tracer: ktrace.Tracer | None,
    setup: PhaseClock,
) -> Runner:
    # The minimum rounds first; the runner revises the total as answers settle.
    progress.on_total(len(targets) * len(plan.workloads) * plan.repeat)
    done = [0]

    def counted() -> None:
        done[0] += 1
        progress.on_sample()

    return Runner(
        run,
        targets,
        plan.workloads,
        plan.repeat,
        sink=store,
        on_step=progress.on_step,
        on_sample=counted,
        on_remaining=lambda n: progress.on_total(done[0] + n),
        on_eta=progress.on_eta,
        on_result=progress.on_result,
        adaptive=plan.adaptive,
        max_repeat=plan.max_repeat,
        band=plan.equivalence,
        time_budget_s=plan.time_budget_s,
        budget_origin=plan.started,
        warmup=plan.warmup,
        min_sample_s=plan.min_sample_s,
        tracer=tracer,
        setup=setup,
        # Every round's subject order shuffled, reproducibly from the run's id.
        order_seed=zlib.crc32(run.run_id.encode()),
    )


def _rotation(
    plan: Plan, lab: Lab | None, targets: Sequence[Mounted], guard: Guard, runner: Runner
) -> Rotation | None:
    """file: backing deals its images out to the subjects again before every round."""
    if lab is None or plan.backing.kind != "file":
        return None
    labs = [t for t in targets if isinstance(t, LabMounted)]
    rotation = Rotation(lab, labs, guard, zlib.crc32(f"{runner.run.run_id}:images".encode()))
    runner.setups = rotation
    return rotation


def _after_measuring(
    plan: Plan,
    lab: Lab | None,
    run: Run,
    store: Store,
    guard: Guard,
    on_step: Callable[[str], None],
) -> None:
    remeasure_wakeups(run.environment)  # before the checks and teardown load it
    if lab is not None and lab.record is not None and not in_guest():
        # Its start's twin: a floor that moved says so in the run's notes.
        remeasure_noise_floor(
            run.environment, Path(lab.record.image_dir), time.monotonic() - plan.started
        )
    if lab is not None:
        guard.conclude(lab, run, on_step)  # before teardown: the checks need its loop devices
    prove_o_direct(run.subjects, run.results)
    if plan.vm_stage is not None:
        plan.vm_stage(run, store, on_step)
        decide.restamp(run, plan.equivalence)


def _conclude(plan: Plan, run: Run, store: Store, session: _Session) -> None:
    """Whatever happened: the tracer stopped, the record finished, report and results written."""
    tracer, runner = session.tracer, session.runner
    if tracer is not None:
        tracer.stop()  # the lab's release stops it too, after a crash or SIGKILL
        run.environment.trace_probes = dict(tracer.status)
    run.finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if run.status == "running":
        run.status = "incomplete"
    if runner is not None and not run.results:
        run.results = list(runner.results.values())
    run.definitions = definitions(plan.workloads)  # after close(): cleanups' outcome
    decide_verdicts(run)
    # The report first: a rendering failure is then recorded in results.json and the
    # store, and the terminal says so, instead of being lost after the data is written.
    write_report_safely(run, plan.out_dir)
    write_results(run, plan.out_dir)
    store.finish_run(run)
    store.close()


def start_tracer(plan: Plan, lab: Lab | None, run: Run) -> ktrace.Tracer | None:
    """The run's tracer: it starts bpftrace for each traced run (sampler.TraceSession),
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


def decide_verdicts(run: Run) -> None:
    """The comparisons the report shows, decided once and stored with the run
    (Run.verdicts): every later show, export, report and diff renders them."""
    from fsbench.report.model import verdicts

    try:
        run.verdicts = verdicts(run)
    except Exception as exc:  # a failure here must not cost the run's data
        run.verdicts = []
        run.environment.report_error = f"verdicts not decided: {type(exc).__name__}: {exc}"


def write_report_safely(run: Run, out_dir: Path) -> None:
    """report.html beside results.json; a rendering problem must never cost the run's data."""
    if in_guest():
        return  # the host renders the one report of the merged run
    from fsbench.report.views.sections import write_report

    try:
        write_report(run, out_dir)
    except Exception as e:
        run.environment.report_error = f"report.html not written: {e}"


def write_results(run: Run, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "results.json.tmp"
    tmp.write_text(run.to_json())
    os.replace(tmp, out_dir / "results.json")


def definitions(workloads: list[Workload]) -> list[dict]:
    """Each user workload's definition once (a job file's phases share theirs)."""
    out: dict[str, dict] = {}
    for wl in workloads:
        d = wl.definition
        if callable(d):
            rec = d()
            out.setdefault(str(rec.get("id") or rec.get("name")), rec)
    return list(out.values())
