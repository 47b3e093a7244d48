"""The explanation follows the numbers: synthetic runs with kernel-probe data (Result.trace's
shape) where changing a figure changes the sentence; a probe that was not measured gives
no claim; conditional remarks (big_writes, wake-ups, placement) appear only under their
conditions; the terminal lines fit; the HTML has the plots; diff names the changed figures."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from explain_fixtures import (
    GiB,
    fuse_trace,
    kernel_trace,
    ntfs_vs_ext4,
    result,
    run,
)
from rich.console import Console

from fsbench.lab.drivers import Driver
from fsbench.records.schema import Quirk, Run
from fsbench.report.model.diff import diff_runs
from fsbench.report.model.explain import (
    Explanation,
    brief_lines,
    explain_run,
    run_json,
)
from fsbench.report.views.sections import render, render_html


def explained(r: Run, subject: str = "ntfs-3g", placement: str = "free") -> Explanation:
    return next(e for e in explain_run(r) if e.subject == subject and e.placement == placement)


def factor(e: Explanation, name: str):
    return next((f for f in e.factors if f.name == name), None)


# -- words follow numbers -------------------------------------------------------------------------
def test_fuse_request_count_size_and_latency_are_quoted_from_the_trace() -> None:
    e = explained(ntfs_vs_ext4())
    assert e.baseline == "ext4" and not e.is_baseline
    f = factor(e, "fuse WRITE")
    assert f is not None
    assert f.figure == 262144 and f.unit == "requests/GiB"
    assert "262,144 FUSE WRITE requests per GiB, 4 KiB each" in f.sentence
    assert "36 µs per request = 9.4 s per GiB, 94 % of the traced run" in f.sentence
    assert f.share == pytest.approx(0.94)
    # The gap to ext4 is 10 s - 1 s per GiB; 9.4 s of FUSE requests (ext4 has none) is 104 % of it.
    assert f.accounts == pytest.approx(9.4 / 9.0)
    assert e.factors[0] is f  # it accounts for most of the difference: ranked first
    assert "GETATTR" not in e.sentence()  # 2 requests beside 262,144 say nothing


def test_changing_the_numbers_changes_the_sentence() -> None:
    e = explained(ntfs_vs_ext4(requests=8192, size=131072, latency_total_us=2e6))
    f = factor(e, "fuse WRITE")
    assert f is not None
    assert "8,192 FUSE WRITE requests per GiB, 128 KiB each" in f.sentence
    assert "244 µs per request = 2 s per GiB, 20 % of the traced run" in f.sentence
    assert f.share == pytest.approx(0.2)


def test_ranking_follows_the_share_of_the_difference() -> None:
    r = ntfs_vs_ext4(latency_total_us=0.5e6)
    trace = r.results[1].trace
    assert trace is not None
    trace["writeback"]["pause_ms"] = 6000.0  # 6 s of 10 s per GiB throttled
    e = explained(r)
    assert [f.name for f in e.factors[:2]] == ["writeback", "fuse WRITE"]
    wb = factor(e, "writeback")
    assert wb is not None and "6 s per GiB, 60 % of the traced run" in wb.sentence
    assert "(ext4: not throttled)" in wb.sentence


def test_big_writes_remark_only_under_its_conditions() -> None:
    remark = "big_writes is ignored on volumes under 4 GiB; this image is 1 GiB"

    def sentence(subject: str = "ntfs-3g", image: int = GiB, size: int = 4096) -> str:
        r = run(
            [
                result("ext4", [1000.0, 1010.0], kernel_trace()),
                result(subject, [100.0, 101.0], fuse_trace(size=size)),
            ],
            image_size=image,
            subjects=("ext4", subject),
        )
        return explained(r, subject).sentence()

    assert remark in sentence()
    assert remark in sentence("lowntfs-3g")
    assert "big_writes" not in sentence(image=5 * GiB)  # a volume where it would apply
    assert "big_writes" not in sentence(size=131072)  # requests are not 4 KiB
    assert "big_writes" not in sentence("fuse2fs")  # another driver's rule


def test_a_driver_quirk_is_one_record_and_the_explanation_names_it() -> None:
    """A driver this test makes up declares one quirk; nothing else knows its name."""
    toy = Driver(
        "toyfs-fuse", "ntfs", "fuse", "a made-up FUSE driver",
        quirks=(
            Quirk(op="WRITE", request_size=131072, image_below=8 * GiB,
                  says="toyfs splits writes at 128 KiB below 8 GiB; this image is {image}",
                  brief="toyfs: 128 KiB writes"),
        ),
    )  # fmt: skip

    def explanation(size: int) -> tuple[str, list[str]]:
        r = run(
            [
                result("ext4", [1000.0, 1010.0], kernel_trace()),
                result("toyfs-fuse", [100.0, 101.0], fuse_trace(requests=8192, size=size)),
            ],
            subjects=("ext4", "toyfs-fuse"),
            drivers={"toyfs-fuse": toy},
        )
        e = explained(r, "toyfs-fuse")
        return e.sentence(), brief_lines(e)

    text, lines = explanation(131072)
    assert "toyfs splits writes at 128 KiB below 8 GiB; this image is 1 GiB" in text
    assert "(toyfs: 128 KiB writes)" in " ".join(lines)
    assert "toyfs splits" not in explanation(4096)[0]  # not the size the quirk shows as


def test_missing_probes_give_no_claim_about_them() -> None:
    r = ntfs_vs_ext4(probes={"fuse": "unavailable: no fuse tracepoints", "sched": "unavailable: x"})
    r.environment.wakeup_us = {"same_cpu": 2.0, "cross_cpu": 20.0}  # type: ignore[attr-defined]
    e = explained(r)
    text = e.sentence()
    assert "FUSE" not in text and "wake-ups" not in text
    assert "fuse: unavailable: no fuse tracepoints" in e.unavailable
    assert "sched: unavailable: x" in e.unavailable
    assert factor(e, "writeback") is not None  # what was measured is still said


def test_a_run_without_probe_data_says_only_what_it_has() -> None:
    r = ntfs_vs_ext4()
    for res in r.results:
        setattr(res, "trace", None)  # noqa: B010 (an extra field now, a declared one later)
    e = explained(r)
    assert {f.name for f in e.factors} <= {"cpu", "context switches", "write amplification"}
    assert "1,100,000 app + daemon context switches per GiB (ext4: 5,000)" in e.sentence()
    assert any("no probe data" in u for u in e.unavailable)


def test_wakeup_remark_needs_costly_wakeups_and_many_of_them() -> None:
    def wake(cross_us: float | None, cross: int = 250000) -> str:
        r = ntfs_vs_ext4(cross=cross)
        if cross_us is not None:
            r.environment.wakeup_us = {"same_cpu": 2.0, "cross_cpu": cross_us}  # type: ignore[attr-defined]
        return explained(r).sentence()

    text = wake(20.0)
    assert "500,000 of 600,000 wake-ups per GiB crossed CPUs" in text
    assert "at 20 µs each against 2 µs on one CPU" in text and "≈ 9 s per GiB" in text
    assert "wake-ups" not in wake(3.0)  # cheap here
    assert "wake-ups" not in wake(None)  # not measured
    assert "wake-ups" not in wake(20.0, cross=1000)  # too few to matter (0.04 s of 10 s)


def test_requests_in_flight_together_are_concurrency_not_a_share_above_100_percent() -> None:
    """Readahead keeps several FUSE READs in flight: 2.7 s of summed latency in a 0.9 s traced
    run is ≈ 3 at a time, never "308 % of the traced run" nor of the gap to ext4."""
    r = ntfs_vs_ext4(latency_total_us=2.7e6, seconds=0.9)
    f = factor(explained(r), "fuse WRITE")
    assert f is not None
    assert "2.7 s of request time per GiB in a traced run of 900 ms: ≈ 3.0 in flight" in f.sentence
    assert "%" not in f.sentence and "≈ 3.0 in flight" in f.brief and "%" not in f.brief
    assert f.share is None and f.accounts is None
    # Below the run's time they are a share as before.
    f = factor(explained(ntfs_vs_ext4(latency_total_us=0.45e6, seconds=0.9)), "fuse WRITE")
    assert f is not None and "50 % of the traced run" in f.sentence and f.share == 0.5


def test_a_wakeup_cost_that_cannot_have_held_claims_no_time() -> None:
    """279 µs measured at a busy moment (25 µs an hour later): 500,000 crossed wake-ups would
    be 138 s per GiB, more than the 10 s the traced run took. The sentence says so and the
    factor claims no share of the run, nor of the gap to ext4."""
    r = ntfs_vs_ext4()
    r.environment.wakeup_us = {"same_cpu": 2.0, "cross_cpu": 279.0}  # type: ignore[attr-defined]
    e = explained(r)
    f = factor(e, "wake-ups")
    assert f is not None
    assert "at the 279 µs each measured here that would be 138 s per GiB" in f.sentence
    assert "more than the traced run took (10 s)" in f.sentence
    assert f.seconds is None and f.share is None and f.accounts is None
    assert "≈" not in f.brief


def test_the_calmer_of_two_wakeup_measurements_is_used() -> None:
    """Re-measured after the last sample: the cheaper cross-CPU figure (a busy host inflates
    it, nothing deflates it) is the one the explanation computes with, at either end."""
    for start, end in ((279.0, 20.0), (20.0, 279.0)):
        r = ntfs_vs_ext4()
        r.environment.wakeup_us = {  # type: ignore[attr-defined]
            "same_cpu": 2.0,
            "cross_cpu": start,
            "same_cpu_end": 2.0,
            "cross_cpu_end": end,
        }
        text = explained(r).sentence()
        assert "at 20 µs each against 2 µs on one CPU" in text and "≈ 9 s per GiB" in text


def _placements(same: list[float]) -> Run:
    return run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), placement="free"),
            result("ntfs-3g", [38.0, 40.0, 41.0], fuse_trace(seconds=26.0), placement="free"),
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), placement="same"),
            result("ntfs-3g", same, fuse_trace(seconds=7.0), placement="same"),
        ]
    )


def test_placement_remark_is_the_ratio_with_its_verdict() -> None:
    e = explained(_placements([140.0, 145.0, 150.0]))
    f = factor(e, "placement same")
    # The verdict's ratio (of geometric means) and interval, as the tables print them.
    assert f is not None and f.figure == pytest.approx(145 / 39.67, rel=0.01)
    assert "on one CPU (same) 3.66× faster than free (" in f.sentence
    assert "at 95 %: better)" in f.sentence
    assert e.factors[-1] is f
    back = factor(explained(_placements([140.0, 145.0, 150.0]), placement="same"), "placement free")
    assert back is not None and "unpinned (free) 3.66× slower than same" in back.sentence
    flat = factor(explained(_placements([39.0, 40.0, 42.0])), "placement same")
    assert (
        flat is not None
        and "not decidedly different" in flat.sentence
        and "not separated" in flat.sentence
    )
    # Each placement is compared with the baseline at the same placement.
    assert explained(_placements([140.0, 145.0, 150.0]), placement="same").baseline == "ext4"


def test_no_placement_remark_when_one_placement_was_measured() -> None:
    assert not any(f.name.startswith("placement") for f in explained(ntfs_vs_ext4()).factors)


def test_a_run_at_one_pinned_placement_heads_its_reasons_without_a_label() -> None:
    """The default pins every subject on one CPU (same): its reasons say "ntfs-3g: ...", not
    "ntfs-3g [same]: ..." on every line; a run comparing placements labels the pinned one."""
    one = run(
        [
            result("ext4", [1000.0, 1010.0, 990.0], kernel_trace(), placement="same"),
            result("ntfs-3g", [38.0, 40.0, 41.0], fuse_trace(seconds=26.0), placement="same"),
        ]
    )
    e = explained(one, placement="same")
    assert not e.placed and e.label == "ntfs-3g"
    assert brief_lines(e)[0].startswith("  ntfs-3g: ")
    both = explained(_placements([140.0, 145.0, 150.0]), placement="same")
    assert both.placed and brief_lines(both)[0].startswith("  ntfs-3g [same]: ")


# -- renderers ------------------------------------------------------------------------------------
def test_terminal_lines_fit_and_skip_the_baseline() -> None:
    r = _placements([140.0, 145.0, 150.0])
    r.environment.wakeup_us = {"same_cpu": 2.0, "cross_cpu": 20.0}  # type: ignore[attr-defined]
    con = Console(width=100, record=True, color_system=None)
    render(r, con)
    out = con.export_text()
    lines = [ln for ln in out.splitlines() if ln.startswith("  ntfs-3g")]
    assert lines and "262,144 FUSE WRITE/GiB × 4 KiB (< 4 GiB: no big_writes)" in lines[0]
    assert "on one CPU 3.66× faster" in out
    assert not any(ln.startswith("  ext4:") for ln in out.splitlines())
    for e in explain_run(r):
        got = brief_lines(e)
        assert len(got) <= 2 and all(len(ln) <= 100 for ln in got)


def _svg_texts(page: str, plot_id: str) -> list[str]:
    m = re.search(rf'<figure class="plot" id="{plot_id}">\s*(<svg.*?</svg>)', page, re.S)
    assert m, f"no figure {plot_id}"
    root = ET.fromstring(m.group(1))
    return ["".join(t.itertext()).strip() for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_html_has_the_explanation_and_probe_plots() -> None:
    page = render_html(_placements([140.0, 145.0, 150.0]))
    texts = _svg_texts(page, "trace-seq-write-fsync")
    for want in (
        "FUSE request sizes",
        "FUSE request latency",
        "Readahead windows",
        "Block request sizes",
        "ntfs-3g",  # a panel per subject and placement, a line per opcode or direction
        "ntfs-3g [same]",
        "ext4",
        "WRITE",
        "write",
        "4K",
        "32 µs",
    ):
        assert want in texts, want
    placement = _svg_texts(page, "placement")
    assert {"free", "same", "seq-write/fsync · ntfs-3g"} <= set(placement)
    li = re.search(r'<li data-factor="fuse WRITE">(.*?)</li>', page, re.S)
    assert li and "262,144 FUSE WRITE requests per GiB, 4 KiB each" in li.group(1)
    assert "of the gap to ext4" in li.group(1)


def test_html_without_probes_or_placements_has_neither_plot() -> None:
    r = ntfs_vs_ext4()
    for res in r.results:
        setattr(res, "trace", None)  # noqa: B010 (an extra field now, a declared one later)
    page = render_html(r)
    assert 'id="trace-' not in page and 'id="placement"' not in page
    assert "Not measured: trace: no probe data" in page


def test_json_output_adds_explanations_and_still_loads() -> None:
    r = ntfs_vs_ext4()
    doc = json.loads(run_json(r))
    assert [e["subject"] for e in doc["explanations"]] == ["ext4", "ntfs-3g"]
    ntfs = doc["explanations"][1]
    assert doc["results"][ntfs["index"]]["subject"] == "ntfs-3g"
    top = ntfs["factors"][0]
    assert (top["name"], top["figure"], top["unit"]) == ("fuse WRITE", 262144, "requests/GiB")
    assert top["share"] == pytest.approx(0.94) and "4 KiB each" in top["sentence"]
    assert Run.model_validate_json(run_json(r)).results[1].subject == "ntfs-3g"


# -- diff -----------------------------------------------------------------------------------------
def test_diff_names_the_probe_figures_that_changed() -> None:
    a = ntfs_vs_ext4()
    b = ntfs_vs_ext4(requests=8192, size=131072, latency_total_us=2e6, seconds=2.5)
    b.run_id = "20260101-000000-bbbb"
    rows = {r.subject: r for r in diff_runs(a, b).results}
    changes = rows["ntfs-3g"].probe_changes
    assert "FUSE WRITE requests per GiB 262,144 → 8,192" in changes
    assert "FUSE WRITE request size 4 KiB → 128 KiB" in changes
    assert rows["ext4"].probe_changes == []  # same figures: nothing to say
    assert diff_runs(a, b).to_dict()["results"][1]["probe_changes"] == changes


def test_diff_prints_the_changed_figures_under_its_table(capsys: pytest.CaptureFixture) -> None:
    from fsbench.cli.commands.report import _print_diff

    a = ntfs_vs_ext4()
    b = ntfs_vs_ext4(requests=8192, size=131072, latency_total_us=2e6, seconds=2.5)
    _print_diff(diff_runs(a, b))
    raw = capsys.readouterr().out
    out = " ".join(raw.split())
    # Under the workload's own table (titled with it), each subject's moved figures.
    assert out.index("seq-write/fsync") < out.index("ntfs-3g: FUSE WRITE requests per GiB")
    assert "ntfs-3g: FUSE WRITE requests per GiB 262,144 → 8,192; " in out
    assert "FUSE WRITE request size 4 KiB → 128 KiB" in out
    assert not any(ln.startswith("  ext4: ") for ln in raw.splitlines())


def test_fuse_against_fuse_says_only_what_differs() -> None:
    def against(**kw: Any) -> Explanation:
        r = run(
            [
                result("ntfs-3g", [100.0, 101.0], fuse_trace(), ctx=1e6),
                result("ntfs-3g:big_writes", [300.0, 301.0], fuse_trace(**kw), ctx=1e6),
            ],
            image_size=5 * GiB,
            subjects=("ntfs-3g", "ntfs-3g:big_writes"),
        )
        return explained(r, "ntfs-3g:big_writes")

    f = factor(against(requests=8192, size=131072, latency_total_us=2e6, seconds=3.0), "fuse WRITE")
    assert f is not None and f.baseline == 262144
    assert "8,192 FUSE WRITE requests per GiB, 128 KiB each" in f.sentence
    assert "(ntfs-3g: 262,144, 4 KiB)" in f.sentence
    assert factor(against(), "fuse WRITE") is None  # same requests as the baseline's


def test_a_kernel_subject_against_a_fuse_baseline_names_what_it_saves() -> None:
    r = run(
        [
            result("ntfs-3g", [100.0, 101.0], fuse_trace()),
            result("ext4", [1000.0, 1010.0], kernel_trace()),
        ],
        subjects=("ntfs-3g", "ext4"),
    )
    e = explained(r, "ext4")
    f = e.factors[0]
    assert f.name == "fuse WRITE" and f.figure == 0
    assert f.sentence.startswith("no FUSE WRITE requests (in the kernel); ntfs-3g sends 262,144")
    assert f.accounts == pytest.approx(9.4 / 9.0)  # (0 - 9.4 s) of the (1 - 10 s) gap


def test_malformed_probe_data_gives_no_claim_and_no_crash() -> None:
    r = ntfs_vs_ext4()
    bad = {
        "probes": "all fine",
        "fuse": {"requests": [1, 2], "bytes": "a", "latency_us": {"WRITE": 3}},
        "block": {"requests": {"write": "many", "read": True}},
        "readahead": {"windows": {"abc": 3, "4096": "x"}, "count": None},
        "writeback": [],
        "sched": {"wakeups": 5},
        "work": "nope",
    }
    setattr(r.results[1], "trace", bad)  # noqa: B010
    e = explained(r)
    assert not any(f.name.startswith(("fuse", "block", "readahead")) for f in e.factors)
    assert "ntfs-3g" in render_html(r)


def test_show_json_of_a_stored_run_carries_the_explanations(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fsbench.cli.app import cli
    from fsbench.records.store import Store

    r = ntfs_vs_ext4()
    db = tmp_path / "results.db"
    with Store(db) as store:
        store.begin_run(r, tmp_path)
        store.finish_run(r)
    out = CliRunner().invoke(cli, ["show", r.run_id, "--db", str(db), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    ntfs = next(e for e in doc["explanations"] if e["subject"] == "ntfs-3g")
    assert ntfs["factors"][0]["name"] == "fuse WRITE"  # the probe data survived the store


def test_iozone_cells_get_explanations_but_no_plot_each() -> None:
    from fsbench.report.model import build
    from fsbench.report.plots.rates import plan

    r = ntfs_vs_ext4()
    for res in r.results:
        res.workload = "iozone"
        res.params = {**res.params, "op": "write", "variant": "write-1g-1m"}
        res.params.update(file_size=GiB, record_size=2**20)
    assert [e.subject for e in explain_run(r)] == ["ext4", "ntfs-3g"]
    p = plan(build(r))
    assert p.traces == {} and p.placement is None


# -- the traced run's own cost --------------------------------------------------------------------
def test_the_traced_runs_speed_against_the_timed_median_is_said_with_the_figures() -> None:
    r = ntfs_vs_ext4()
    ntfs = r.results[1]
    trace = ntfs.trace
    assert trace is not None
    trace["value"] = 80.0  # the traced run; the samples' median is 100 MiB/s
    e = explained(r)
    assert e.traced_speed == pytest.approx(0.80)
    assert "traced run at 0.80× the timed speed" in render_html(r)
    trace["value"] = 95.0
    assert explained(r).traced_speed == pytest.approx(0.95)
    assert "traced run at 0.95× the timed speed" in render_html(r)
    # Lower-is-better metrics: a slower traced run has a larger value, still < 1 here.
    ntfs.higher_is_better = False
    trace["value"] = 125.0
    assert explained(r).traced_speed == pytest.approx(0.80)
    # A result of schema 2 has no traced rate: nothing is claimed.
    del trace["value"]
    assert explained(r).traced_speed is None and "traced run at" not in render_html(r)
