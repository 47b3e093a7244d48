"""Environment capture (stored with every run) and the doctor checks."""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from fsbench import __version__
from fsbench.lab.drivers import DRIVERS, availability, built_daemons, driver_version
from fsbench.lab.formats import FORMATS
from fsbench.lab.loops import READ_AHEAD_KB
from fsbench.lab.system import SBIN_PATH
from fsbench.probes import wakeup
from fsbench.probes.procfs import PAGE_REPORTING, ProcFS
from fsbench.records.schema import Environment, WakeupCost

# Tools later workloads need; doctor lists each with the Debian package that provides it.
TOOLS: dict[str, tuple[tuple[str, ...], str, str]] = {
    # name: (version argv, package, what it is for)
    "fio": (("--version",), "fio", "the I/O engine of every micro workload"),
    "xxhsum": (("--version",), "xxhash", "reference for the tree-hash workload"),
    "losetup": (("--version",), "util-linux", "attaches every image through a loop device"),
    "mount": (("--version",), "mount", "mounts kernel drivers"),
    "blkid": (("--version",), "util-linux", "checks a device for data before formatting"),
    "cc": (("--version",), "build-essential", "the compile workload"),
    "make": (("--version",), "make", "the compile workload"),
    "nginx": (("-v",), "nginx-light", "the web-serve workload's HTTP server"),
    "wrk": (("--version",), "wrk", "the web-serve workload's load client"),
    "bpftrace": (("--version",), "bpftrace", "the kernel trace probes (FUSE, block, sched, ...)"),
    # mkfs tools: their versions decide the on-disk layout every driver is measured on.
    "mkfs.ext4": (("-V",), "e2fsprogs", "formats ext4 images"),
    "mkfs.ext2": (("-V",), "e2fsprogs", "formats ext2 images"),
    "mkfs.xfs": (("-V",), "xfsprogs", "formats xfs images"),
    "mkfs.btrfs": (("--version",), "btrfs-progs", "formats btrfs images"),
    "mkntfs": (("--version",), "ntfs-3g", "formats NTFS images"),
    "mkfs.exfat": (("-V",), "exfatprogs", "formats exFAT images"),
    "mkfs.vfat": (("--help",), "dosfstools", "formats FAT images"),
}

SYSCTLS = [
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/dirty_bytes",
    "vm/dirty_background_bytes",
    "vm/dirty_expire_centisecs",
    "vm/dirty_writeback_centisecs",
    "vm/swappiness",
    "vm/vfs_cache_pressure",
]

_VER = re.compile(r"\d+\.\d+[\w.+~-]*")


def tool_path(name: str) -> str | None:
    return shutil.which(name, path=SBIN_PATH + ":" + os.environ.get("PATH", ""))


def tool_version(name: str) -> str | None:
    path = tool_path(name)
    if path is None:
        return None
    args = TOOLS.get(name, (("--version",), "", ""))[0]
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "present (version unknown)"
    for line in (out.stdout + out.stderr).splitlines():
        m = _VER.search(line)
        if m:
            return line.strip()
    return "present (version unknown)"


def cpu_model() -> str:
    try:
        for line in ProcFS().read("proc/cpuinfo").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def read_sysctls() -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        try:
            out[name.replace("/", ".")] = ProcFS().read(f"proc/sys/{name}").strip()
        except OSError:
            continue
    # Not a sysctl, but set the same way for the whole run: every loop device reads ahead this.
    out["loop.read_ahead_kb"] = str(READ_AHEAD_KB)
    return out


def memory_notes(fs: ProcFS | None = None, vms_only: bool = False) -> list[str]:
    """What on this machine makes memory-bound results erratic, and how to stop it.

    Free page reporting (virtio-balloon) hands freed memory back to the hypervisor; touching it
    again is up to 10x slower. Page cache emptied for a cold read, or a file deleted on tmpfs,
    is freed and reused all the time in a benchmark, so results swing with it. `vms_only`: a
    run whose every subject is measured in a VM, where no lab on this machine holds it off.
    """
    notes = []
    try:
        order = int((fs or ProcFS()).read(PAGE_REPORTING))
    except (OSError, ValueError):
        return notes
    if order > 10:  # MAX_PAGE_ORDER on x86: blocks of this order or larger are reported
        return notes
    head = (
        f"free page reporting is on (order {order}): freed memory goes back to the "
        "hypervisor and is slow to reuse, so RAM-bound samples vary; "
    )
    if vms_only:
        notes.append(
            head + "this run measured only inside VMs, whose memory this machine backs, and "
            "held nothing off here (a run with subjects on this kernel does); to stop it: "
            f"echo 11 > {PAGE_REPORTING}"
        )
    else:
        notes.append(
            head + "fsbench compare holds it off during its runs (unless --no-tune); to stop "
            f"it for good: echo 11 > {PAGE_REPORTING}"
        )
    return notes


