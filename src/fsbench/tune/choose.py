"""Which remedies to measure: chosen from the explanation's factors, not by brute force.

For each workload the explanation of the subject against the reference ranks factors, each
with the share of the gap it accounts for (`Factor.accounts`; factors that stand for no time,
such as context switches, have none). A remedy is a candidate when a factor it addresses is
among them; its score is the share of the gap of the best factor it addresses, summed over the
workloads. Candidates are measured in score order; once the factors the chosen ones address
account for the whole gap of every workload, the rest are listed as not needed. Remedies that
cannot be measured here are listed with the reason, never silently dropped.

Where the explanation accounts for less than half of a workload's gap (ext4 against xfs: no
factor the probes measure stands for its time), the remedies for the usual causes of a gap of
that direction (a read's: readahead, block reads; a write's: block writes, writeback, the
journal) are candidates too, scored 0 and saying so: tried beside the others as riders
(tune/budget.py), or listed with what it would take to try them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fsbench.lab.loops import WHERE
from fsbench.records.probes.factor import Factor
from fsbench.records.tunerecord import EXPLAINED_ENOUGH
from fsbench.tune.remedies import (
    MEASURABLE,
    NOT_MEASURABLE,
    REMEDIES,
    SAFETY_WORDS,
    Remedy,
    addresses,
    applies_to,
    resized,
    unsafe,
    vm_kernel,
)

GiB = 1024**3
# Over the volume a remedy needs: mkfs keeps a little for itself (NTFS: the backup boot sector).
VOLUME_MARGIN = GiB // 4


@dataclass(frozen=True)
class Gap:
    """One workload's explanation of the subject against the reference (report.explain)."""

    workload: str
    factors: Sequence[Factor]


@dataclass
class Candidate:
    remedy: Remedy
    score: float  # summed share of the gap its best factor accounts for, over the workloads
    addresses: list[str] = field(default_factory=list)  # "fuse WRITE 59 % of seq-write/fsync"
    size: int = 0  # the image size it needs (0: the run's default)
    lab: str = ""  # what the lab changes for it, in words
    covers: dict[str, tuple[str, float]] = field(default_factory=dict)  # workload -> factor
    kernel: str = ""  # the kernel of the VM it is measured in ("": this host)

    @property
    def name(self) -> str:
        return self.remedy.name


@dataclass(frozen=True)
class Skipped:
    remedy: Remedy
    reason: str


# The factors that usually stand behind a gap of each direction when the probes name none.
USUAL = {
    "read": ("readahead", "block read", "fuse READ"),
    "write": ("block write", "writeback", "write amplification", "fuse WRITE"),
}


def _addressed(remedy: Remedy, gap: Gap) -> list[Factor]:
    return [f for f in gap.factors if addresses(remedy, f.name)]


def explained(gap: Gap) -> float:
    """The share of the gap the largest factor accounts for (0: none stands for time)."""
    return max((_share(f) for f in gap.factors), default=0.0)


def _usual(remedy: Remedy, gap: Gap) -> str:
    """The usual cause of an unexplained gap `remedy` addresses ("" none, or explained)."""
    # Also where the subject is not the slower: nothing explains its speed there either, and a
    # change may make it faster still (xfs's writes, 1.18× ext4's: allocsize was tried).
    if explained(gap) >= EXPLAINED_ENOUGH:
        return ""
    way = "read" if "read" in gap.workload else "write" if "write" in gap.workload else ""
    return next((f for f in USUAL.get(way, ()) if addresses(remedy, f)), "")


def _share(f: Factor) -> float:
    return max(0.0, f.accounts) if f.accounts is not None else 0.0


