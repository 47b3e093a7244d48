"""`compare --kernel ...`: the VM options checked and turned into the pipeline's plan fields.

Kept out of cli.py so the command stays thin: everything about VMs lives in this package.
"""

from __future__ import annotations

from typing import Any

from fsbench.errors import UsageError
from fsbench.lab.backing import Backing, parse_size
from fsbench.lab.subject import parse_subject
from fsbench.vm import plan, stage
from fsbench.vm.guest import VMSettings


def wants_vm(subjects: tuple[str, ...], kernel: str | None) -> bool:
    return kernel is not None or any("@" in s for s in subjects)


def guest_args(common: dict[str, Any], size: str, no_tune: bool) -> list[str]:
    """The guest's `fsbench compare` options: the user's own, as given (already checked)."""
    args = ["--size", size, "--backing", "ram", "--warmup", str(common["warmup"])]
    args += ["--repeat", str(common["repeat"]), "--max-repeat", str(common["max_repeat"])]
    args += ["--scale", str(common["scale"])]
    for opt in (
        "workloads",
        "suite",
        "numjobs",
        "time_budget",
        "min_sample_time",
        "placement",
        "trace_probes",
        "equivalence",
    ):
        if common.get(opt):
            args += [f"--{opt.replace('_', '-')}", str(common[opt])]
    if no_tune:
        args.append("--no-tune")
    if common.get("no_trace"):
        args.append("--no-trace")
    return args


def refuse_in_vm(
    backing: Backing, read_only: bool, destroy_data: bool, common: dict[str, Any]
) -> None:
    """What a guest cannot do, refused (also by `--dry-run`, which plans no VM)."""
    if backing.kind != "ram":
        raise UsageError("--kernel runs its images in the VM's RAM: use --backing ram")
    if read_only or destroy_data or common.get("manifest"):
        raise UsageError("--read-only, --destroy-data and --manifest do not apply inside a VM")


def plan_fields(
    subjects: tuple[str, ...],
    kernel: str | None,
    backing: Backing,
    size: str,
    read_only: bool,
    destroy_data: bool,
    no_tune: bool,
    common: dict[str, Any],
    vm_memory: int | None,
    vm_cpus: int | None,
    vm_timeout: float | None,
) -> dict[str, Any] | None:
    """Plan fields for a run with guest kernels; None if every subject is on the host's.
    `common` holds the measuring options as typed, `vm_*` parsed (both checked already by
    fsbench.options); what is refused here is only what a VM cannot do."""
    p = plan(list(subjects), kernel)
    if p is None:
        return None
    refuse_in_vm(backing, read_only, destroy_data, common)
    numjobs = max((int(n) for n in (common.get("numjobs") or "1").split(",") if n), default=1)
    settings = VMSettings(
        args=guest_args(common, size, no_tune),
        size=parse_size(size),
        memory=vm_memory,
        cpus=vm_cpus,
        numjobs=numjobs,
    )
    if vm_timeout is not None:
        settings.timeout = vm_timeout
    for g in p.groups:
        for s in g.subjects:
            parse_subject(s)
    return {
        "subjects": p.host,
        "explicit": True,
        "unavailable": [],
        "vm_stage": stage(p, settings),
    }
