"""Which results a report sets side by side: a workload's table (its title), an Iozone
operation over its cells (file size x record size), the subjects in run order, the results every
view can use, and the one order every output lists them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fsbench.records.schema import Result, Run
from fsbench.report.model.naming import result_title

MATRIX_WORKLOAD = "iozone"
OP_ORDER = ("write", "rewrite", "read", "reread", "rand-read", "rand-write", "stride-read")


def is_matrix(res: Result) -> bool:
    return res.workload == MATRIX_WORKLOAD and "op" in res.params


def by_title(run: Run) -> dict[str, list[Result]]:
    """The results of each workload's table (its title), in run order; the matrix left out
    (its tables are per operation)."""
    out: dict[str, list[Result]] = {}
    for r in run.results:
        if not is_matrix(r):
            out.setdefault(result_title(r), []).append(r)
    return out


def measured_subjects(run: Run) -> list[str]:
    """Subjects in run order, those that were not measured at all left out."""
    return [s.id for s in run.subjects if s.status != "unavailable"]


def usable(res: Result | None) -> bool:
    return res is not None and res.status == "ok" and res.median is not None and bool(res.samples)


def cell_of(res: Result) -> tuple[int, int]:
    """(file size, record size) of an Iozone result."""
    return int(res.params.get("file_size", 0)), int(res.params.get("record_size", 0))


@dataclass
class Group:
    """Results compared with each other: one workload variant, or one Iozone op over its cells.

    `cells` maps a cell key (a result's title, or (file size, record size) in the matrix)
    to the result of each subject there.
    """

    key: str
    title: str
    matrix: bool
    cells: dict[object, dict[str, Result]] = field(default_factory=dict)
    op: str = ""  # the Iozone operation of a matrix group
    label: str = ""  # op, or op with its job count ("write-j4"): what plots and tables name

    def results(self) -> list[Result]:
        return [r for per in self.cells.values() for r in per.values()]

    def subjects(self, order: Sequence[str]) -> list[str]:
        present = {r.subject for r in self.results()}
        return [s for s in order if s in present] + sorted(present - set(order))

    @property
    def higher_is_better(self) -> bool:
        rs = self.results()
        return rs[0].higher_is_better if rs else True

    @property
    def unit(self) -> str:
        rs = self.results()
        return rs[0].unit if rs else ""


def groups(run: Run) -> list[Group]:
    """Non-matrix workloads by title (run order), then Iozone ops in Iozone's order."""
    plain: dict[str, Group] = {}
    ops: dict[str, Group] = {}
    for res in run.results:
        if is_matrix(res):
            op = str(res.params["op"])
            jobs = res.params.get("numjobs") or 1
            label = op if jobs == 1 else f"{op}-j{jobs}"
            if res.params.get("placement"):
                # Each placement is its own matrix: its cells must not overwrite another's.
                label += f"@{res.params['placement']}"
            g = ops.setdefault(
                label, Group(f"iozone/{label}", f"Iozone {label}", True, op=op, label=label)
            )
            g.cells.setdefault(cell_of(res), {})[res.subject] = res
        else:
            title = result_title(res)
            g = plain.setdefault(title, Group(title, title, False))
            g.cells.setdefault(title, {})[res.subject] = res
    ordered_ops = sorted(
        ops.values(),
        key=lambda g: (OP_ORDER.index(g.op) if g.op in OP_ORDER else 99, g.label),
    )
    for g in ordered_ops:
        g.cells = dict(sorted(g.cells.items(), key=lambda kv: kv[0]))  # type: ignore[arg-type,return-value]
    return [*plain.values(), *ordered_ops]


def report_order(run: Run) -> list[Result]:
    """Every result in the order the report shows them: workloads as the tables (run order,
    then the Iozone ops), subjects as the tables (run order, baseline first); a result no
    table shows last. export and diff list rows in this order."""
    order = measured_subjects(run)
    out: list[Result] = []
    seen: set[int] = set()
    for g in groups(run):
        for per in g.cells.values():
            for s in g.subjects(order):
                r = per.get(s)
                if r is not None and id(r) not in seen:
                    out.append(r)
                    seen.add(id(r))
    return out + [r for r in run.results if id(r) not in seen]
