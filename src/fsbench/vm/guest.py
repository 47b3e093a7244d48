"""One throw-away VM: boot a kernel with virtme-ng, run fsbench inside it, bring its results back.

The guest sees the host's root read-only (virtme-ng's view), so it runs this very checkout and
virtual environment; it formats, mounts and measures in its own RAM (its /dev/shm and /run are
its own), and only the share directory is writable to it. Its results.json comes back through
the share and is merged into the host's run. The VM's processes all carry FSBENCH_VM=<marker>
in their environment and form one process group; the marker, the group and the work directory
are in the run's state record before the first process starts, so `release` (normal teardown
and `fsbench cleanup` alike) kills them and removes every temporary file.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsbench.errors import EnvironmentProblem
from fsbench.lab.drivers import DRIVERS
from fsbench.lab.lab import PRISTINE_DIR_ENV
from fsbench.lab.state import StateRecord, release
from fsbench.probes import processes
from fsbench.probes.procfs import ProcFS
from fsbench.records.notecodes import Note
from fsbench.records.schema import VM, Run, Subject
from fsbench.vm.kernels import Kernel, cache_root, slug

MiB = 1024 * 1024
GiB = 1024 * MiB
# The guest's own needs beside the images: kernel, Python with numpy/scipy, fio, page cache.
BASE_MEMORY = 768 * MiB
BOOT_TIMEOUT = {"kvm": 60.0, "emulated": 240.0}  # from start to the guest's first line
SILENT_CONSOLE = ": the console printed nothing"
POWEROFF_TIMEOUT = 30.0  # from the guest's last line to qemu's exit


@dataclass
class GuestGroup:
    """The subjects one kernel measures (empty: every driver the guest offers)."""

    kernel: Kernel
    subjects: list[str]  # as the guest's command line takes them: driver[:options]
    tag: bool  # ids carry @kernel (a run over more than one kernel)
    failed: list[Subject] = field(default_factory=list)  # refused before booting
    # FUSE subjects fsbench added to this guest as the anchor between kernels (vm.add_anchors).
    anchors: list[str] = field(default_factory=list)


@dataclass
class VMSettings:
    args: list[str]  # the guest's `fsbench compare` options (workloads, repeats, size, ...)
    size: int
    memory: int | None = None  # --vm-memory; None: sized from the run
    cpus: int | None = None  # --vm-cpus
    timeout: float = 4 * 3600.0  # the whole guest run, boot included
    numjobs: int = 1
    # The images the host made once for every guest (vm/images.py), given read-only.
    pristine_dir: str | None = None


def virtualization() -> tuple[str, str | None]:
    """("kvm", None) when qemu can use KVM here, else ("emulated", why not)."""
    if not os.path.exists("/dev/kvm"):
        return "emulated", "no /dev/kvm"
    try:
        flags = ProcFS().read("proc/cpuinfo").split()
    except OSError:
        flags = []
    if "vmx" not in flags and "svm" not in flags:
        return "emulated", "the CPU offers no vmx/svm (no nested virtualization)"
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as e:
        return "emulated", f"/dev/kvm: {e.strerror}"
    os.close(fd)
    return "kvm", None


def host_memory_available() -> int:
    try:
        return ProcFS().meminfo(("MemAvailable",))["MemAvailable"]
    except (OSError, KeyError):
        pass
    return 0


def size_vm(
    image_size: int,
    formats: int,
    subjects: int,
    numjobs: int,
    host_cpus: int,
    host_available: int,
    memory: int | None = None,
    cpus: int | None = None,
) -> tuple[int, int]:
    """Guest memory and CPUs for a run: its RAM images (a pristine image per format beside a
    copy per subject, as the lab keeps them) plus the guest's base and a page cache as large
    as one image; one CPU per fio job plus one for the driver's daemon and kernel threads."""
    if memory is None:
        need = BASE_MEMORY + image_size * (min(1, formats) + subjects) + image_size
        memory = -(-need // (128 * MiB)) * 128 * MiB
    if cpus is None:
        cpus = max(1, min(host_cpus, max(2, numjobs + 1)))
    if host_available and memory > host_available * 0.9:
        raise EnvironmentProblem(
            f"the VM needs {memory / GiB:.1f} GiB of memory and this machine has "
            f"{host_available / GiB:.1f} GiB available; use a smaller --size or fewer subjects"
        )
    return memory, cpus


def vng_path() -> str:
    here = Path(sys.executable).parent / "vng"
    found = str(here) if here.exists() else shutil.which("vng")
    if not found:
        raise EnvironmentProblem("virtme-ng (vng) is not installed; run scripts/setup.sh")
    if not shutil.which("qemu-system-x86_64"):
        raise EnvironmentProblem("qemu-system-x86_64 is missing; apt-get install qemu-system-x86")
    return found


def bytecode_cache() -> Path:
    """Where the guest's Python finds its modules compiled (PYTHONPYCACHEPREFIX): fsbench's
    own cache, not __pycache__ beside the sources, which the user may keep free of bytecode."""
    return cache_root().parent / "pycache" / sys.implementation.cache_tag


def warm_bytecode(prefix: Path) -> bool:
    """Compile, natively and once, what the guest will import into the guest's bytecode cache.

    Under emulation the guest compiles at a fifteenth of native speed: without bytecode the
    imports alone took ~40 s of a ~3-minute test. The host has imported nearly everything
    the guest will (the command line, the pipeline, numpy, pydantic); fsbench's own modules
    are all compiled too. What is left the guest compiles and writes there itself, once.
    Up-to-date files are skipped (a header read each), so a warm cache costs milliseconds.
    False if the cache cannot be written: the guest then compiles in memory, only slower.
    """
    import compileall

    import fsbench

    files = {f for m in list(sys.modules.values()) if (f := getattr(m, "__file__", None) or "")}
    files = {f for f in files if f.endswith(".py")}
    files |= {str(p) for p in Path(fsbench.__file__).parent.rglob("*.py")}
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    old = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)  # read by importlib's cache_from_source, as compileall uses
    try:
        for f in sorted(files):
            compileall.compile_file(f, quiet=2)  # a file it cannot write is skipped, not raised
    finally:
        sys.pycache_prefix = old
    return os.access(prefix, os.W_OK)


