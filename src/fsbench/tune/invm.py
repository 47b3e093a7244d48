"""A tune candidate measured in a VM: a driver this host's kernel lacks (ntfs3 for ntfs-3g).

The candidate and the untuned subject go into one VM booted with a kernel that has the driver
(vm/: fetched on first use, one image both copy, the guest's results merged into the run), so
their ratio is one machine's: a VM-against-host ratio would credit the driver with whatever
the VM itself changes. Under KVM the guest runs the tune's own settings; emulated (no vmx/svm,
like this development machine) a guest is 10-15x slower, so it gets a smaller image and files
(VM_SMALL) and its ratio is labelled not representative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fsbench.errors import EnvironmentProblem
from fsbench.records.schema import Run

if TYPE_CHECKING:
    from fsbench.vm import VMPlan

MiB = 1024 * 1024
GiB = 1024 * MiB
# An emulated guest's settings: files of ~10 MiB (ntfs-3g wrote 1.6 MiB/s unpinned in one here),
# a sample grown to 0.2 s at least, the 3 rounds a verdict needs and no more (each sample costs
# the guest ~9 s beside its work: fio's start, the cache preparation; measured: 10 rounds took
# 356 s where 3 had decided the ratio).
VM_SMALL = {"--size": "256M", "--scale": "0.1", "--min-sample-time": "0.2", "--max-repeat": "3"}
VM_SMALL_SIZE = 256 * MiB
# What a VM run costs, measured here (docs/tune.md): boots of 17-32 s emulated; the guest's
# fsbench starting (imports from the bytecode cache) and each subject's image copy, mount,
# probes and checks, ~85 s for two subjects; 13-30 s a subject and workload (3 rounds and the
# warm-up at VM_SMALL). The runs: ntfs-3g and ntfs3 on one workload 167 s, exfat-fuse and exfat
# on two 156 s.
BOOT_S = {"kvm": 10.0, "emulated": 30.0}
GUEST_S = {"kvm": 10.0, "emulated": 25.0}
PER_SUBJECT_S = {"kvm": 5.0, "emulated": 30.0}
# An emulated guest's measuring seconds per subject and workload; under KVM the host's own
# per-cell cost, a little more.
EMULATED_CELL_S = 35.0
KVM_FACTOR = 1.2
FETCH_S = 60.0  # a kernel not yet in the cache: apt update, ~100 MB, unpack, depmod, digest


def virtualization() -> str:
    """How a VM would run here: "kvm" or "emulated"."""
    from fsbench.vm.guest import virtualization as how

    return how()[0]


def vm_cost(
    kernel: str, subjects: int, workloads: int, host_cell_s: float, how: str | None = None
) -> float:
    """The seconds one VM run of `subjects` x `workloads` costs here, boot included."""
    how = how or virtualization()
    cell = EMULATED_CELL_S if how == "emulated" else host_cell_s * KVM_FACTOR
    total = BOOT_S[how] + GUEST_S[how] + subjects * (PER_SUBJECT_S[how] + workloads * cell)
    return total + (0.0 if cached(kernel) else FETCH_S)


def cached(kernel: str) -> bool:
    from fsbench.vm.kernels import load_cached

    return kernel.startswith("path:") or load_cached(kernel, verify=False) is not None


def vm_problem(backing: str) -> str | None:
    """Why no VM can run here (None: one can): its images live in the guest's RAM, and it
    needs virtme-ng and qemu."""
    if backing != "ram":
        return f"needs a VM (its images in the guest's RAM): not with --backing {backing}"
    from fsbench.vm.guest import vng_path

    try:
        vng_path()
    except EnvironmentProblem as e:
        return f"needs a VM: {e}"
    return None


def guest_args(workloads: list[str], size: int, how: str, budget_s: float) -> list[str]:
    """The guest's `fsbench compare` options: the tune's workloads, at compare's default
    placement (the untuned subject is measured as compare measures it, on the host too), and
    under emulation the small settings."""
    args = ["--workloads", ",".join(workloads)]
    if how == "emulated":
        return [*args, *(x for kv in VM_SMALL.items() for x in kv if x)]  # "": a flag
    return [*args, "--size", f"{max(1, size // MiB)}M", "--time-budget", f"{max(60, budget_s):.0f}"]


def guest_size(size: int, how: str) -> int:
    return VM_SMALL_SIZE if how == "emulated" else size


def vm_plan(kernel: str, subjects: list[str]) -> VMPlan:
    """One guest of `kernel` measuring `subjects` (the untuned one first), the kernel fetched on
    first use; EnvironmentProblem when it cannot be, or cannot mount one of them."""
    from fsbench.vm import plan

    vmplan = plan(subjects, kernel)
    assert vmplan is not None  # a guest kernel: never the host's
    lacking = [s.error for g in vmplan.groups for s in g.failed]
    if lacking:
        raise EnvironmentProblem(lacking[0] or f"kernel {kernel} cannot mount them")
    return vmplan


def plan_fields(
    kernel: str, subjects: list[str], workloads: list[str], size: int, budget_s: float
) -> dict[str, Any]:
    """The pipeline's plan fields for one VM run of `subjects` on `kernel`: nothing on the host,
    the VM stage with the guest's settings."""
    from fsbench.vm import stage
    from fsbench.vm.guest import VMSettings

    how = virtualization()
    args = guest_args(workloads, size, how, budget_s)
    run_all = stage(vm_plan(kernel, subjects), VMSettings(args=args, size=guest_size(size, how)))
    return {"subjects": [], "explicit": True, "unavailable": [], "vm_stage": run_all}


def measured_in(run: Run, kernel: str, untuned: str) -> tuple[str, bool, str]:
    """What a VM run was, in the change's words: the VM ("debian-6.12 (6.12.95+deb12-amd64)"),
    whether it ran emulated, and the line every output prints."""
    from fsbench.tune.choose import in_vm

    vm = next((v for v in run.environment.vms if v.kernel == kernel), None)
    if vm is None:
        return kernel, False, in_vm(kernel, untuned)
    emulated = vm.virtualization == "emulated"
    boot = f", booted in {vm.boot_seconds:.0f} s" if vm.boot_seconds else ""
    line = in_vm(kernel, untuned) + f": kernel {vm.release or kernel}{boot}"
    if emulated:
        line += (
            f"; emulated, {vm.why_emulated or 'no KVM'}: CPU-bound work 10-15x slower, its "
            "ratio not representative and no share of the gap computed; an emulated guest's "
            f"settings: {' '.join(x for kv in VM_SMALL.items() for x in kv if x)}"
        )
    if vm.status == "failed":
        line += f"; the VM failed: {vm.error}"
    return f"{kernel} ({vm.release or 'unknown release'})", emulated, line