def cpu_caches() -> dict[str, int]:
    """CPU cache sizes in bytes by level ({"L1d": ..., "L2": ..., "L3": ...}) of cpu0."""
    out: dict[str, int] = {}
    fs = ProcFS()
    for d in fs.glob("sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            level = fs.read(f"{d}/level").strip()
            kind = fs.read(f"{d}/type").strip()
            size = fs.read(f"{d}/size").strip()
        except OSError:
            continue
        name = f"L{level}" + ({"Data": "d", "Instruction": "i"}.get(kind, ""))
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1:], 1)
        try:
            out[name] = int(size.rstrip("KMG")) * mult
        except ValueError:
            continue
    return out


def wakeup_notes(w: WakeupCost | None, why_not: str | None) -> list[str]:
    """The environment's note on wake-up costs: only when they make placement matter."""
    if why_not:
        return [f"wake-up cost not measured: {why_not}"]
    if w is not None and wakeup.is_costly(w):
        return [wakeup.verdict(w)]
    return []


def measure_wakeups() -> tuple[WakeupCost | None, str | None]:
    try:
        return wakeup.measure(), None
    except wakeup.WakeupUnavailable as e:
        return None, str(e)


def remeasure_wakeups(env: Environment) -> None:
    """Measure the wake-up costs again after the last sample, into the start's record: the
    explanation then uses the calmer of the two (a figure inflated by a busy host at one
    moment would otherwise claim more time than the runs took)."""
    w = env.wakeup_us
    if w is None:
        return
    again, _ = measure_wakeups()
    if again is not None:
        w.same_cpu_end, w.cross_cpu_end = again.same_cpu, again.cross_cpu


def capture(tools: list[str] | None = None, wakeups: bool = True) -> Environment:
    """The environment of a run. `wakeups`: measure the wake-up costs first (≈ 0.2 s), before
    anything else the run starts can disturb them."""
    w, why_not = measure_wakeups() if wakeups else (None, None)
    names = tools if tools is not None else ["fio", "losetup"]
    versions = {n: tool_version(n) for n in names}
    env = Environment(
        kernel=platform.release(),
        cpu_model=cpu_model(),
        cpus=os.cpu_count() or 0,
        memory_bytes=psutil.virtual_memory().total,
        fio_version=versions.get("fio"),
        tools=versions,
        sysctl=read_sysctls(),
        hostname=socket.gethostname(),
        python=sys.version.split()[0],
        fsbench_version=__version__,
        wakeup_us=w,
    )
    env.cpu_caches = cpu_caches()
    env.notes = memory_notes() + wakeup_notes(w, why_not)
    from fsbench.vm.guest import virtualization

    # What a VM would meet here: the report's suggested `--kernel` command says so.
    env.virtualization, env.why_emulated = virtualization()  # type: ignore[assignment]
    return env


def doctor() -> dict[str, Any]:
    """What this machine can do: formats, drivers, tools, root, /dev/fuse, loop devices."""
    drivers = []
    for d in DRIVERS.values():
        av = availability(d)
        drivers.append(
            {
                "name": d.name,
                "fs": d.fs,
                "kind": d.kind,
                "description": d.description,
                "available": av.available,
                "version": driver_version(d) if av.available else None,
                "reason": av.reason or None,
            }
        )
    formats = []
    for f in FORMATS.values():
        path = tool_path(f.tool)
        formats.append(
            {
                "name": f.name,
                "mkfs": list(f.mkfs),
                "available": path is not None,
                "reason": None if path else f"{f.tool} not found; apt-get install {f.package}",
            }
        )
    tools = []
    for name, (_, package, purpose) in TOOLS.items():
        version = tool_version(name)
        tools.append(
            {
                "name": name,
                "available": version is not None,
                "version": version,
                "purpose": purpose,
                "install": None if version else f"apt-get install {package}",
            }
        )
    loop_ok = os.path.exists("/dev/loop-control")
    w, why_not = measure_wakeups()
    from fsbench.probes import trace as ktrace

    status = ktrace.availability(daemons=built_daemons(DRIVERS.values()))
    probes = [
        {"name": p.name, "tracepoints": list(p.tracepoints), "yields": p.yields,
         "status": status.get(p.name, "unknown")}
        for p in ktrace.PROBES
    ]  # fmt: skip
    return {
        "notes": memory_notes(),
        "wakeup_us": doctor_wakeups(w, why_not),
        "root": os.geteuid() == 0,
        "fuse": os.path.exists("/dev/fuse"),
        "loop": loop_ok,
        "kernel": platform.release(),
        "formats": formats,
        "drivers": drivers,
        "tools": tools,
        "kernels": _kernels(),
        "trace_probes": probes,
        "fuse_transports": _transports(),
    }


# The machine's own noise: one fio job (a warm read from the page cache, no file system work
# worth naming) repeated by raw fio. Its CV is the spread no subject can beat on this machine.
NOISE_RUNS = 5
NOISE_FILE_MIB = 64
NOISE_LOOPS = 8  # 512 MiB a run: ~0.1 s, well above fio's 1 ms runtime resolution
# The floor is measured again at the end only when the run lasted this many times what the
# floor itself costs (~1.5 s here): a shorter run would spend over a tenth of its time on
# watching the machine, and has little time to drift in.
REMEASURE_FACTOR = 10