def guest_script(
    share: Path,
    subjects: list[str],
    args: list[str],
    modules: list[str],
    pycache: Path | None,
    pristine_dir: str | None = None,
) -> str:
    """The guest's command: load what the lab needs, run fsbench, leave the exit code."""
    s = shlex.quote(str(share))
    argv = [sys.executable, "-m", "fsbench", "compare", *subjects, *args]
    argv += ["--out", f"{share}/out", "--db", "/run/fsbench-guest/results.db"]
    mods = " ".join(shlex.quote(m) for m in ["loop", *modules])
    return "\n".join(
        [
            "#!/bin/sh",
            f"uname -r > {s}/booted",
            # Loaded up front: the guest has no udev to autoload them on first use.
            f"for m in {mods}; do modprobe -q $m 2>/dev/null; done",
            "mkdir -p /run/fsbench-guest /tmp/fsbench-mpl",
            f"cd {shlex.quote(os.getcwd())} 2>/dev/null || cd /",
            # The report is the host's job (one report for the merged run); the guest's state
            # and store stay in its own RAM and die with it.
            "export FSBENCH_STATE_DIR=/run/fsbench-guest FSBENCH_IN_VM=1",
            "export MPLCONFIGDIR=/tmp/fsbench-mpl",
            *([f"export {PRISTINE_DIR_ENV}={shlex.quote(pristine_dir)}"] if pristine_dir else []),
            *(
                [
                    f"export PYTHONPYCACHEPREFIX={shlex.quote(str(pycache))}",
                    "unset PYTHONDONTWRITEBYTECODE",  # it writes only to the cache above
                ]
                if pycache is not None
                else []
            ),
            f"{shlex.join(argv)} > {s}/stdout 2> {s}/stderr",
            f"echo $? > {s}/rc.tmp && mv {s}/rc.tmp {s}/rc",
            "",
        ]
    )


def vng_argv(
    kernel: Kernel,
    script: Path,
    share: Path,
    memory: int,
    cpus: int,
    kvm: bool,
    pycache: Path | None = None,
    pristine_dir: str | None = None,
) -> list[str]:
    argv = [vng_path(), "--run", kernel.image]
    if not kvm:
        argv.append("--disable-kvm")
    argv += ["--memory", f"{memory // MiB}M", "--cpus", str(cpus)]
    argv += ["--rwdir", str(share)]
    if pycache is not None:
        argv += ["--rwdir", str(pycache)]
    if pristine_dir is not None:
        argv += ["--rodir", pristine_dir]
    argv += ["--exec", f"sh {script}"]
    return argv


def kernel_modules(kernel: Kernel) -> list[str]:
    """The modules of fsbench's drivers in this kernel (loaded before the guest's run)."""
    offered = set(kernel.drivers())
    mods = [d.module for d in DRIVERS.values() if d.kind == "kernel" and d.name in offered]
    return [*mods, "fuse"]


@dataclass
class GuestOutcome:
    vm: VM
    run: Run | None = None
    error: str | None = None


def guest_trace_args(args: list[str], kvm: bool) -> list[str]:
    """An emulated guest is not traced unless --trace-probes asks for it: bpftrace compiles
    its program for each traced run, which takes minutes under emulation, for figures of a
    functional check (vm_notes says so)."""
    if kvm or "--no-trace" in args or "--trace-probes" in args:
        return args
    return [*args, "--no-trace"]


