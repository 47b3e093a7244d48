"""Samples that depend on the one before them: the lab's and anyone's (fsbench.stats.serial),
told apart from an effect a round shares with every subject (which costs power, not the
promise)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from fsbench.cli.app import cli
from fsbench.stats.serial import serial


def _wander(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    w, out = 0.0, []
    for _ in range(n):
        w = rho * w + math.sqrt(1 - rho * rho) * rng.normal()
        out.append(w * sd)
    return np.array(out)


def _tables(rng: np.random.Generator, rho: float, round_sd: float, runs: int = 1, k: int = 5):
    out = []
    for _ in range(runs):
        shared = rng.normal(0.0, round_sd, 10)
        out.append(
            [
                np.exp(5 + shared + rng.normal(0, 0.02, 10) + _wander(rng, 10, rho, 0.08))
                for _ in range(k)
            ]
        )
    return out


def test_independent_samples_are_not_flagged_and_z_is_calibrated() -> None:
    rng = np.random.default_rng(7)
    zs = [serial(_tables(rng, 0.0, 0.0)).z for _ in range(400)]
    assert abs(float(np.mean(zs))) < 0.15 and float(np.std(zs)) < 1.1
    assert not any(serial(_tables(rng, 0.0, 0.0)).flagged for _ in range(200))


def test_a_shared_round_effect_is_not_a_wandering_subject() -> None:
    """A round slow for everyone makes raw neighbours alike; after the round's shared effect
    the statistic is back near zero."""
    rng = np.random.default_rng(8)
    t = _tables(rng, 0.0, 0.0, runs=1)
    drift = np.linspace(0.0, 0.5, 10)  # the machine slowing through the run, for everyone
    t = [[c * np.exp(drift) for c in tab] for tab in t] * 20
    assert serial(t, adjust=False).r > 0.4
    assert abs(serial(t).r) < 0.15


def test_subjects_wandering_on_their_own_are_flagged() -> None:
    rng = np.random.default_rng(9)
    s = serial(_tables(rng, 0.9, 0.03, runs=4))
    assert s.flagged, s
    assert "depend on the one before" in s.words()


def test_judge_warns_about_samples_that_wander(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    lines = ["run,workload,subject,value,round"]
    for w, tab in enumerate(_tables(rng, 0.95, 0.0, runs=4, k=3)):
        for i, cell in enumerate(tab):
            lines += [f"r,w{w},s{i},{v:.6f},{j}" for j, v in enumerate(cell)]
    f = tmp_path / "wander.csv"
    f.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(cli, ["judge", str(f), "--json"], catch_exceptions=False)
    assert res.exit_code == 0
    assert "samples depend on the one before them" in res.stderr
    steady = tmp_path / "steady.csv"
    rows = ["run,workload,subject,value"] + [
        f"r,w,s{i},{v:.6f}" for i in range(3) for v in np.exp(rng.normal(5, 0.05, 8))
    ]
    steady.write_text("\n".join(rows) + "\n")
    res = CliRunner().invoke(cli, ["judge", str(steady)], catch_exceptions=False)
    assert res.exit_code == 0 and "depend on the one before" not in res.stderr


def test_stalls_need_every_cell_moved_the_same_way_and_far_enough() -> None:
    from fsbench.stats.serial import stalls

    base = [[100.0, 101, 99, 100], [50.0, 51, 49, 50], [80.0, 80, 79, 81], [20.0, 20, 21, 20]]
    assert stalls(base) == []
    slow = [[*c[:2], c[2] * 0.5, *c[3:]] for c in base]
    (st,) = stalls(slow)
    assert st.round == 2 and st.cells == 4 and 0.45 < st.low <= st.high < 0.55
    # Three cells are too few to tell the machine from chance; a 10 % dip is ordinary wobble.
    assert stalls(slow[:3]) == []
    assert stalls([[*c[:2], c[2] * 0.9, *c[3:]] for c in base]) == []
    # One cell against the others: not shared.
    mixed = [slow[0], *base[1:]]
    assert stalls(mixed) == []
