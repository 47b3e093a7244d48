"""The plan of one `compare` or `run`: what the checked command-line options resolve to (the
workloads, the repeat mode and budget, where results go), before anything is created. The
command line builds it with `plan_from_options`; `pipeline.execute` runs it."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsbench.errors import EnvironmentProblem, UsageError
from fsbench.lab.backing import Backing
from fsbench.lab.drivers import DRIVERS, availability
from fsbench.lab.subject import SubjectSpec, parse_subject, parse_subjects
from fsbench.records.schema import Run, Subject
from fsbench.records.store import Store, default_db_path
from fsbench.workloads.base import Workload


@dataclass
class Plan:
    subjects: list[SubjectSpec] | None  # None: a directory target
    explicit: bool
    workloads: list[Workload]
    repeat: int
    backing: Backing
    size: int
    out_dir: Path
    db: Path
    command: list[str]
    target_dir: Path | None = None
    unavailable: list[Subject] = field(default_factory=list)
    adaptive: bool = False
    max_repeat: int = 10
    equivalence: float = 0.02  # the ≈ band (--equivalence, as a fraction)
    time_budget_s: float | None = None
    read_only: bool = False
    destroy_data: bool = False
    scale: float = 1.0
    warmup: int = 1
    min_sample_s: float = 1.0
    tune: bool = True  # hold free page reporting off during a lab run
    # Subjects measured inside VMs with other kernels (src/fsbench/vm): run after the host's
    # subjects, merged into the same run. With it, subjects == [] means no host subject.
    vm_stage: Callable[[Run, Store, Callable[[str], None]], None] | None = None
    trace: bool = True  # kernel trace probes (bpftrace) around each sample, when available
    trace_probes: tuple[str, ...] | None = None  # which (--trace-probes); None: the default set
    integrity: bool = True  # check each lab subject's volume after its workloads
    age_seed: int = 1  # the aging workload's seed (--age-seed) for subjects with an age
    run_id: str = field(default_factory=lambda: new_run_id())
    # When the command started (time.monotonic): --time-budget counts from here, so the
    # images, the noise floor and the wake-up probe are inside it, as a user's clock sees.
    started: float = field(default_factory=time.monotonic)

    @property
    def workdir(self) -> Path:
        """A directory target's scratch directory, where fsbench's files go (removed at the
        end)."""
        assert self.target_dir is not None
        return self.target_dir / f".fsbench-{os.getpid()}"


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
                    unavailable=av.lacks,
                    available_in=_kernel_with(d.name) if d.kind == "kernel" else None,
                )
            )
    if not specs:
        raise EnvironmentProblem("no driver is available on this machine; see `fsbench doctor`")
    return specs, skipped, False


def vm_hint(specs: list[SubjectSpec]) -> str:
    """For subjects whose kernel driver this host lacks: the known kernel that has each, named
    as a subject (`ntfs@debian-sid`), and the command that measures them all in VMs — the
    kernel most of them need as `--kernel`, the others by their own (as the report's
    "not measured" line names them, report/model/answer.py). "" when a known kernel has none."""
    lacking = [
        s for s in specs if s.driver.kind == "kernel" and not availability(s.driver).available
    ]
    where = {s.id: _kernel_with(s.driver.name) for s in lacking}
    if not lacking or None in where.values():
        return ""
    kernels = list(where.values())
    name = max(dict.fromkeys(kernels), key=kernels.count)
    ids = " ".join(
        s.id if where.get(s.id) in (None, name) else f"{s.id}@{where[s.id]}" for s in specs
    )
    has = ", ".join(f"{sid}@{k}" for sid, k in where.items())
    return f"; a VM of a kernel that has it ({has}): fsbench compare {ids} --kernel {name}"


def _kernel_with(driver: str) -> str | None:
    """A known kernel (vm/kernels.py) whose modules have the driver this host lacks."""
    from fsbench.vm.kernels import providers

    hit = providers([driver])
    return hit[0] if hit else None


def plan_from_options(
    o: dict[str, Any], argv: list[str], default_budget_s: float, **plan_fields: Any
) -> Plan:
    """The plan for the checked options of `compare` or `run` (fsbench.cli.options): the
    workloads resolved (suite or names, --numjobs, the user's command, --clients, --manifest,
    placements), the repeat mode and budget, the output directory checked."""
    from fsbench.records.store import default_db_path
    from fsbench.registry import resolve_workloads
    from fsbench.schedule.dimensions.placement import parse_placements, with_placements

    own = []
    if o["command"] is not None:
        from fsbench.workloads.command import build

        steps = (o["prepare"], o["setup"], o["cleanup"])
        own.append(build(o["command"], *steps, o["input"], o["timeout"], o["as_user"]))
    wl = resolve_workloads(o["workloads"], o["suite"], o["numjobs"], own, o["timeout"])
    wl = diskmark_choices(wl, o, plan_fields.get("size"))
    if o.get("clients") is not None or o.get("clients_sweep") is not None:
        from fsbench.schedule.dimensions.clients import apply_clients

        wl = apply_clients(wl, o.get("clients"), o.get("clients_sweep"), o["scale"])
    if o["manifest"]:
        from fsbench.workloads.treehash import apply_manifest

        wl = apply_manifest(wl, str(o["manifest"]))
    # Placement is a dimension of the schedule, like a variant: one result per placement.
    placements = o["placement"] or parse_placements(None)
    one = [str(getattr(w, "id", w)) for w in wl if getattr(w, "one_per_test", False)]
    if len(placements) > 1 and one:
        raise UsageError(
            f"--placement {','.join(placements)}: {one[0]} is one KDiskMark test a subject "
            "(its grid has one cell each); give one placement"
        )
    wl = with_placements(wl, placements)
    if plan_fields.get("read_only"):
        writers = [str(w.id) for w in wl if not w.read_only_ok]
        if writers:
            raise UsageError(
                f"--read-only runs only read workloads; {', '.join(writers)} would write"
            )
    n, adaptive = o["repeat"]
    budget = o["time_budget"]
    if adaptive and budget is None:
        budget = default_budget_s
    run_id = new_run_id()
    out_dir = o["out"] if o["out"] is not None else default_out_dir(run_id)
    check_out_dir(out_dir)
    return Plan(
        run_id=run_id,
        workloads=wl,
        repeat=n,
        adaptive=adaptive,
        max_repeat=int(o["max_repeat"]),
        equivalence=float(o["equivalence"]) / 100.0,
        time_budget_s=budget,
        scale=o["scale"],
        warmup=o["warmup"],
        min_sample_s=o["min_sample_time"],
        out_dir=out_dir,
        db=o["db"] or default_db_path(),
        command=argv,
        trace=not o["no_trace"],
        trace_probes=o["trace_probes"],
        **plan_fields,
    )


def diskmark_choices(wl: list[Workload], o: dict[str, Any], image: int | None) -> list[Workload]:
    """`--diskmark-size` and `--diskmark-runtime` set on the KDiskMark tests; a test file
    larger than an image's files may take (workloads.base.FILE_FRACTION) is refused before anything
    is made, as KDiskMark's 1 GiB needs --size 2560M."""
    size, runtime = o.get("diskmark_size"), o.get("diskmark_runtime")
    if size is None and runtime is None:
        return wl
    from fsbench.workloads.base import FILE_FRACTION
    from fsbench.workloads.diskmark import with_choices

    if size is not None and image and size > image * FILE_FRACTION:
        need = -(-int(size / FILE_FRACTION) // 2**20)
        raise UsageError(
            f"--diskmark-size {size // 2**20}M: a subject's files may take "
            f"{FILE_FRACTION:.0%} of its image; use --size {need}M or more"
        )
    return with_choices(wl, size, runtime)


def new_run_id() -> str:
    # 24 random bits: with 16, scripts starting runs in one second into one store met "run
    # ... already exists" (a CI run of the option fuzz test: ~30 runs a second).
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def default_out_dir(run_id: str) -> Path:
    return default_db_path().parent / "runs" / run_id


def check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    if (out / "results.json").exists():
        raise UsageError(f"--out {out}: already holds a results.json; choose another directory")
    parent = out if out.exists() else out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--out {out}: cannot write there")
