"""How the tune's candidates are grouped into runs and how many of them the budget pays for.

A group is one candidates run: the untuned subject beside the candidates that need the same
image size, small enough for memory as the lab's own check counts it (a placement candidate adds
no subject: it pins the untuned one, so it joins the group of the tune's own image size, or
makes one: left free, the untuned subject can be several times slower, and its samples are
passes over a file that grows with the image — ntfs-3g free on big_writes' 4.25 GiB image took
28 s a sample here, against 7 s on 1 GiB); a driver this host's
kernel lacks gets a group of its own, one VM run per kernel, the untuned subject in the same VM
(tune/invm.py). The explain run says what a run costs here (`costs_of`): the seconds beyond
measuring, and what a cell of the subject costs at its fewest samples; `fit_budget` keeps
candidates in score order while their runs fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psutil

from fsbench.records.schema import Run
from fsbench.tune.choose import Candidate, Skipped
from fsbench.tune.invm import vm_cost
from fsbench.tune.outcome import UNTUNED
from fsbench.tune.remedies import REMEDIES

GiB = 1024**3
MEMORY_SHARE = 0.7  # of the available memory, as the lab's own check (lab.Lab.check)
# A candidate whose factors stand for no share of the gap joins a run with fewer candidate
# subjects than this (placement adds none).
RIDERS_UNTIL = 3


@dataclass
class Group:
    """One candidates run: the untuned subject and the candidates sharing its image size."""

    size: int
    cands: list[Candidate]
    # io-size: the untuned subject alone, each workload beside its resized variant
    io: bool = False
    kernel: str = ""  # a VM run with this kernel, the untuned subject beside its candidates

    @property
    def placements(self) -> list[str]:
        """The untuned subject as compare measures it; a placement candidate adds it left
        free (its baseline), not a subject."""
        if any(c.remedy.kind == "placement" for c in self.cands):
            return [UNTUNED, "free"]
        return [UNTUNED]


def _fits(size: int, n_subjects: int) -> bool:
    return size * (n_subjects + 1) <= MEMORY_SHARE * psutil.virtual_memory().available


def fits_memory(size: int, n_subjects: int) -> bool:
    """Whether `n_subjects` images of `size` fit the memory (through `_fits`: a test's own)."""
    return _fits(size, n_subjects)


def plan_groups(
    cands: list[Candidate], base_size: int, fits: Callable[[int, int], bool] | None = None
) -> tuple[list[Group], list[Skipped]]:
    """Candidates by the image size they need, each group small enough for memory. A placement
    candidate adds no subject (the untuned one is pinned): it joins the group of the tune's
    own image size, or has one of its own at that size (see the module's docstring)."""
    fits = fits or _fits
    out: list[Group] = []
    skipped: list[Skipped] = []
    placed = [c for c in cands if c.remedy.kind == "placement"]
    resized = [c for c in cands if c.remedy.kind == "io-size"]
    in_vm = [c for c in cands if c.kernel]
    for c in [c for c in cands if c.remedy.kind not in ("placement", "io-size") and not c.kernel]:
        size = c.size or base_size
        group = next((g for g in out if g.size == size and fits(size, len(g.cands) + 2)), None)
        if group is not None:
            group.cands.append(c)
        elif fits(size, 2):
            out.append(Group(size, [c]))
        else:
            skipped.append(Skipped(c.remedy, f"needs two {size / GiB:g} GiB RAM images beside "
                                             "each other; not enough free memory"))  # fmt: skip
    if placed:
        home = next((g for g in out if g.size == base_size), None)
        if home is not None:
            home.cands += placed
        else:
            out.append(Group(base_size, placed))
    if resized:  # a run of its own: other workloads, one subject
        out.append(Group(base_size, resized, io=True))
    for kernel in dict.fromkeys(c.kernel for c in in_vm):  # a VM per kernel, after the host's
        out.append(Group(base_size, [c for c in in_vm if c.kernel == kernel], kernel=kernel))
    return out, skipped


@dataclass(frozen=True)
class Costs:
    """What the explain run says a run costs here: seconds beyond measuring (images, noise
    floor, checks, report), and measuring seconds per subject, workload and placement."""

    overhead_s: float
    per_cell_s: float
    image_s_per_gib: float = 3.0  # filling RAM images (measured here: 41 s for 3 x 4.25 GiB)
    # The explain run's image size, and the share of the subject's sample one pass over its
    # file took there: a sample is whole passes lasting --min-sample-time at least, over a file
    # that grows with the image, so a cell on a larger image costs more only once a pass
    # outlasts the sample (ntfs-3g: 0.94 s passes in 1.9 s samples on 1 GiB, one 4 s pass on
    # 4.25 GiB). 0: not known, no scaling.
    base_size: int = 0
    pass_share: float = 1.0

    def cell_s(self, size: int) -> float:
        """A cell's seconds at its fewest samples on an image of `size`."""
        scale = size / self.base_size * self.pass_share if self.base_size else 1.0
        return self.per_cell_s * max(1.0, scale)

    def run(self, groups: list[Group], n_workloads: int) -> float:
        total = 0.0
        for g in groups:
            if g.kernel:  # the untuned subject and its candidates in one VM
                total += vm_cost(g.kernel, 1 + len(g.cands), n_workloads, self.per_cell_s)
                continue
            subjects = 1 if g.io else 1 + sum(c.remedy.kind != "placement" for c in g.cands)
            cells = subjects * len(g.placements) * n_workloads * (2 if g.io else 1)
            total += self.overhead_s + self.image_s_per_gib * g.size / GiB * (subjects + 1)
            total += cells * self.cell_s(g.size)
        return total

    def confirmation(self, size: int, n_workloads: int, pinned: bool) -> float:
        """The confirmation runs kept aside (tune/confirm.py): the untuned subject, the best
        change and the winners together on fresh images; a placement among the candidates
        confirmed in a run of its own on the tune's own image size, free and pinned."""
        image = self.image_s_per_gib * size / GiB * 4
        total = self.overhead_s + image + 3 * n_workloads * self.cell_s(size)
        if pinned:
            base = self.base_size or size
            total += self.overhead_s + self.image_s_per_gib * base / GiB * 2
            total += 2 * n_workloads * self.cell_s(base)
        return total


def costs_of(run: Run, subject: str, wall_s: float, size: int = 0) -> Costs:
    """The explain run's overhead and what one cell of the subject (the one being tuned, the
    slowest as a rule) costs at its fewest samples on images of `size`: its warm-up and three
    samples, at the run's seconds per warm-up and per sample (phases, with what a round does
    between samples) weighted by the subject's own sample length. Not the explain run's
    seconds per cell: those include its adaptive rounds, which a later run stops at its share
    of the budget; priced so, a tune of ntfs-3g skipped pinning ("~613 s") with 488 s left
    and used 207 s."""
    sch = run.schedule
    spent = sch.spent_s if sch and sch.spent_s else 0.8 * wall_s
    phases = sch.phases if sch else {}
    mine = [r for r in run.results if r.subject == subject]
    every = [d.seconds for r in run.results for d in r.sample_details]
    secs = [d.seconds for r in mine for d in r.sample_details]
    cells = max(1, len(run.results))
    if phases.get("run") and every:
        warm = phases.get("warm-up", 0.0) / cells
        per_cell = warm + 3 * phases["run"] / len(every)
    else:  # a run without phases: its measuring time alike over its samples
        per_cell = 4 * spent / max(1, len(every))
    weight = (sum(secs) / len(secs)) / (sum(every) / len(every)) if secs and sum(every) else 1.0
    shares = []  # a pass over the file against a sample, where a workload says its file
    for r in mine:
        size_b, d = r.params.get("file_size"), r.sample_details
        if isinstance(size_b, int) and d and d[0].bytes and d[0].seconds:
            shares.append(min(1.0, size_b / (d[0].bytes / d[0].seconds) / d[0].seconds))
    share = max(shares) if len(shares) == len(mine) and shares else 1.0
    return Costs(max(10.0, wall_s - spent), max(1.0, per_cell * weight), base_size=size,
                 pass_share=share)  # fmt: skip


def _no_ride(group: Group | None) -> str:
    """Why a candidate whose factors stand for no time cannot join `group` ('' it can)."""
    if group is None:
        return "no run of its image size is made for the others"
    if group.io:
        return "an io-size run measures one subject"
    if group.kernel:
        return "a VM run measures the drivers its kernel adds"
    if all(c.remedy.kind == "placement" for c in group.cands):
        # Every subject of that run is measured free as well (the pinning's baseline): a
        # rider would add its slowest cells, and one more comparison to every interval.
        return "the run of its image size measures the subject pinned and free only"
    if sum(c.remedy.kind != "placement" for c in group.cands) >= RIDERS_UNTIL:
        return f"its run has {RIDERS_UNTIL} candidates already (each more widens every interval)"
    return ""


def fit_budget(
    groups: list[Group], left_s: float, costs: Costs, n_workloads: int
) -> tuple[list[Group], list[Skipped]]:
    """Candidates in score order while the runs they need fit the budget left, keeping the
    confirmation run aside (every winner measured again on fresh samples, with the winners
    together). The best candidate on this host is always measured; one that needs a VM only
    when its run fits."""
    table = list(REMEDIES)  # ties keep the table's order, as choose() ranks them
    order = sorted(
        (c for g in groups for c in g.cands), key=lambda c: (-c.score, table.index(c.name))
    )
    kept: list[Group] = []
    skipped: list[Skipped] = []
    for c in order:
        home = next(g for g in groups if c in g.cands)
        trial = [Group(g.size, list(g.cands), g.io, g.kernel) for g in kept]
        key = (home.size, home.io, home.kernel)
        mine = next((g for g in trial if (g.size, g.io, g.kernel) == key), None)
        if kept and c.score <= 0:
            # Its factors stand for no measured share of the gap (context switches, readahead
            # windows): worth a subject in a run made anyway, not a run of its own, and not
            # one subject too many: every subject more widens every interval of the run (the
            # family of comparisons grows; measured: fuse2fs with 7 candidates, n = 3, gave
            # io_uring 0.39x within 0.00069-221, with 3 it was 0.40x within 0.29-0.53).
            why = _no_ride(mine)
            if why:
                skipped.append(Skipped(c.remedy, f"its factors account for no measured share "
                                                 f"of the gap, and {why}"))  # fmt: skip
                continue
        if mine is None:
            trial.append(Group(home.size, [c], home.io, home.kernel))
        else:
            mine.cands.append(c)
        size = max(g.size for g in trial)
        pinned = any(x.remedy.kind == "placement" for g in trial for x in g.cands)
        need = costs.run(trial, n_workloads) + costs.confirmation(size, n_workloads, pinned)
        if need <= left_s or (not kept and not home.kernel):
            kept = trial
        elif home.kernel:
            vm = next(g for g in trial if g.kernel == home.kernel)
            cost = costs.run([vm], n_workloads)
            left = max(0.0, left_s - (need - cost))
            why = f"needs a VM ({home.kernel}): ~{cost:.0f} s, budget left {left:.0f} s"
            skipped.append(Skipped(c.remedy, f"{why}; raise --time-budget"))
        else:
            skipped.append(Skipped(c.remedy, f"the time budget left ({left_s:.0f} s) does not "
                                             f"cover it (~{need:.0f} s with the runs before "
                                             "it); raise --time-budget"))  # fmt: skip
    kept.sort(key=lambda g: bool(g.kernel))  # the host's runs first, then each VM's
    return kept, skipped
