"""The answer first, in the terminal: from a stored default comparison (a real run on the 2-CPU
development VM, 8 drivers; sample extras trimmed), at 80, 100 and 160 columns every subject
with an explanation shows at least its first factor, wrapped and never dropped; the compact
semantics table fits; the drivers this kernel lacks are one line with the command that
measures them in a VM."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from fsbench.records.schema import Run
from fsbench.report.model import build
from fsbench.report.model.answer import (
    answer_factor,
    answer_text,
    answers,
    first_factor,
    missing,
    why_lines,
)
from fsbench.report.model.comparison import compare
from fsbench.report.model.explain import explain_run
from fsbench.report.views.sections import render

STORED = Path(__file__).parent / "fixtures" / "default_compare.json"


@pytest.fixture(scope="module")
def run() -> Run:
    return Run.model_validate_json(STORED.read_text())


def _text(run: Run, width: int, verbose: bool = False) -> str:
    con = Console(width=width, record=True, color_system=None)
    render(run, con, verbose=verbose)
    return con.export_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("width", [80, 100, 160])
def test_every_explained_subject_shows_its_first_factor(run: Run, width: int) -> None:
    text = _text(run, width)
    assert max(len(ln.rstrip()) for ln in text.splitlines()) <= width
    flat = _flat(text)
    exps = [e for e in explain_run(run) if not e.is_baseline and first_factor(e) is not None]
    assert {e.subject for e in exps} >= {"ntfs-3g", "lowntfs-3g", "fuse2fs", "exfat-fuse"}
    # Only a decided difference (▲/▼ against the baseline) is explained: the others get the
    # verdict's words and no reason (report/model/).
    rows = {(t.title, r.subject): r for t in build(run).tables for r in t.rows}
    undecided = 0
    for e in exps:
        f = first_factor(e)
        c = rows[(e.title, e.subject)].comparison
        assert f is not None and c is not None
        if c.decided:
            assert _flat(f"{e.subject}: {f.brief}") in flat, (width, e.subject, e.title)
        else:
            undecided += 1
            assert _flat(f"{e.subject}: {f.brief}") not in flat, (width, e.subject, e.title)
            assert _flat(f"{e.subject}: {c.words} against ext4") in flat, (width, e.subject)
    # xfs on both workloads, ext2, btrfs on the cold read, exfat-fuse on the write: the stored
    # run's 3 samples a side are judged at Hsu's degrees (verdict.welch_df).
    assert undecided == 5
    # ntfs-3g's write: the factor the seeds are about, wider than 80 columns with its name.
    write = next(e for e in exps if e.subject == "ntfs-3g" and e.title.startswith("seq-write"))
    first = first_factor(write)
    assert first is not None and "FUSE WRITE/GiB × 4 KiB (< 4 GiB: no big_writes)" in first.brief


def test_a_first_factor_wider_than_the_line_is_wrapped_not_dropped(run: Run) -> None:
    e = next(e for e in explain_run(run) if e.subject == "ntfs-3g" and "write" in e.title)
    f = first_factor(e)
    assert f is not None and len(f"  ntfs-3g: {f.brief}") > 80
    lines = why_lines(e, 80)
    assert len(lines) >= 2 and all(len(ln) <= 80 for ln in lines)
    assert lines[0].startswith("  ntfs-3g: ") and lines[1].startswith("    ")
    assert _flat(" ".join(lines)) == _flat(f"ntfs-3g: {f.brief}")


def test_the_answer_leads_with_the_fastest_of_each_workload(run: Run) -> None:
    lines = _text(run, 80).splitlines()
    # The answer block ends where the run's notes begin (the backing note comes first).
    end = next(i for i, ln in enumerate(lines) if ln.startswith("images are files"))
    # 8 subjects, 2 workloads: the answer, its legend, its reasons (each wrapped, never cut)
    # and the drivers not measured fit one 80 × 40 screen, even with leaders not separated.
    assert end <= 36
    head = _flat("\n".join(lines[:end]))
    for a, said in zip(answers(run), build(run).answers, strict=True):
        # Why, beside the answer: each ranked subject's first reason, before any table; a
        # subject not separated from the baseline gets the verdict's words instead.
        assert said.whys
        for w in said.whys:
            e = w.explanation
            if e is None:
                assert w.words.startswith("not separated") and w.words.endswith("against ext4")
                assert _flat(f"{w.subject}: {w.words}") in head, w.subject
                continue
            # The answer's reason leads with a time (never a bare count), against the
            # baseline the head line names.
            f = answer_factor(e)
            assert f is not None and _flat(f"{e.subject}: {answer_text(e, f)}") in head, e.subject
            assert re.match(r"(CPU )?[\d.]+ (µs|ms|s)/GiB", answer_text(e, f)), answer_text(e, f)
        assert f"reasons vs {a.baseline.subject}:" in head  # type: ignore[union-attr]
        assert a.winner is not None
        # Ranked as the ratios say (ratios of geometric means): best first, none above 1.
        ratios = [compare(a.winner, r).cell() for r in a.others]
        values = [float(t.split("×")[0]) for t in ratios]
        assert values == sorted(values, reverse=True) and all(v <= 1 for v in values), ratios
        crown = "" if a.separated else "not separated — "  # no fastest named when not
        assert f"{a.title}: {crown}{a.winner.subject} " in head
        # Every other ranked subject with its ratio to the fastest, best first.
        places = [head.index(f" {r.subject} ", head.index(a.title)) for r in a.others]
        assert places == sorted(places)


def test_semantics_table_is_compact_and_fits_80_columns(run: Run) -> None:
    # Without --verbose one line says what differs; the table is behind --verbose.
    quiet = _text(run, 80)
    flat = " ".join(quiet.split())
    assert "semantics: " in flat and "ntfs-3g lacks O_DIRECT honoured" in flat
    lines = _text(run, 80, verbose=True).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("semantics"))
    block = lines[start : start + 16]
    assert all(len(ln.rstrip()) <= 80 for ln in block)
    rows = [ln for ln in block if ln.split() and ln.split()[0] in {s.id for s in run.subjects}]
    assert len(rows) == 8  # a row per measured subject, one line each
    assert "…" not in "\n".join(block)  # nothing cut off
    legend = _flat("\n".join(block))
    assert "dio O_DIRECT honoured" in legend and "every subject: copy_file_range ✓" in legend


def test_drivers_this_kernel_lacks_are_one_line_with_the_vm_command(run: Run) -> None:
    m = missing(run)
    assert m.kernel_lacks == ["ntfs3", "ntfs", "exfat", "vfat"]
    # debian-6.12 has ntfs3, exfat and vfat (not the new ntfs: Linux 7.1).
    assert m.command == "fsbench compare ntfs3 exfat vfat --kernel debian-6.12"
    text = _text(run, 100)
    assert sum("not measured" in ln for ln in text.splitlines()) == 1
    assert m.command in text


def test_the_vm_command_names_a_driver_another_kernel_has(run: Run) -> None:
    """#45: the new ntfs is in debian-sid, not debian-6.12: the one command names it
    `ntfs@debian-sid` instead of leaving it out."""
    other = run.model_copy(deep=True)
    next(s for s in other.subjects if s.id == "ntfs").available_in = "debian-sid"
    m = missing(other)
    assert m.command == "fsbench compare ntfs3 ntfs@debian-sid exfat vfat --kernel debian-6.12"
    assert m.covered == m.kernel_lacks == ["ntfs3", "ntfs", "exfat", "vfat"]


# -- plots a reader can read --------------------------------------------------------------------
def _runs(run: Run) -> list[Run]:
    from test_explain import _placements
    from test_report import synthetic_run

    return [run, synthetic_run(), _placements([140.0, 145.0, 150.0])]


def test_every_plot_is_drawn_at_the_pages_width_with_room_and_no_legend_over_a_panel(
    run: Run,
) -> None:
    """Sizes and overlaps as matplotlib laid them out (plots.Svg): a figure drawn at the page's
    width (≈1130 px, so 8.5 pt text reads as ~12 px), every panel at least 1.2 in tall, no
    legend over any axes or cut off, no tick labels on top of each other."""
    from fsbench.report.plots.rates import plan

    seen = set()
    for r in _runs(run):
        planned = plan(build(r))
        for p in planned.traces.values():  # captions say what was measured: the traced run
            assert "traced run (its last warm-up run" in p.caption, p.caption
            assert "timed samples" not in p.caption
        for p in planned.all():
            seen.add(p.id.split("-")[0])
            w = p.svg.size_in[0]  # type: ignore[attr-defined]
            assert 9.0 <= w <= 12.5, (p.id, w)
            assert p.svg.min_axes_height_in >= 1.2, (p.id, p.svg.min_axes_height_in)  # type: ignore[attr-defined]
            assert p.svg.problems == (), (p.id, p.svg.problems)  # type: ignore[attr-defined]
    assert {"workload", "trace", "cost", "matrix", "placement"} <= seen


def test_the_overlap_check_sees_a_legend_over_its_axes() -> None:
    """The control: a legend drawn inside a full axes is reported, or the test above proves
    nothing."""
    from matplotlib.figure import Figure

    from fsbench.report.plots.figure import to_svg

    fig = Figure(figsize=(11, 3))
    ax = fig.subplots()
    for i in range(12):
        ax.plot([1, 2, 3], [i, i + 1, i + 2], label=f"series {i}")
    ax.legend(loc="center")
    ax.set_xticks(range(40), [f"label {i}" for i in range(40)])
    svg = to_svg(fig, "control")
    assert any("legend over axes" in p for p in svg.problems)  # type: ignore[attr-defined]
    assert any("tick labels overlap" in p for p in svg.problems)  # type: ignore[attr-defined]


def test_the_kernel_named_for_missing_drivers_has_them_when_fetched() -> None:
    """`adds` is declared so the report can name the kernel before it is fetched; once it is
    (as `fsbench doctor` lists it), its module tree must hold every driver declared."""
    from fsbench.vm.kernels import KNOWN, kernel_drivers, load_cached, providers

    assert providers(["ntfs", "ntfs3", "vfat"]) == ("debian-6.12", ["ntfs3", "vfat"])
    assert providers(["ntfs"]) == ("debian-sid", ["ntfs"])
    cached = [(k, load_cached(k.name, verify=False)) for k in KNOWN.values()]
    cached = [(k, c) for k, c in cached if c is not None]
    if not cached:
        pytest.skip("not applicable here: no known kernel fetched (--kernel debian-6.12 does)")
    for k, c in cached:
        assert set(k.adds) <= set(kernel_drivers(c)), (k.name, k.adds)
