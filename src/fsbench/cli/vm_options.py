"""`compare --kernel ...`: the VM options checked and turned into the pipeline's plan fields.

The command line's side of the VM stage (fsbench.vm): which of the typed options a guest takes
(each option's `guest` in options.py), made into the guest's arguments; app.py stays thin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsbench.cli.options import HOST, PASS, options_for
from fsbench.errors import UsageError
from fsbench.lab.subject import parse_subject
from fsbench.vm import plan, stage
from fsbench.vm.guest import VMSettings


def wants_vm(subjects: tuple[str, ...], kernel: str | None) -> bool:
    return kernel is not None or any("@" in s for s in subjects)


def guest_args(o: dict[str, Any], raw: dict[str, Any]) -> list[str]:
    """The guest's `fsbench compare` options: every option the table passes (`guest` PASS) that
    the user typed, as typed (already checked); paths made absolute (the guest's working
    directory is not the user's)."""
    args: list[str] = []
    for opt in options_for("compare"):
        if opt.guest != PASS or opt.key not in o["given"]:
            continue
        if opt.flag:
            args.append(opt.name)
        else:
            text = raw[opt.key]
            args += [opt.name, str(Path(text).resolve()) if opt.path else str(text)]
    return args


def refuse_in_vm(o: dict[str, Any]) -> None:
    """What a guest cannot do, refused (also by `--dry-run`, which plans no VM): any backing
    but ram, and each option typed whose `guest` (fsbench.cli.options) says why not."""
    if o["backing"].kind != "ram":
        raise UsageError("--kernel runs its images in the VM's RAM: use --backing ram")
    for opt in options_for("compare"):
        if opt.key in o["given"] and opt.guest not in (PASS, HOST):
            raise UsageError(f"{opt.name} does not apply inside a VM ({opt.guest}); drop it")


def plan_fields(
    subjects: tuple[str, ...], o: dict[str, Any], raw: dict[str, Any]
) -> dict[str, Any] | None:
    """Plan fields for a run with guest kernels; None if every subject is on the host's.
    `o` holds the checked options (fsbench.cli.options.parse), `raw` them as typed; what is refused
    here is what a VM cannot do: each option whose `guest` says why, and any backing but ram."""
    p = plan(list(subjects), o["kernel"])
    if p is None:
        return None
    refuse_in_vm(o)
    numjobs = max(o.get("numjobs") or [1])
    settings = VMSettings(
        args=guest_args(o, raw),
        size=o["size"],
        memory=o["vm_memory"],
        cpus=o["vm_cpus"],
        numjobs=numjobs,
    )
    if o["vm_timeout"] is not None:
        settings.timeout = o["vm_timeout"]
    for g in p.groups:
        for s in g.subjects:
            parse_subject(s)
    return {
        "subjects": p.host,
        "explicit": True,
        "unavailable": [],
        "vm_stage": stage(p, settings),
    }
