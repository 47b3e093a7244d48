"""A tune that finds nothing where nothing helps: the real `fsbench tune` code (session, choose,
budget, the family, the confirmation, the recommendation the terminal prints) run many times on
remedies that change nothing, and the share of tunes that recommend a change anyway.

The lab is replaced as tests/unit/test_tune.py replaces it (`pipeline.execute` answered from the
fixture tests/unit/fixtures/default_compare.json): the explain run is the fixture's real run
(ntfs-3g, fuse2fs, exfat-fuse beside ext4, with the explanation's factors that choose the
candidates), and in every later run each subject — the untuned one, every candidate, the
winners together, pinned or free — draws its samples from one and the same distribution: the
untuned subject's centre times log-normal noise. Whatever tune recommends here is a false
recommendation. Target: at most 5 % of tunes (the family's alpha, before the confirmation).

    uv run python bench/tune_null.py [--tunes 500] [--n 3] [--sd 0.15] [--looks 2] [--seed 1]
                                     [--effect 1]

prints "N % of tunes recommend a change" with its 95 % Monte-Carlo interval (Wilson), and the
share whose selection alone chose a change (what a tune without the confirmation would say).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "unit" / "fixtures" / "default_compare.json"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


class NullLab:
    """`pipeline.execute` for tune: the fixture's explain run, then samples that no remedy
    changes (every subject of a run from the untuned subject's distribution)."""

    def __init__(self, rng: np.random.Generator, n: int, sd: float, looks: int,
                 effect: float = 1.0) -> None:  # fmt: skip
        from fsbench.records.schema import Run

        self.src = Run.model_validate_json(FIXTURE.read_text())
        self.rng, self.n, self.sd, self.looks = rng, n, sd, looks
        self.effect = effect  # every candidate's speed-up (1: none; the power check: more)
        self.untuned = ""

    def execute(self, plan: Any, on_step: Any = None, **_kw: Any) -> tuple[Any, int]:
        from fsbench.records.schema import Run
        from fsbench.records.store import Store
        from fsbench.schedule.runner import workload_id

        run = Run(run_id=plan.run_id, started="now", status="complete", command=plan.command)
        ids = [s.id for s in plan.subjects]
        if "ext4" in ids:  # the explain run: the fixture's, as measured
            self.untuned = ids[0]
            run.subjects = [s for s in self.src.subjects if s.id in ids]
            # As a run at compare's default placement records it: pinned, in its samples.
            run.results = [pinned(r) for r in self.src.results if r.subject in ids]
        else:
            run.subjects = [self.src.subjects[0].model_copy(update={"id": i}) for i in ids]
            wanted = {workload_id(w).split("@")[0] for w in plan.workloads}
            places = list(dict.fromkeys(getattr(w, "placement", "free") for w in plan.workloads))
            bases = [r for r in self.src.results if r.subject == self.untuned
                     and f"{r.workload}/{r.params.get('variant')}" in wanted]  # fmt: skip
            for spec in plan.subjects:
                for base in bases:
                    for place in places:
                        run.results.append(self._drawn(base, spec.id, place))
        with Store(plan.db) as store:
            store.begin_run(run, plan.out_dir)
            store.finish_run(run)
        return run, 0

    def _drawn(self, base: Any, subject: str, place: str) -> Any:
        centre = float(base.center or base.median)
        # The untuned subject is measured pinned, as compare measures it (None: the default);
        # every change is `effect` faster than it, pinning `effect` faster than leaving it free.
        eff = self.effect if base.higher_is_better else 1 / self.effect
        if subject != self.untuned:
            centre *= eff
        elif place == "free":
            centre /= eff
        xs = [centre * math.exp(self.sd * z) for z in self.rng.standard_normal(self.n)]
        # A placement asked for is in the params; compare's default (None) in the samples.
        params = dict(base.params) | ({"placement": place} if place is not None else {})
        r = base.model_copy(update={
            "subject": subject, "params": params, "samples": xs,
            "median": float(np.median(xs)), "center": math.exp(float(np.mean(np.log(xs)))),
            "verdict_family": {"looks": self.looks, "alpha": 0.05},
        })  # fmt: skip
        return r if place is not None else pinned(r)


def pinned(r: Any) -> Any:
    """A result as compare's default placement records it: `same`, in each sample's record."""
    details = [d.model_copy(update={"extra": {**d.extra, "pinned": {"placement": "same"}}})
               for d in r.sample_details]  # fmt: skip
    return r.model_copy(update={"sample_details": details})


def one_tune(lab: NullLab, subject: str, workloads: str, tmp: Path, i: int) -> Any:
    from fsbench.cli.commands.tune import _options
    from fsbench.tune import session

    o = _options(workloads, tmp / "db.sqlite", None)
    req = session.Request(subject, "ext4", o, ["fsbench", "tune"], 600.0, False,
                          tmp / f"out-{i}")  # fmt: skip
    _run, record, _code = session.Tuner(req, lambda _msg: None).run()
    return record


def patch(lab: NullLab) -> None:
    """The lab replaced, as test_tune.py's `tuned` fixture does: no images, no daemons built,
    no page drawn (matplotlib), no VM."""
    from fsbench.tune import budget, session

    session.pipeline.execute = lab.execute  # type: ignore[assignment]
    budget._fits = lambda size, n: True  # type: ignore[assignment]
    session.write_report_safely = lambda run, out: None  # type: ignore[assignment]
    unbuilt = session.problem

    def problem(spec: Any, backing: str = "ram") -> Any:
        here = unbuilt(spec, backing)
        return lambda r: "not built here" if r.kind == "transport" else here(r)

    session.problem = problem  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tunes", type=int, default=500)
    ap.add_argument("--n", type=int, default=3, help="samples per cell (tune's first rounds: 3)")
    ap.add_argument("--sd", type=float, default=0.15, help="log-scale noise of every sample")
    ap.add_argument("--looks", type=int, default=2, help="looks each run recorded (adaptive: 2)")
    ap.add_argument("--subjects", default="ntfs-3g,fuse2fs,exfat-fuse")
    ap.add_argument("--workloads", default="seq-write/fsync,seq-read/cold")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--effect", type=float, default=1.0, help="every change's true speed-up: 1 "
                    "(the null), or more to check the tune still finds a real one")  # fmt: skip
    a = ap.parse_args(argv)
    if a.tunes < 1 or a.n < 2 or a.sd <= 0 or a.looks < 1 or a.effect <= 0:
        print("tune_null: --tunes ≥ 1, --n ≥ 2, --sd > 0, --looks ≥ 1, --effect > 0",
              file=sys.stderr)  # fmt: skip
        return 2
    from fsbench.report.views.tune import recommended

    lab = NullLab(np.random.default_rng(a.seed), a.n, a.sd, a.looks, a.effect)
    patch(lab)
    subjects = a.subjects.split(",")
    chose = rec = 0
    comparisons = 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tune-null-") as d:
        for i in range(a.tunes):
            t = one_tune(lab, subjects[i % len(subjects)], a.workloads, Path(d), i)
            comparisons += len(t.changes)
            chose += any(c.outcome == "better" for c in t.changes)
            rec += recommended(t) is not None
    lo, hi = wilson(rec, a.tunes)
    slo, shi = wilson(chose, a.tunes)
    what = "change nothing" if a.effect == 1 else f"each make it {a.effect:g}× faster"
    print(f"{a.tunes} tunes of {', '.join(subjects)} on {a.workloads}, remedies that "
          f"{what}; n = {a.n} samples a cell, log sd {a.sd}, {a.looks} looks; "
          f"{comparisons / a.tunes:.1f} changes × workloads measured a tune; "
          f"{time.monotonic() - began:.0f} s")  # fmt: skip
    target = "target ≤ 5 %" if a.effect == 1 else "the power to find a real change"
    print(f"{100 * rec / a.tunes:.1f} % of tunes recommend a change "
          f"(95 % Monte-Carlo interval {100 * lo:.1f}–{100 * hi:.1f} %; {target})")  # fmt: skip
    print(f"{100 * chose / a.tunes:.1f} % chose a change in the selection alone "
          f"({100 * slo:.1f}–{100 * shi:.1f} %): before the confirmation")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
