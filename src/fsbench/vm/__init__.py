"""Runs the lab inside throw-away VMs booted with other kernels.

`plan` splits the subjects by kernel (`ntfs3@debian-6.12`, `ext4@host`, or all on `--kernel`),
resolves (and on first use fetches) each guest kernel and returns the host's subjects and the
stage the pipeline runs after them: one VM per guest kernel, its results merged into the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fsbench.errors import LabError, UsageError
from fsbench.lab import ntfsck
from fsbench.lab.drivers import availability
from fsbench.lab.state import release
from fsbench.lab.subject import SubjectSpec, parse_subject
from fsbench.records.schema import VM, Run, Subject
from fsbench.records.store import Store
from fsbench.vm import images
from fsbench.vm.guest import (
    GuestGroup,
    GuestOutcome,
    VMSettings,
    merge,
    run_guest,
    virtualization,
)
from fsbench.vm.kernels import HOST, Kernel, check_name, load_cached, resolve, split_subject


@dataclass
class VMPlan:
    host: list[SubjectSpec]  # measured on this kernel, ids tagged @host in a mixed run
    groups: list[GuestGroup] = field(default_factory=list)


def group_subjects(texts: list[str], default_kernel: str | None) -> dict[str, list[str]]:
    """Subjects by kernel name, in the order given; ids checked (known driver, no twice)."""
    if default_kernel is not None:
        check_name(default_kernel)
    groups: dict[str, list[str]] = {}
    seen: set[str] = set()
    for text in texts:
        head, kernel = split_subject(text)
        spec = parse_subject(head)  # bad driver or option: one line, exit 2
        kernel = kernel or default_kernel or HOST
        key = f"{spec.id}@{kernel}"
        if key in seen:
            raise UsageError(f"subject {key!r} given twice")
        seen.add(key)
        groups.setdefault(kernel, []).append(spec.id)
    if not texts and default_kernel is not None:
        groups[default_kernel] = []
    return groups


def _lacking(kernel: Kernel, subject: str, tag: bool) -> Subject | None:
    """A failed subject record when the guest cannot mount this driver, else None."""
    spec = parse_subject(subject)
    d = spec.driver
    why = None
    if d.name not in kernel.drivers():
        what = f"{d.module} module" if d.kind == "kernel" else "FUSE"
        why = f"kernel {kernel.name} ({kernel.release}) has no {what}"
    elif d.kind == "fuse" and d.binary_path() is None:
        why = availability(d).reason  # the guest runs the host's binaries
    if why is None:
        return None
    return Subject(
        id=spec.id + (f"@{kernel.name}" if tag else ""),
        driver=d.name,
        fs=d.fs,
        kind=d.kind,  # type: ignore[arg-type]
        mount_options=spec.options,
        kernel=kernel.name,
        status="failed",
        error=why,
    )


def add_anchors(groups: dict[str, list[str]]) -> dict[str, list[str]]:
    """Across guest kernels, a FUSE subject named on one is measured on every other too: the
    same daemon binary on each kernel is the anchor that tells a driver's difference from the
    kernel's (`ntfs@debian-sid ntfs3@debian-6.12 ntfs-3g@debian-sid` also measures
    ntfs-3g@debian-6.12). Adds them to `groups`; returns kernel -> the subjects added."""
    guests = [k for k in groups if k != HOST]
    if len(guests) < 2:
        return {}
    fuse = [s for k in guests for s in groups[k] if parse_subject(s).driver.kind == "fuse"]
    added: dict[str, list[str]] = {}
    for s in dict.fromkeys(fuse):
        for k in guests:
            if s not in groups[k]:
                groups[k].append(s)
                added.setdefault(k, []).append(s)
    return added


def plan(texts: list[str], default_kernel: str | None) -> VMPlan | None:
    """None when everything runs on the host kernel (the ordinary path)."""
    groups = group_subjects(texts, default_kernel)
    if set(groups) <= {HOST}:
        return None
    tag = len(groups) > 1
    host = [parse_subject(t) for t in groups.pop(HOST, [])]
    if tag:
        host = [replace(s, id=f"{s.id}@{HOST}") for s in host]
    out = VMPlan(host=host)
    anchors = add_anchors(groups)
    # The guest reads the host's cache and has no network: fetch NTFS's checker here, first.
    ntfsck.fetch_for({parse_subject(s).driver.fs for g in groups.values() for s in g})
    for name, subjects in groups.items():
        kernel = resolve(name)  # fetched on first use, verified on reuse
        g = GuestGroup(kernel=kernel, subjects=[], tag=tag, anchors=anchors.get(name, []))
        for s in subjects:
            bad = _lacking(kernel, s, tag)
            if bad is None:
                g.subjects.append(s)
            else:
                g.failed.append(bad)
        out.groups.append(g)
    return out


def preview(texts: list[str], default_kernel: str | None) -> tuple[list[SubjectSpec], list[dict]]:
    """What `plan` would do, for `--dry-run`: nothing fetched, verified or booted. The host's
    subjects and, per guest kernel, whether it is cached, the subjects it measures and those
    it cannot mount (known only once the kernel is cached)."""
    groups = group_subjects(texts, default_kernel)
    tag = len(groups) > 1
    host = [parse_subject(t) for t in groups.pop(HOST, [])]
    if tag:
        host = [replace(s, id=f"{s.id}@{HOST}") for s in host]
    anchors = add_anchors(groups)
    how, why = virtualization()
    boot = "under KVM" if how == "kvm" else f"emulated ({why}): functional, not representative"
    rows = []
    for name, subjects in groups.items():
        k = None if name.startswith("path:") else load_cached(name, verify=False)
        lacking = [bad for s in subjects if k and (bad := _lacking(k, s, tag))]
        skipped = {b.id.split("@")[0] for b in lacking}
        measured = [s for s in subjects if parse_subject(s).id not in skipped]
        rows.append({
            "kernel": name,
            "cached": k is not None or name.startswith("path:"),
            "release": k.release if k else None,
            "subjects": measured if subjects else ["every driver it offers"],
            "anchors": anchors.get(name, []),
            "skipped": [{"subject": b.id, "why": b.error} for b in lacking],
            "how": f"booted {boot}; its images in the guest's RAM, copies of one image per "
                   "format the host formats once",
        })  # fmt: skip
    return host, rows


def stage(
    vmplan: VMPlan, settings: VMSettings
) -> Callable[[Run, Store, Callable[[str], None]], None]:
    """The pipeline's VM stage: one VM per kernel, in turn; a VM that fails fails its own
    subjects and the next one still runs."""

    def run_all(run: Run, store: Store, on_step: Callable[[str], None]) -> None:
        problems = []
        formats = sorted({parse_subject(s).driver.fs for g in vmplan.groups for s in g.subjects})
        rec = images.record(run.run_id) if formats else None
        try:
            if rec is not None:
                on_step(f"formatting one image per format for every guest: {', '.join(formats)}")
                d = images.images_dir(run.run_id)
                images.make(d, formats, settings.size)
                settings.pristine_dir = str(d)
            _each_guest(vmplan, settings, run, store, on_step, problems)
        finally:
            if rec is not None:
                release(rec)
                settings.pristine_dir = None
        if problems:
            raise LabError(problems[0])

    return run_all


def _each_guest(
    vmplan: VMPlan,
    settings: VMSettings,
    run: Run,
    store: Store,
    on_step: Callable[[str], None],
    problems: list[str],
) -> None:
    for g in vmplan.groups:
        if g.failed and not g.subjects:  # nothing to boot for
            outcome = GuestOutcome(
                vm=VM(
                    kernel=g.kernel.name,
                    release=g.kernel.release,
                    status="failed",
                    error="no subject this kernel can mount",
                )
            )
        else:
            formats = len({parse_subject(s).driver.fs for s in g.subjects}) or 1
            outcome = run_guest(run.run_id, g, settings, on_step, formats)
        for s in merge(run, outcome, g):
            store.save_subject(run.run_id, s)
        if outcome.error and not g.subjects and not g.failed:
            problems.append(outcome.error)
