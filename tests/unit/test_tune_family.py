"""tune's statistics: one family over every candidate × workload, one centre (the geometric mean)
for gaps, references and shares, no share of the gap for a change that was not separated, and
bench/tune_null.py (the real tune on remedies that change nothing) in small."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_tune import GiB, factor, fixture_run, never

from fsbench.records.tunerecord import TuneChange, TuneGap, TuneRecord
from fsbench.report.model.tune import gap_closed
from fsbench.report.views.tune import changes_table, gap_lines, share
from fsbench.stats.decide import gmean
from fsbench.tune import budget, session
from fsbench.tune.choose import Gap, choose
from fsbench.tune.outcome import decide, family, family_words, gaps

ROOT = Path(__file__).resolve().parents[2]


def test_gaps_references_and_shares_are_on_the_geometric_mean() -> None:
    run = fixture_run()
    found = {g.workload: g for g, _ in gaps(run, "ntfs-3g", ["ext4", "xfs", "ext2"])}
    w = found["seq-write/fsync"]
    by = {(r.subject, r.workload): r for r in run.results}
    mine = by["ntfs-3g", "seq-write"]
    assert w.subject_center == pytest.approx(mine.center or gmean(mine.samples))
    # The fastest reference by its centre (xfs's samples 4112, 3325, 2193), its comparison as
    # the explain run's table prints it, with its interval.
    assert w.reference == "xfs" and w.cell.endswith("▼") and "–" in w.cell
    assert w.slower == pytest.approx(w.reference_center / w.subject_center)  # type: ignore[operator]
    # The share a ▲ closes is read on the same centres.
    assert gap_closed(2.0, w) == pytest.approx(0.5 / (1 - w.subject_center / w.reference_center))  # type: ignore[operator]


def test_a_change_not_separated_gets_no_share_only_words() -> None:
    g = TuneGap(workload="w", reference="ext4", subject_center=10.0, reference_center=40.0)
    assert gap_closed(0.83, g, "open") is None and gap_closed(0.5, g, "worse") is None
    assert gap_closed(2.0, g, "better") == pytest.approx(0.5 / 0.75)

    def ch(outcome: str, gain: float) -> TuneChange:
        closed = gap_closed(gain, g, outcome)
        return TuneChange(name="x", subject="s:x", untuned="s", workload="w", outcome=outcome,
                          gain=gain, cell=f"{gain}×", gap_closed=closed)  # fmt: skip

    assert share(ch("open", 0.83)) == "none: not separated"
    assert share(ch("worse", 0.5)) == "none: slower"
    assert share(ch("better", 2.0)) == "67 %"
    t = TuneRecord(subject="s", against="ext4", changes=[ch("open", 0.83), ch("worse", 0.5)])
    from rich.console import Console

    con = Console(width=150, record=True)
    con.print(changes_table(t))
    assert "-" not in con.export_text().replace("–", "").replace("━", "")  # no minus anywhere


def test_a_gap_line_gives_one_share_never_a_negative_one() -> None:
    g = TuneGap(workload="seq-write/fsync", reference="ext4", subject_center=50.0,
                reference_center=100.0, unit="MiB/s", cell="0.50× 0.40–0.62 ▼", slower=2.0,
                factors=[{"name": "fuse WRITE", "brief": "856 ms/GiB", "accounts": -0.53,
                          "first": True, "line": "856 ms/GiB (against the gap)"}])  # fmt: skip
    (line,) = gap_lines(TuneRecord(subject="exfat-fuse", against="fastest", gaps=[g]))
    assert "0.50× 0.40–0.62 ▼ (2.00× slower)" in line and "against the gap" in line
    assert "-53" not in line and "explained: 0 % of the gap" in line
    assert "100 % unaccounted for" in line
    faster = g.model_copy(update={"slower": 0.85, "cell": "1.18× 1.14–1.21 ▲"})
    (line,) = gap_lines(TuneRecord(subject="xfs", against="fastest", gaps=[faster]))
    assert "no gap: xfs is not the slower here" in line and "unaccounted" not in line
    assert "candidates all the same" in line


def test_every_candidate_and_workload_is_one_family() -> None:
    run = fixture_run()
    by = {(r.subject, r.workload): r for r in run.results}
    a, b = by["ext4", "seq-write"], by["xfs", "seq-write"]
    one, many = decide(a, b, 1), decide(a, b, 40)
    # The same samples: the wider family, the wider interval (and a lower confidence per
    # interval is never claimed for it).
    assert one.interval is not None and many.interval is not None
    assert many.interval[0] < one.interval[0] and many.interval[1] > one.interval[1]
    assert many.confidence == pytest.approx(1 - 0.05 / 40)
    words = family_words("selection (4 changes × 2 workload(s))", family(8, 2))
    assert "one family of 8 comparison(s)" in words and "99.69 %" in words
    # The family counts every candidate on every workload (an io-size one on each it resizes).
    found = [g for _, g in gaps(run, "fuse2fs", ["ext4"])]
    cands, _ = choose("fuse2fs", found, GiB, False, never)
    groups, _ = budget.plan_groups(cands, GiB, fits=lambda size, n: True)
    assert session.comparisons(groups, 2) == 2 * sum(len(g.cands) for g in groups)


def test_the_kernel_file_systems_have_their_remedies() -> None:
    g = [Gap("w", [factor("block write", 0.8), factor("write amplification", None)])]
    for fs, want in (
        ("btrfs", {"btrfs compress zstd:1", "btrfs space_cache=v2", "btrfs ssd"}),
        ("xfs", {"xfs allocsize 16 MiB", "xfs log buffers"}),
        ("ext4", {"ext4 journal 256 MiB"}),
    ):
        cands, skipped = choose(fs, g, GiB, False, never)
        assert want <= {c.name for c in cands}, fs
        unsafe = {s.remedy.name for s in skipped if "--allow-unsafe" in s.reason}
        if fs == "btrfs":
            assert {"btrfs nodatacow", "btrfs nodatasum"} <= unsafe
        if fs == "ext4":
            assert "ext4 journal_async_commit" in unsafe
        every, _ = choose(fs, g, GiB, True, never)
        assert len(every) >= 3, fs


def test_a_transport_remedy_uses_the_daemons_own_transport() -> None:
    from fsbench.lab.subject import parse_subject
    from fsbench.tune.remedies import REMEDIES
    from fsbench.tune.subjects import candidate_spec

    uring, passthrough = REMEDIES["io_uring transport"], REMEDIES["passthrough transport"]
    assert candidate_spec(parse_subject("fuse2fs"), uring).id == "fuse2fs-3.18:uring"
    assert candidate_spec(parse_subject("passthrough_hp"), uring).id == "passthrough_hp:uring"
    ph = candidate_spec(parse_subject("passthrough_hp"), passthrough)
    assert ph.id == "passthrough_hp:passthrough" and ph.transport == "passthrough"


def test_tune_null_bench_runs_the_real_tune_on_changes_that_change_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fsbench.tune import budget as b

    # The bench patches the tune's lab as test_tune's fixture does; put it back after.
    for mod, name in ((session.pipeline, "execute"), (b, "_fits"),
                      (session, "write_report_safely"), (session, "problem")):  # fmt: skip
        monkeypatch.setattr(mod, name, getattr(mod, name))
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    sys.modules.pop("tune_null", None)
    import tune_null  # type: ignore[import-not-found]

    assert tune_null.main(["--tunes", "6", "--n", "4"]) == 0
    out = capsys.readouterr().out
    assert "% of tunes recommend a change (95 % Monte-Carlo interval" in out
    assert tune_null.main(["--tunes", "0"]) == 2
    lo, hi = tune_null.wilson(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04
