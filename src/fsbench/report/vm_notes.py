"""What a report says about a run's VMs: one sentence each, read by the terminal and HTML."""

from __future__ import annotations

from fsbench.schema import Run


def vm_notes(run: Run) -> list[str]:
    """Plain warnings first (emulated VMs), then what each VM was."""
    out = []
    for vm in run.environment.vms:
        size = f"{vm.cpus} CPUs, {vm.memory_bytes / 2**30:.1f} GiB"
        boot = f", booted in {vm.boot_seconds:.0f} s" if vm.boot_seconds is not None else ""
        where = f"VM {vm.kernel} ({vm.release or 'unknown release'}; {size}{boot})"
        if vm.status == "failed":
            out.append(f"{where} failed: {vm.error}")
        if vm.virtualization == "emulated":
            out.append(
                f"{where} ran under software emulation ({vm.why_emulated or 'no KVM'}): its "
                "absolute figures and ratios are NOT representative — a functional check only; "
                "its kernel probes were off unless --trace-probes asked for them (bpftrace "
                "compiles for minutes per traced run under emulation)"
            )
        elif vm.status == "ok":
            out.append(f"{where} ran with KVM")
    return out
