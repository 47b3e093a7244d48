"""A simulated run of the verdict procedure (fsbench.decide + fsbench.verdict), as the runner
schedules it: the minimum rounds, one look, the open cells sampled up to their planned n or
the rounds the budget allows, the final look. Used by test_decide.py (and by hand:
`uv run python tests/unit/simulate_verdicts.py`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fsbench.decide import look, planned_n, priors_by_kind
from fsbench.verdict import NO_PRIOR, table_family


@dataclass
class Outcome:
    false_tables: int = 0
    tables: int = 0
    decided: int = 0
    comparisons: int = 0


def noisy(rng: np.random.Generator, mean: float, cv: float, stall: float, n: int) -> list[float]:
    x = mean * np.exp(rng.normal(0.0, cv, n))
    return list(np.where(rng.random(n) < stall, x * 0.5, x))


def simulate_run(
    rng: np.random.Generator,
    means: list[list[float]],
    cvs: list[list[float]],
    kinds: list[str],
    stall: float = 0.05,
    n0: int = 3,
    n_max: int = 10,
    rounds: int = 10,
) -> list[dict[tuple[str, str], str]]:
    """One run: ``means[w][s]``/``cvs[w][s]`` per workload and subject. Returns per workload
    the marks every printed comparison got at either look (the final one overrides)."""
    k = len(kinds)
    subs = [f"s{i}" for i in range(k)]
    kind_of = dict(zip(subs, kinds, strict=True))
    W = len(means)
    draw = [[noisy(rng, means[w][i], cvs[w][i], stall, n_max) for i in range(k)] for w in range(W)]
    n = {(w, s): n0 for w in range(W) for s in subs}

    def samples(w: int) -> dict[str, list[float]]:
        return {s: draw[w][i][: n[(w, s)]] for i, s in enumerate(subs)}

    looks = 2 if rounds > n0 else 1
    fam = table_family(k, looks=looks)

    def priors() -> dict[str, object]:
        by = priors_by_kind((kind_of[s], samples(w)[s]) for w in range(W) for s in subs)
        return {s: by.get(kind_of[s], NO_PRIOR) for s in subs}

    marks: list[dict[tuple[str, str], str]] = [{} for _ in range(W)]
    pri = priors()
    plans = {}
    for w in range(W):
        tl = look(samples(w), subs, True, fam, pri)
        for key, v in tl.verdicts.items():
            marks[w][key] = v.mark
        plans[w] = planned_n(tl, samples(w), fam, pri, n_max=n_max)
    if looks == 2:
        for _ in range(n0, rounds):
            for w in range(W):
                for s, want in plans[w].items():
                    if n[(w, s)] < want:
                        n[(w, s)] += 1
        pri = priors()
        for w in range(W):
            tl = look(samples(w), subs, True, fam, pri)
            for key, v in tl.verdicts.items():
                marks[w][key] = (
                    v.mark if marks[w].get(key) not in ("above", "below") else marks[w][key]
                )
    return marks


def aa(runs: int, seed: int = 1) -> Outcome:
    rng = np.random.default_rng(seed)
    out = Outcome()
    for _ in range(runs):
        k = int(rng.integers(2, 9))
        kinds = list(rng.choice(["kernel", "fuse"], k))
        cvs = [list(rng.uniform(0.03, 0.25, k)) for _ in range(2)]
        means = [[100.0] * k for _ in range(2)]
        for m in simulate_run(rng, means, cvs, kinds, rounds=int(rng.integers(3, 11))):
            out.tables += 1
            out.false_tables += any(x in ("above", "below") for x in m.values())
    return out


if __name__ == "__main__":
    import time

    t = time.time()
    o = aa(1000)
    print(o, o.false_tables / o.tables, time.time() - t)