def choose(
    driver: str,
    gaps: Sequence[Gap],
    base_size: int,
    allow_unsafe: bool,
    problem: Callable[[Remedy], str | None],
    remedies: Sequence[Remedy] | None = None,
) -> tuple[list[Candidate], list[Skipped]]:
    """The candidates for `driver`, best first, and every applicable remedy left out with its
    reason. `problem(remedy)` says why this machine cannot measure it (None: it can)."""
    table = list(REMEDIES.values()) if remedies is None else list(remedies)
    any_factor = any(g.factors for g in gaps)
    cands: list[Candidate] = []
    skipped: list[Skipped] = []
    for r in table:
        if not applies_to(r, driver):
            continue
        hits = {g.workload: _addressed(r, g) for g in gaps}
        if r.kind == "io-size":  # only where the workload's records are the ones it replaces
            hits = {w: f for w, f in hits.items() if resized(r, w)}
            if not hits:
                skipped.append(Skipped(r, f"no workload of this tune has {r.replaces} records "
                                          "with a larger-record variant"))  # fmt: skip
                continue
        usual = {g.workload: u for g in gaps if (u := _usual(r, g))}
        if any_factor and not any(hits.values()) and not usual:
            named = ", ".join(r.factors)
            skipped.append(Skipped(r, f"the explanation names none of the factors it addresses "
                                      f"({named})"))  # fmt: skip
            continue
        why = why_not(r, allow_unsafe, problem)
        if why:
            skipped.append(Skipped(r, why))
            continue
        c = _candidate(r, hits, base_size, driver)
        for wl, cause in usual.items():
            if wl not in c.covers:  # a factor the explanation names comes first
                c.covers[wl] = (cause, 0.0)
                gap = next(g for g in gaps if g.workload == wl)
                c.addresses.append(
                    f"{cause} ({wl}): a usual cause of its gap, which the explanation accounts "
                    f"for only {round(100 * explained(gap))} %"
                )
        cands.append(c)
    cands.sort(key=lambda c: -c.score)
    return _until_spent(cands, [g.workload for g in gaps], skipped)


def why_not(r: Remedy, allow_unsafe: bool, problem: Callable[[Remedy], str | None]) -> str:
    if r.kind not in MEASURABLE:
        return NOT_MEASURABLE.get(r.kind, f"a {r.kind} change is not measurable here")
    if unsafe(r) and not allow_unsafe:
        return f"{SAFETY_WORDS[r.safety]}; measured only with --allow-unsafe"
    return problem(r) or ""


def _candidate(r: Remedy, hits: dict[str, list[Factor]], base_size: int, driver: str) -> Candidate:
    c = Candidate(r, 0.0, kernel=vm_kernel(r))
    for wl, factors in hits.items():
        if not factors:  # an io-size change still resizes the workload the explanation left bare
            if r.kind == "io-size" and resized(r, wl):
                c.covers[wl] = ("", 0.0)
            continue
        best = max(factors, key=lambda f: (_share(f), f.weight))
        c.score += _share(best)
        c.covers[wl] = (best.name, _share(best))
        share = f" {round(100 * _share(best))} % of the gap" if best.accounts is not None else ""
        c.addresses.append(f"{best.name}{share} ({wl}): {best.brief}")
    c.size, c.lab = lab_change(r, base_size, driver)
    return c


def in_vm(kernel: str, untuned: str) -> str:
    """What every output says of a change measured in a VM."""
    return f"measured in a VM ({kernel}) beside {untuned} in the same VM"


def lab_change(r: Remedy, base_size: int, untuned: str = "the untuned subject") -> tuple[int, str]:
    """The image size a remedy needs (0: the run's) and what the lab makes for it, in words."""
    kernel = vm_kernel(r)
    if kernel:
        return 0, (
            f"{in_vm(kernel, untuned)}: this host's kernel has no {r.change}; {kernel} has it"
        )
    if r.min_volume and base_size < r.min_volume:
        size = r.min_volume + VOLUME_MARGIN
        return size, (
            f"image {size / GiB:g} GiB instead of {base_size / GiB:g} GiB: {r.name} needs a "
            f"volume of at least {r.min_volume / GiB:g} GiB"
        )
    if r.kind == "io-size":
        new, old = r.change.partition("=")[2], r.replaces
        return 0, f"the workload's {new} variant beside its {old} one (workloads of {old} only)"
    if r.kind == "mkfs-option":
        return 0, f"its own image, formatted with mkfs {r.change} (the untuned subject's: without)"
    if r.kind == "block-device":
        return 0, f"{r.change} on {WHERE[r.where]} for it only (the others keep the lab's), " + (
            "set after every mount" if r.where == "mount" else "put back before it is released"
        )
    return 0, ""


def _until_spent(
    cands: list[Candidate], workloads: list[str], skipped: list[Skipped]
) -> tuple[list[Candidate], list[Skipped]]:
    """Candidates in order until the factors they address account for every workload's whole
    gap (each factor counted once); the rest are listed as not needed."""
    covered: dict[str, dict[str, float]] = {w: {} for w in workloads}
    out: list[Candidate] = []
    for c in cands:
        spent = bool(workloads) and all(sum(covered[w].values()) >= 1.0 for w in workloads)
        if spent and out:
            skipped.append(Skipped(c.remedy, "not needed: the candidates before it address "
                                             "factors that account for the whole gap"))  # fmt: skip
            continue
        out.append(c)
        for w, (name, share) in c.covers.items():
            covered.setdefault(w, {})[name] = max(covered.get(w, {}).get(name, 0.0), share)
    return out, skipped
