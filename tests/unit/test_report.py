"""The HTML report and the words of its summary, from a synthetic run with known numbers.

Checked: the page is self-contained (nothing fetched from anywhere), has exactly the plots the
run calls for, says who is fastest and by how much, shows failures, unavailable subjects and
matrix cells that could not run; the terminal matrix table marks the best per row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console, Group
from run_parts import subject

from fsbench.records.schema import CPU, Environment, Result, Run, Subject
from fsbench.report.model import build
from fsbench.report.model.summary import findings
from fsbench.report.plots import rates as plots
from fsbench.report.views.matrix_table import matrix_tables
from fsbench.report.views.sections import render_html, write_report
from fsbench.stats.describe import summarize
from fsbench.units import fmt_ratio

KiB, MiB, GiB = 1024, 1024**2, 1024**3
OPS = ("write", "rewrite", "read", "reread", "rand-read", "rand-write", "stride-read")


def result(
    subject: str,
    workload: str,
    params: dict,
    samples: list[float],
    cpu_per_gib: float = 1.0,
    driver_share: float = 0.0,
    status: str = "ok",
    error: str | None = None,
) -> Result:
    """A finished result as the runner would aggregate it (statistics from stats.summarize)."""
    r = Result(
        subject=subject,
        workload=workload,
        params=params,
        metric="throughput",
        unit="MiB/s",
        status=status,
        error=error,
    )
    if status != "ok":
        return r
    s = summarize(samples)
    r.samples, r.median, r.ci95, r.cv = list(samples), s.median, s.ci95, s.cv
    driver = cpu_per_gib * driver_share
    r.cpu = CPU(
        per_gib_s=cpu_per_gib,
        per_gib={"app": cpu_per_gib - driver - 0.1, "driver": driver, "kernel_threads": 0.1},
    )
    r.ctx_switches_per_gib = 5000.0 if driver_share == 0 else 900000.0
    r.cache = "cold-verified" if params.get("cache") == "cold" else "n/a"
    if "write" in str(params.get("rw", "")):
        r.write_amplification = 1.01
    else:
        r.read_amplification = 1.2
    return r


def fio(variant: str, rw: str, **kw) -> dict:
    return {
        "engine": "fio",
        "variant": variant,
        "rw": rw,
        "block_size": "1M",
        "numjobs": 1,
        "file_size": 400 * MiB,
        "direct": False,
        **kw,
    }


def cell(op: str, fs: int, rs: int) -> dict:
    rw = {
        "write": "write",
        "rewrite": "write",
        "rand-write": "randwrite",
        "rand-read": "randread",
    }.get(op, "read")
    tag = {KiB: "k", MiB: "m", GiB: "g"}
    unit = max(u for u in tag if fs % u == 0 and fs >= u)
    runit = max(u for u in tag if rs % u == 0 and rs >= u)
    variant = f"{op}-{fs // unit}{tag[unit]}-{rs // runit}{tag[runit]}"
    cache = "cold" if "read" in op and op != "reread" else "none"
    return {
        "engine": "fio",
        "variant": variant,
        "op": op,
        "file_size": fs,
        "record_size": rs,
        "rw": rw,
        "numjobs": 1,
        "cache": cache,
    }


CELLS = [(MiB, 8 * KiB), (MiB, 128 * KiB), (64 * MiB, 8 * KiB), (64 * MiB, 128 * KiB)]


def synthetic_run(run_id: str = "20250101-000000-abcd", kernel: str = "6.1.0") -> Run:
    subjects = [
        subject(
            "ext4",
            driver_version="Linux 6.1",
            mkfs_command=["mkfs.ext4", "-q", "/dev/loop3"],
            effective_mount_options="rw",
        ),
        subject(
            "ntfs-3g",
            driver_version="ntfs-3g 2022.10.3",
            mkfs_command=["mkntfs", "-Q", "/dev/loop4"],
        ),
        subject("exfat-fuse", status="unavailable", error="mount.exfat-fuse not found"),
    ]
    results = [
        result("ext4", "seq-write", fio("fsync", "write", fsync="end"), [600, 610, 620], 2.0),
        result("ntfs-3g", "seq-write", fio("fsync", "write", fsync="end"), [29, 30, 31], 18.0, 0.5),
        result("ext4", "seq-read", fio("cold", "read", cache="cold"), [1000, 1010, 990], 1.0),
        result(
            "ntfs-3g", "seq-read", fio("cold", "read", cache="cold"), [995, 1005, 1000], 1.5, 0.3
        ),
        result("ext4", "rand-read", fio("4k-direct", "randread", direct=True), [190, 195, 200]),
        result(
            "ntfs-3g",
            "rand-read",
            fio("4k-direct", "randread", direct=True),
            [],
            status="failed",
            error="fio job error 22: Invalid argument",
        ),
    ]
    for fs, rs in CELLS:
        for op in OPS:
            if op == "stride-read" and fs // rs < 16:
                continue
            base = 1000.0 if op != "reread" else 8000.0
            results.append(
                result("ext4", "iozone", cell(op, fs, rs), [base, base * 1.01, base * 0.99], 2.0)
            )
            results.append(
                result(
                    "ntfs-3g",
                    "iozone",
                    cell(op, fs, rs),
                    [base / 4, base / 4 * 1.02, base / 4 * 0.98],
                    6.0,
                    0.5,
                )
            )
    for s in ("ext4", "ntfs-3g"):
        results.append(
            result(
                s,
                "iozone",
                cell("write", 2 * GiB, MiB),
                [],
                status="unsupported",
                error="file size 2 GiB exceeds the image budget 409 MiB; use a larger --size",
            )
        )
    env = Environment(
        kernel=kernel,
        cpu_model="Test CPU",
        cpus=2,
        memory_bytes=24 * GiB,
        fio_version="fio-3.33",
        backing="ram",
        image_size=GiB,
        backing_note="images are files in /dev/shm (a loop over memory)",
        sysctl={"vm.dirty_ratio": "20", "vm.dirty_background_ratio": "10"},
    )
    return Run(
        run_id=run_id,
        started="2025-01-01T00:00:00",
        finished="2025-01-01T00:05:00",
        status="complete",
        command=["fsbench", "compare", "ext4", "ntfs-3g"],
        environment=env,
        subjects=subjects,
        results=results,
    )


# Plots this run calls for: 7 Iozone ops, strided read vs record size, one ratio heatmap
# (ntfs-3g / ext4), three workloads, CPU, context switches, amplification.
EXPECTED_PLOTS = 7 + 1 + 1 + 3 + 3


@pytest.fixture(scope="module")
def run() -> Run:
    return synthetic_run()


@pytest.fixture(scope="module")
def page(run: Run) -> str:
    return render_html(run)


@pytest.fixture(scope="module")
def planned(run: Run) -> plots.Plots:
    return plots.plan(build(run))


# -- self-contained ----------------------------------------------------------------------------
def test_page_fetches_nothing(page: str) -> None:
    low = page.lower()
    for bad in (
        'src="http',
        "src='http",
        'href="http',
        "href='http",
        "@import",
        "url(http",
        "<link",
        "<script src",
        "<iframe",
        "<img",
    ):
        assert bad not in low, bad
    # An SVG's own DOCTYPE names a URL; inlined figures must not carry it.
    assert "<!doctype svg" not in low and "<?xml" not in low
    # xmlns attributes are names, not fetches; any other http(s) text would be a reference.
    leftovers = re.sub(r'xmlns(:\w+)?="https?://[^"]*"', "", page)
    assert "http://" not in leftovers and "https://" not in leftovers


def test_page_has_one_svg_per_expected_plot(planned: plots.Plots, page: str) -> None:
    assert page.count("<svg") == EXPECTED_PLOTS == len(planned.all())
    assert page.count('<figure class="plot"') == EXPECTED_PLOTS
    for op in OPS:
        assert f'id="matrix-{op}"' in page
    assert 'id="matrix-stride-records"' in page and 'id="matrix-ratio-ntfs-3g"' in page


def test_svg_ids_are_unique_across_the_page(page: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', page)
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, sorted(dupes)[:5]
    # Every internal reference points at an id of the page.
    refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', page))
    assert refs <= set(ids)


# -- what the page says ------------------------------------------------------------------------
def test_summary_sentence_from_known_medians(run: Run, page: str) -> None:
    by_title = {f.title: f for f in findings(run)}
    f = by_title["seq-write/fsync"]
    assert f.best == "ext4" and f.best_value == 610
    text = " ".join(f.sentences)
    # 30 / 610 = 0.049; CPU 18 / 2 = 9
    assert "ext4 is fastest: 610 MiB/s." in text
    assert "ntfs-3g writes 1 MiB records (final fsync) at 0.049× ext4's rate" in text
    assert "spends 9.00× the CPU per GiB" in text
    # The page leads with it: the fastest, then each other subject's ratio to it, marked.
    answer = page[page.index('data-workload="seq-write/fsync"') :]
    answer = answer[: answer.index("</div>")]
    assert '<strong class="winner">ext4</strong> is fastest, <span class="rank">610 MiB/s' in answer
    assert 'ntfs-3g <span class="worse">0.049×' in answer


def test_summary_says_when_a_difference_is_not_decided(run: Run) -> None:
    text = " ".join(next(f for f in findings(run) if f.title == "seq-read/cold").sentences)
    assert "[95 % interval 0.97–1.03]" in text and "; not separated" in text


def test_summary_of_a_matrix_op_spans_its_cells(run: Run) -> None:
    f = next(f for f in findings(run) if f.title == "Iozone write")
    text = " ".join(f.sentences)
    assert "over the 4 cells all subjects ran" in text
    assert "ntfs-3g writes new files at 0.25× ext4's rate" in text
    assert "spends 3.00× the CPU per GiB" in text
    assert any("unsupported: file size 2 GiB exceeds" in p for p in f.problems)


def test_failures_and_unavailable_subjects_are_shown(page: str) -> None:
    assert "failed: fio job error 22: Invalid argument" in page
    assert "Not measured here: exfat-fuse — mount.exfat-fuse not found" in page
    assert "Not run: 2 results unsupported: file size 2 GiB exceeds the image budget" in page


def test_environment_table(page: str) -> None:
    for text in ("6.1.0", "fio-3.33", "ntfs-3g 2022.10.3", "mkfs.ext4 -q /dev/loop3", "Test CPU"):
        assert text in page


def test_knees_marked_only_when_in_range(run: Run, planned: plots.Plots) -> None:
    marks = plots.knees(run.environment, "write")
    assert any(label.startswith("RAM") for _, label in marks)
    assert any("writeback starts" in label for _, label in marks)
    # 64 MiB files are far below 24 GiB of RAM: the caption says so instead of a line.
    p = planned.matrix[0]
    assert "every file fits in the page cache" in p.caption
    assert "<line" in p.svg or "<path" in p.svg


def test_comparing_runs_lists_what_differs(run: Run) -> None:
    other = synthetic_run("20250102-000000-beef", kernel="6.9.0")
    html = render_html(run, compare_with=[other])
    assert "Against other runs" in html
    assert "<td>kernel</td>" in html and "6.9.0" in html and "matters" in html


def test_write_report_is_atomic(run: Run, tmp_path: Path) -> None:
    path = write_report(run, tmp_path / "out")
    assert path == tmp_path / "out" / "report.html"
    assert path.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.html"]


def test_ratio_format() -> None:
    assert fmt_ratio(0.0492) == "0.049×"
    assert fmt_ratio(0.61) == "0.61×"
    assert fmt_ratio(9.04) == "9.04×"
    assert fmt_ratio(12.4) == "12.4×"
    assert fmt_ratio(123.4) == "123×"
    assert fmt_ratio(None) == "–"


# -- the terminal matrix table -----------------------------------------------------------------
def test_matrix_table_groups_by_op_and_marks_the_best(run: Run) -> None:
    con = Console(record=True, width=120)
    con.print(Group(*matrix_tables(build(run).matrix)))
    text = con.export_text()
    for op in OPS:
        assert f"iozone {op}" in text
    # One best per row: 6 ops in each of the 4 cells, strided read in 3 of them.
    assert text.count("★") - text.count("★ best per row") == len(CELLS) * 6 + 3
    assert "not run: 2 iozone results unsupported" in text
    assert "0.25×" in text


def test_matrix_runs_with_several_job_counts_stay_apart() -> None:
    from fsbench.report.model.grouping import groups

    results = []
    for jobs in (1, 2):
        for s, v in (("ext4", 100.0), ("ntfs-3g", 50.0)):
            results.append(
                result(s, "iozone", {**cell("write", MiB, 8 * KiB), "numjobs": jobs}, [v, v, v])
            )
    run = Run(
        run_id="r",
        started="now",
        results=results,
        subjects=[
            Subject(id="ext4", driver="ext4", fs="ext4", kind="kernel"),
            Subject(id="ntfs-3g", driver="ntfs-3g", fs="ntfs", kind="fuse"),
        ],
    )
    assert [g.label for g in groups(run)] == ["write", "write-j2"]
    ids = [p.id for p in plots.plan(build(run)).matrix]
    assert ids[:2] == ["matrix-write", "matrix-write-j2"]