def run_guest(
    run_id: str,
    group: GuestGroup,
    settings: VMSettings,
    on_step: Callable[[str], None] = lambda _m: None,
    formats: int = 1,
) -> GuestOutcome:
    """Boot, measure, collect, release. Never raises for a guest failure: the outcome says."""
    vm = _vm_record(group, settings, formats)
    kvm = vm.virtualization == "kvm"
    memory, cpus = vm.memory_bytes, vm.cpus
    vng = vng_path()
    marker = f"{run_id}-vm-{slug(group.kernel.name)}"
    work = Path(tempfile.gettempdir()) / f"fsbench-{marker}"
    rec = StateRecord(
        run_id=marker,
        pid=os.getpid(),
        pid_start=processes.start_time(os.getpid()),
        image_dir="",
        mount_dir="",
        env_marker=marker,
        temp_paths=[str(work)],
    )
    rec.save()  # before the directory or any process exists
    try:
        share, tmp = work / "share", work / "tmp"
        work.mkdir()
        # Its copy of the record, before anything else is in it: `fsbench cleanup` finds the
        # directory and its processes by it even when the state directory is gone.
        rec.save()
        share.mkdir()
        tmp.mkdir()
        pycache: Path | None = bytecode_cache()
        if not warm_bytecode(pycache):
            pycache = None
        script = work / "guest.sh"
        args = guest_trace_args(settings.args, kvm)
        script.write_text(
            guest_script(
                share,
                group.subjects,
                args,
                kernel_modules(group.kernel),
                pycache,
                settings.pristine_dir,
            )
        )
        argv = vng_argv(
            group.kernel, script, share, memory, cpus, kvm, pycache, settings.pristine_dir
        )
        argv[0] = vng
        # vng starts virtme-run by name: the environment's bin first, or a venv Python run
        # without activation fails with "virtme-run: not found" (qemu exited 127).
        path = os.pathsep.join([str(Path(vng).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "FSBENCH_VM": marker, "TMPDIR": str(tmp), "PATH": path}
        on_step(
            f"booting {group.kernel.name} ({vm.virtualization}, {cpus} CPUs, {memory // MiB} MiB)"
        )
        error = _boot(argv, env, work, rec, vm, settings.timeout, on_step, group.kernel.name)
        return _collect(share, vm, error)
    finally:
        release(rec)


def _vm_record(group: GuestGroup, settings: VMSettings, formats: int) -> VM:
    """The VM as the results will describe it: its kernel, virtualization, CPUs and memory."""
    kvm_state, why = virtualization()
    n = len(group.subjects) or len(group.kernel.drivers())
    memory, cpus = size_vm(
        settings.size,
        formats,
        n,
        settings.numjobs,
        os.cpu_count() or 1,
        host_memory_available(),
        settings.memory,
        settings.cpus,
    )
    return VM(
        kernel=group.kernel.name,
        release=group.kernel.release,
        source=group.kernel.source,
        packages=dict(group.kernel.packages),
        sha256=group.kernel.sha256,
        virtualization="kvm" if kvm_state == "kvm" else "emulated",
        why_emulated=why,
        cpus=cpus,
        memory_bytes=memory,
    )


def _collect(share: Path, vm: VM, error: str | None) -> GuestOutcome:
    """The guest's results.json, or why there is none; a failure marks the VM failed."""
    outcome = GuestOutcome(vm=vm, error=error)
    results = share / "out" / "results.json"
    if results.is_file():
        try:
            outcome.run = Run.model_validate_json(results.read_text())
        except ValueError as e:
            outcome.error = outcome.error or f"the guest's results.json is unreadable: {e}"
    if outcome.error is None and outcome.run is None:
        outcome.error = _guest_failure(share)
    if outcome.error:
        vm.status, vm.error = "failed", outcome.error
    return outcome


def _wait(
    proc: subprocess.Popen,
    share: Path,
    vm: VM,
    started: float,
    timeout: float,
    on_step: Callable[[str], None],
    name: str,
) -> str | None:
    """Bounded waits: for the boot, for the guest's run, for qemu to power off."""
    boot_limit = BOOT_TIMEOUT[vm.virtualization]
    booted = False
    while True:
        now = time.monotonic() - started
        if not booted and (share / "booted").exists():
            booted = True
            vm.boot_seconds = round(now, 1)
            vm.release = (share / "booted").read_text().strip() or vm.release
            on_step(f"measuring inside {name} (booted in {now:.0f} s)")
        if (share / "rc").exists():
            break
        if proc.poll() is not None:
            if not booted:
                return f"kernel {name} did not boot (qemu exited {proc.returncode})"
            return f"the VM with {name} stopped before fsbench finished in it (kernel panic?)"
        if not booted and now > boot_limit:
            return f"kernel {name} did not boot within {boot_limit:.0f} s"
        if now > timeout:
            return f"the VM with {name} did not finish within {timeout:.0f} s (--vm-timeout)"
        time.sleep(0.25)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(POWEROFF_TIMEOUT)  # the guest powers off by itself; release kills it if not
    return None


def _boot(
    argv: list[str],
    env: dict[str, str],
    work: Path,
    rec: StateRecord,
    vm: VM,
    timeout: float,
    on_step: Callable[[str], None],
    name: str,
) -> str | None:
    """Start the VM and wait for it (_wait); why it failed, with the console's last line."""
    share = work / "share"
    for attempt in (1, 2):
        with (work / "console.log").open("wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # one process group: vng, virtme-run, qemu
            )
            rec.processes.append([proc.pid, processes.start_time(proc.pid)])
            rec.save()
            error = _wait(proc, share, vm, started, timeout, on_step, name)
        # The console log goes with the VM's temporary directory: its last line is the
        # only trace of why qemu gave up (before the boot) or the guest died.
        tail = console_tail(work / "console.log") if error else ""
        if attempt == 1 and _silent_start_failure(proc, vm, tail):
            # qemu gone before the guest's first line with not a word on the console (vng's
            # 255: qemu ended unexpectedly), seen in CI's first VM test beside the lab tests,
            # its cause not found. Once more, and said; a kernel that cannot boot says so on
            # its console, or fails again.
            on_step(f"qemu exited {proc.returncode} before {name} printed "
                    "anything: starting it once more")  # fmt: skip
            continue
        break
    return error + tail if error else None


def _silent_start_failure(proc: subprocess.Popen, vm: VM, tail: str) -> bool:
    """qemu ended before the guest booted and the console printed nothing at all."""
    return proc.returncode is not None and not vm.boot_seconds and tail == SILENT_CONSOLE


def console_tail(log: Path) -> str:
    """': <the console's last line>' (a failed boot's reason in qemu's or vng's words), or ''."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:300]}" if lines else SILENT_CONSOLE


def _guest_failure(share: Path) -> str:
    """One line for a guest fsbench that left no results: its own last line of stderr."""
    rc = (share / "rc").read_text().strip() if (share / "rc").exists() else "?"
    try:
        lines = [x for x in (share / "stderr").read_text().splitlines() if x.strip()]
    except OSError:
        lines = []
    last = next(
        (x for x in reversed(lines) if x.startswith("fsbench:")), lines[-1] if lines else ""
    )
    return f"fsbench in the VM exited {rc}: {last.removeprefix('fsbench: ') or 'no message'}"


def add_guest_time(run: Run, guest: Run) -> None:
    """The guest's measuring time (and its phases) into the host's schedule: the host's runner
    measured nothing of a guest's subjects, so its own schedule says 0 s for a VM-only run."""
    g = guest.schedule
    if g is None or g.spent_s is None:
        return
    if run.schedule is None:
        run.schedule = g.model_copy(update={"orders": [], "phases": {}, "spent_s": 0.0})
    sc = run.schedule
    sc.spent_s = round((sc.spent_s or 0.0) + g.spent_s, 1)
    for phase, seconds in g.phases.items():
        sc.phases[phase] = round(sc.phases.get(phase, 0.0) + seconds, 2)


def merge(run: Run, outcome: GuestOutcome, group: GuestGroup) -> list[Subject]:
    """The guest's subjects and results into the host's run; returns the subjects added."""
    name = group.kernel.name
    suffix = f"@{name}" if group.tag else ""
    added: list[Subject] = []
    emulated = outcome.vm.virtualization == "emulated"
    if outcome.run is not None:
        add_guest_time(run, outcome.run)
        for s in outcome.run.subjects:
            s.id += suffix
            s.kernel = name
            added.append(s)
        for r in outcome.run.results:
            r.subject += suffix
            if emulated:
                r.add_note(Note(code="emulated"))
            run.results.append(r)
    if outcome.error:
        have = {s.id for s in added}
        for text in group.subjects:
            sid = text + suffix
            if sid in have:
                continue
            d = DRIVERS[text.partition(":")[0]]
            added.append(
                Subject(
                    id=sid,
                    driver=d.name,
                    fs=d.fs,
                    kind=d.kind,  # type: ignore[arg-type]
                    mount_options=text.partition(":")[2],
                    kernel=name,
                    status="failed",
                    error=outcome.error,
                )
            )
    added += group.failed
    outcome.vm.subjects = [s.id for s in added]
    outcome.vm.anchors = [a + suffix for a in group.anchors]
    run.subjects.extend(added)
    run.environment.vms.append(outcome.vm)
    return added
