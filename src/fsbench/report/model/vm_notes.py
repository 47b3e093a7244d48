"""What a report says about a run's VMs: one sentence each, read by the terminal and HTML."""

from __future__ import annotations

from fsbench.records.schema import Run
from fsbench.units import fmt_value

# The small check docs/vm-kernels.md recommends where VMs are emulated (about 2 minutes on a
# 2-CPU machine): every output that suggests a `--kernel` command there appends these, and
# tests/unit/test_vm_caveat.py holds the doc to them.
SMALL_FLAGS = "--size 64M --repeat 1 --warmup 0 --scale 0.2 --min-sample-time 0.2 --no-trace"


def caveat_pieces(why: str | None) -> list[str]:
    """Why a VM here is slow and proves only that a driver works, in pieces a terminal line may
    break between: the same words in `doctor`, the terminal, the HTML page and markdown."""
    return [
        f"VMs here run emulated ({why or 'no KVM'}):",
        "CPU-bound work 10–15× slower,",
        "a functional check only,",
        "its figures not representative",
    ]


def emulation_caveat(why: str | None) -> str:
    return " ".join(caveat_pieces(why))


def vm_notes(run: Run) -> list[str]:
    """Plain warnings first (emulated VMs), then what each VM was, then what keeps a run over
    several kernels like with like: one image's bytes for all, and the anchor between them."""
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
    return out + same_bytes(run) + anchor_notes(run)


def same_bytes(run: Run) -> list[str]:
    """Each format's subjects across kernels measured copies of one image (its sha256)."""
    by_fs: dict[str, dict[str, set[str]]] = {}
    for s in run.subjects:
        if s.image_sha256 and s.kernel:
            by_fs.setdefault(s.fs, {}).setdefault(s.image_sha256, set()).add(s.kernel)
    out = []
    for fs, images in sorted(by_fs.items()):
        kernels = sorted(set().union(*images.values()))
        if len(kernels) < 2:
            continue
        if len(images) == 1:
            digest = next(iter(images))[:12]
            out.append(
                f"{fs} on {', '.join(kernels)}: every subject measured a copy of one image "
                f"(sha256 {digest}…), made once on this machine for every guest"
            )
        else:
            out.append(f"{fs} on {', '.join(kernels)}: the guests' images differ ({len(images)})")
    return out


def anchor_notes(run: Run) -> list[str]:
    """The same driver measured on several kernels: what the kernels alone change, per
    workload, so a difference between two drivers on two kernels can be read against it."""
    kernel_of = {s.id: s.kernel for s in run.subjects if s.kernel and s.status == "ok"}
    base: dict[str, dict[str, str]] = {}  # driver id without @kernel -> kernel -> subject id
    for sid, kernel in kernel_of.items():
        head, _, _ = sid.rpartition("@")
        base.setdefault(head or sid, {})[kernel] = sid  # type: ignore[index]
    added = {a for vm in run.environment.vms for a in vm.anchors}
    out = []
    for name, on in sorted(base.items()):
        if len(on) < 2:
            continue
        parts = []
        for wid in dict.fromkeys(r.workload_id or r.workload for r in run.results):
            figures = []
            for kernel, sid in sorted(on.items()):
                r = next(
                    (
                        r
                        for r in run.results
                        if r.subject == sid and (r.workload_id or r.workload) == wid
                    ),
                    None,
                )
                if r is not None and r.status == "ok" and r.median is not None:
                    figures.append(f"{fmt_value(r.median)} {r.unit} on {kernel}")
            if len(figures) > 1:
                parts.append(f"{wid} {' vs '.join(figures)}")
        why = " (added by fsbench as the anchor)" if any(i in added for i in on.values()) else ""
        out.append(
            f"anchor {name} on {', '.join(sorted(on))}{why}: the same driver on each kernel, so "
            f"its difference is the kernels' and the VMs' — "
            + ("; ".join(parts) or "no result on more than one kernel")
            + "; read the other drivers' differences across kernels against it"
        )
    return out