# Tests only (tests/conftest.py sets it, as it does the fake workload): the floor costs ~2.7 s
# a run, ~100 s of the integration suite; the tests of the floor itself unset it.
NO_NOISE_FLOOR_ENV = "FSBENCH_TEST_NO_NOISE_FLOOR"
NO_NOISE_FLOOR_NOTE = "noise floor not measured (FSBENCH_TEST_NO_NOISE_FLOOR: a test's run)"


def noise_floor_wanted() -> bool:
    return not os.environ.get(NO_NOISE_FLOOR_ENV)


def noise_floor(directory: Path, runs: int = NOISE_RUNS) -> dict[str, Any] | None:
    """MiB/s of `runs` identical raw fio runs and their CV, or None without fio. The file
    lives in `directory` (a run's own image directory, which release() removes)."""
    began = time.monotonic()
    rates = noise_rates(directory, runs)
    if not rates:
        return None
    return {
        "seconds": round(time.monotonic() - began, 2),  # what measuring the floor cost
        "job": (
            f"raw fio: sequential read of a {NOISE_FILE_MIB} MiB page-cached file, 1 MiB "
            f"records, {NOISE_LOOPS} passes"
        ),
        "runs": len(rates),
        "mib_s": [round(r, 1) for r in rates],
        "cv": _cv(rates),
    }


def _cv(rates: list[float]) -> float | None:
    mean = sum(rates) / len(rates)
    sd = (sum((r - mean) ** 2 for r in rates) / (len(rates) - 1)) ** 0.5 if len(rates) > 1 else 0
    return sd / mean if mean else None


def remeasure_noise_floor(
    env: Environment, directory: Path, run_seconds: float | None = None
) -> None:
    """The noise floor again after the last sample (as the wake-up cost), into the start's
    record (`mib_s_end`, `cv_end`): whether the machine itself changed speed during the run
    the report's model decides from them (report/model/facts.py floor_moved). A run shorter
    than REMEASURE_FACTOR times the floor's own cost (`run_seconds` so far) records why it
    was not measured again (`end_not_measured`)."""
    floor = env.noise_floor
    if not floor or not floor.get("mib_s"):
        return
    cost = float(floor.get("seconds") or 0.0)
    if run_seconds is not None and run_seconds < REMEASURE_FACTOR * cost:
        floor["end_not_measured"] = (
            f"the run took {run_seconds:.0f} s, under {REMEASURE_FACTOR}× the floor's own "
            f"{cost:.1f} s"
        )
        return
    rates = noise_rates(directory, int(floor.get("runs") or NOISE_RUNS))
    if not rates:
        return
    floor["mib_s_end"] = [round(r, 1) for r in rates]
    floor["cv_end"] = _cv(rates)


def noise_rates(directory: Path, runs: int) -> list[float] | None:
    """MiB/s of `runs` identical raw fio reads of a page-cached file (None without fio)."""
    from fsbench.errors import WorkloadFailed
    from fsbench.workloads.fio import fio_binary, parse_fio_json

    if shutil.which("fio") is None:
        return None
    path = directory / "noise-floor.fio"
    argv = [
        fio_binary(),
        "--name=noise-floor",
        f"--filename={path}",
        f"--size={NOISE_FILE_MIB}M",
        "--bs=1M",
        "--ioengine=psync",
        "--invalidate=0",
        "--clocksource=clock_gettime",
        "--output-format=json",
    ]
    rates: list[float] = []
    try:
        subprocess.run([*argv, "--rw=write"], capture_output=True, check=True, timeout=60)
        for _ in range(runs):
            proc = subprocess.run(
                [*argv, "--rw=read", f"--loops={NOISE_LOOPS}"],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            out = parse_fio_json(proc.stdout, "read")
            rates.append(out["bytes"] / 2**20 / out["seconds"])
    except (OSError, subprocess.SubprocessError, WorkloadFailed):
        return None
    finally:
        path.unlink(missing_ok=True)
    return rates


def _transports() -> list[dict[str, Any]]:
    from fsbench.fuse.transports import doctor_rows

    return doctor_rows()


def _kernels() -> dict[str, Any]:
    """Kernels `compare --kernel` can boot in a VM, and how the VM would run here."""
    from fsbench.vm.guest import virtualization
    from fsbench.vm.kernels import listing

    virt, why = virtualization()
    return {"virtualization": virt, "why_emulated": why, "kernels": listing()}


def doctor_wakeups(w: WakeupCost | None, why_not: str | None) -> dict[str, Any]:
    """The wake-up costs as doctor reports them, with the verdict in words."""
    if w is None:
        return {"measured": False, "reason": why_not}
    ratio = w.cross_cpu / w.same_cpu if w.cross_cpu is not None and w.same_cpu > 0 else None
    return {
        "measured": True,
        "same_cpu": w.same_cpu,
        "cross_cpu": w.cross_cpu,
        "ratio": round(ratio, 2) if ratio is not None else None,
        "costly": wakeup.is_costly(w),
        "cpus": w.cpus,
        "method": w.method,
        "verdict": wakeup.verdict(w),
    }
