"""The subjects a tune measures: what a remedy makes of the untuned subject, and several
changes of one subject as one (the combination)."""

from __future__ import annotations

from dataclasses import replace

from fsbench.fuse import transports
from fsbench.lab.subject import SubjectSpec, parse_subject, with_lab_changes
from fsbench.tune.choose import Candidate
from fsbench.tune.remedies import Remedy


def transport_driver(spec: SubjectSpec, r: Remedy) -> str:
    """The daemon that serves a transport remedy: the subject's own when it offers that
    transport (passthrough_hp, fuse2fs-3.18), else the remedy's build (fuse2fs -> fuse2fs-3.18)."""
    if r.change in dict(spec.driver.transports):
        return spec.driver.name
    return r.driver or spec.driver.name


def candidate_spec(spec: SubjectSpec, r: Remedy) -> SubjectSpec:
    """The subject a remedy makes of the untuned one (placement: the subject itself)."""
    opts = [o for o in spec.options.split(",") if o]
    if r.kind == "mount-option":
        return parse_subject(f"{spec.driver.name}:{','.join([*opts, *r.option_names()])}")
    if r.kind == "transport":
        return parse_subject(f"{transport_driver(spec, r)}:{','.join([r.change, *opts])}")
    if r.kind in ("mkfs-option", "block-device"):
        return with_lab_changes(spec, r.mkfs_args(), r.knobs())
    if r.kind == "kernel-driver":  # another driver: the FUSE daemon's options do not carry over
        return parse_subject(r.change)
    return spec


def one_daemon(won: list[Candidate], notes: list[str]) -> list[Candidate]:
    """A transport served by another driver's daemon (io_uring: fuse2fs-3.18, libfuse 3) does
    not take the untuned driver's mount options (libfuse 2's splice_*, max_readahead): with any
    of them among the winners it is left out of the combination, and the note says so."""
    moved = [c for c in won if c.remedy.kind == "transport"]
    if moved and any(c.remedy.kind == "mount-option" for c in won):
        notes.append(f"{', '.join(c.name for c in moved)} not combined: another daemon "
                     "(another driver), which does not take the other changes' mount "
                     "options")  # fmt: skip
        return [c for c in won if c not in moved]
    return won


def merge(a: SubjectSpec, b: SubjectSpec) -> SubjectSpec:
    """Two candidate subjects of one subject as one: the driver of the transport one (or b's),
    both's options, mkfs options and block-device settings."""
    opts = list(dict.fromkeys(o for o in (*a.options.split(","), *b.options.split(",")) if o))
    lead = a if a.transport not in ("", transports.DEFAULT) else b
    transport = lead.transport if lead.transport not in ("", transports.DEFAULT) else ""
    shown = [transport] if transport else []
    merged = replace(parse_subject(f"{lead.driver.name}:{','.join([*shown, *opts])}"), age=a.age)
    mkfs = a.mkfs + (b.mkfs if b.mkfs != a.mkfs else ())
    return with_lab_changes(merged, mkfs, tuple(dict.fromkeys((*a.knobs, *b.knobs))))
