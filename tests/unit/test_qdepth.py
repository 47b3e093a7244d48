"""Queue depth, engine and latency: workload parameters from the command line, the
diskmark suite's jobs, latency read from real fio 3.33 JSON, and latency judged (lower is
better) by the same verdict as throughput."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fsbench.errors import UsageError
from fsbench.records.schema import Result, Sample
from fsbench.registry import resolve_workloads
from fsbench.report.model import build
from fsbench.report.model.comparison import latency_verdict as judge
from fsbench.report.model.grids import kdiskmark_label as label
from fsbench.report.plots.latency_plots import cdf_points, latency_plots
from fsbench.report.views.table import workload_tables
from fsbench.stats import latency
from fsbench.units import fmt_value
from fsbench.workloads.base import Target
from fsbench.workloads.fio import parse_fio_json, parse_io_params

FIXTURES = Path(__file__).parent / "fixtures" / "fio_json"


# -- parameters ---------------------------------------------------------------------------------
def test_a_depth_on_a_psync_job_takes_libaio_and_names_the_variant() -> None:
    (job,) = resolve_workloads("rand-read/4k-direct:qd32", None)
    assert (job.id, job.iodepth, job.ioengine) == ("rand-read/4k-direct-qd32", 32, "libaio")
    p = job.params(Target("s", "/mnt/x", "kernel", 64 << 20))
    assert (p["iodepth"], p["ioengine"]) == (32, "libaio")
    argv = job.argv(Target("s", "/mnt/x", "kernel", 64 << 20))
    assert "--ioengine=libaio" in argv and "--iodepth=32" in argv


def test_engine_and_jobs_apply_to_every_variant_of_a_name() -> None:
    jobs = resolve_workloads("rand-write:qd8:io_uring:j2", None)
    assert len(jobs) == 4
    assert {(j.iodepth, j.ioengine, j.numjobs) for j in jobs} == {(8, "io_uring", 2)}
    assert all(j.id.endswith("-qd8-io_uring-j2") for j in jobs)


def test_plain_jobs_keep_their_old_params_and_argv() -> None:
    """psync at depth 1 names no depth, so results of older runs still match (diff)."""
    (job,) = resolve_workloads("rand-read/4k-direct", None)
    p = job.params(Target("s", "/mnt/x", "kernel", 64 << 20))
    assert "iodepth" not in p and p["ioengine"] == "psync"
    argv = job.argv(Target("s", "/mnt/x", "kernel", 64 << 20))
    assert "--randrepeat=1" in argv and not any(a.startswith("--iodepth") for a in argv)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("rand-read:qd0", "out of range"),
        ("rand-read:qd5000", "out of range"),
        ("rand-read:qdx", "not a fio parameter"),
        ("rand-read:posix", "not a fio parameter"),
        ("rand-read:psync:qd4", "psync is synchronous"),
        ("rand-read:j0", "out of range"),
        ("rand-read:qd4:qd8", "sets the queue depth again"),
        ("metadata:qd4", "takes no queue depth"),
    ],
)
def test_bad_parameters_are_one_clear_line(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as e:
        resolve_workloads(spec, None)
    assert "\n" not in str(e.value)


def test_parse_io_params_reads_each_token() -> None:
    got = parse_io_params("x", "QD32:io_uring:t4")
    assert (got.iodepth, got.ioengine, got.numjobs) == (32, "io_uring", 4)


# -- the diskmark suite -------------------------------------------------------------------------
def test_diskmark_is_kdiskmarks_eight_tests() -> None:
    jobs = resolve_workloads(None, "diskmark")
    got = {(j.rw, j.bs, j.iodepth, j.numjobs) for j in jobs}
    tests = [("read", "1M", 8), ("read", "1M", 1), ("randread", "4k", 32), ("randread", "4k", 1)]
    want = {(d, bs, qd, 1) for rw, bs, qd in tests for d in (rw, rw.replace("read", "write"))}
    assert got == want and len(jobs) == 8
    for j in jobs:
        argv = j.argv(Target("s", "/mnt/x", "kernel", 512 << 20))
        kdiskmark = ("--ioengine=libaio", "--direct=1", "--end_fsync=1", "--randrepeat=0")
        for opt in (*kdiskmark, "--refill_buffers=1"):
            assert opt in argv, (j.id, opt)
        assert "--runtime=5" in argv
        assert j.cache == "direct" and j.min_sample_s == 0.0  # one pass = one sample
        assert j.fileset == "diskmark"  # one test file, laid out once
        # The layout pass is plain and whole: no runtime cut, no depth.
        layout = j.argv(Target("s", "/mnt/x", "kernel", 512 << 20), rw="write", whole=True)
        assert "--ioengine=psync" in layout and "--runtime=5" not in layout
        assert "--refill_buffers=1" not in layout  # untimed: no need to pay for fresh data
        assert j.params(Target("s", "/mnt/x", "kernel", 512 << 20))["refill_buffers"] is True


def test_diskmark_io_uring_is_a_parameter_of_the_suite() -> None:
    jobs = resolve_workloads(None, "diskmark:io_uring")
    assert {j.ioengine for j in jobs} == {"io_uring"} and len(jobs) == 8
    assert label(jobs[2].variant) == "RND4K Q32T1 read io_uring"


# -- latency from real fio 3.33 JSON ------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "direction", "depth"),
    [
        ("randread-io_uring", "read", 8),
        ("randwrite-io_uring", "write", 8),
        ("randread-psync", "read", 1),
        ("randwrite-psync", "write", 1),
        ("randread-libaio", "read", 8),
        ("randwrite-libaio", "write", 8),
    ],
)
def test_total_latency_from_real_fio_json(name: str, direction: str, depth: int) -> None:
    """fio run as fsbench runs it (--lat_percentiles=1): the figures are its total latency,
    submission to completion, never the completion latency beside it."""
    text = (FIXTURES / f"{name}.json").read_text()
    doc = json.loads(text)
    part = doc["jobs"][0][direction]
    assert doc["fio version"] == "fio-3.33"
    assert int(doc["jobs"][0]["job options"]["iodepth"]) == depth
    got = parse_fio_json(text, direction)
    pct, clat = part["lat_ns"]["percentile"], part["clat_ns"]["percentile"]
    assert got["lat_basis"] == latency.LAT_TOTAL
    assert got["lat_us"]["p50"] == pytest.approx(pct["50.000000"] / 1000)
    assert got["lat_us"]["p99"] == pytest.approx(pct["99.000000"] / 1000)
    assert got["lat_us"]["p99.9"] == pytest.approx(pct["99.900000"] / 1000)
    assert got["lat_mean_us"] == pytest.approx(part["lat_ns"]["mean"] / 1000)
    assert got["lat_us"]["p50"] <= got["lat_us"]["p99"] <= got["lat_us"]["p99.9"]
    assert got["iops"] == pytest.approx(part["iops"]) and got["iops"] > 0
    # Each I/O's total latency is its submission plus its completion latency: at every point
    # of the distribution at least the completion latency's.
    assert all(pct[k] >= clat[k] for k in clat)
    # The whole list, for the CDF: fio's 17 default points, increasing.
    cdf = got["lat_pct_us"]
    assert len(cdf) == len(pct) == 17
    vals = [cdf[k] for k in sorted(cdf, key=float)]
    assert vals == sorted(vals)
    assert cdf["99"] == got["lat_us"]["p99"]


def test_async_total_latency_exceeds_completion_latency_in_real_json() -> None:
    """Why the total is the figure: with an async engine fio's clat starts after the submit
    call returns, so the total latency's mean is the larger by the submission time."""
    doc = json.loads((FIXTURES / "randread-io_uring.json").read_text())["jobs"][0]["read"]
    got = parse_fio_json((FIXTURES / "randread-io_uring.json").read_text(), "read")
    assert doc["slat_ns"]["mean"] > 0
    assert got["lat_mean_us"] == pytest.approx(doc["lat_ns"]["mean"] / 1000)
    assert got["lat_mean_us"] > doc["clat_ns"]["mean"] / 1000


@pytest.mark.parametrize(
    ("name", "direction"),
    [("clatonly-randread-io_uring", "read"), ("clatonly-randwrite-psync", "write")],
)
def test_json_without_total_percentiles_reads_the_completion_latency(
    name: str, direction: str
) -> None:
    """fio run without --lat_percentiles (fsbench before it; a job file's own options):
    the completion latency's percentiles, said to be that."""
    text = (FIXTURES / f"{name}.json").read_text()
    part = json.loads(text)["jobs"][0][direction]
    assert "percentile" not in part["lat_ns"]
    got = parse_fio_json(text, direction)
    assert got["lat_basis"] == latency.LAT_COMPLETION
    assert got["lat_us"]["p99"] == pytest.approx(part["clat_ns"]["percentile"]["99.000000"] / 1000)
    assert len(got["lat_pct_us"]) == 17


def test_every_timed_fio_run_asks_for_total_latency_percentiles() -> None:
    from fsbench.workloads.diskmark import DISKMARK_JOBS
    from fsbench.workloads.fio import FIO_JOBS, FioJob

    target = Target("s", "/mnt/x", "kernel", 64 << 20)
    jobs = [j for j in FIO_JOBS if isinstance(j, FioJob)] + DISKMARK_JOBS
    for job in jobs:
        assert "--lat_percentiles=1" in job.argv(target), job.id
        # Laying a file out is not timed: nothing to ask.
        assert "--lat_percentiles=1" not in job.argv(target, rw="write", whole=True), job.id


# -- latency judged like throughput -------------------------------------------------------------
def _res(
    subject: str,
    p99s: list[float],
    mib_s: float = 100.0,
    rw: str = "randread",
    basis: str | None = latency.LAT_TOTAL,
) -> Result:
    """A diskmark result; `basis` None: stored before lat_basis (fio's clat)."""
    samples = [
        Sample(
            value=mib_s * (1 + 0.01 * i),
            seconds=1.0,
            extra={
                "iops": mib_s * 256 * (1 + 0.01 * i),
                "lat_us": {"p50": p / 4, "p99": p, "p99.9": p * 2},
                "lat_pct_us": {"50": p / 4, "99": p, "99.9": p * 2},
                **({"lat_basis": basis} if basis else {}),
            },
            cache="direct",
        )
        for i, p in enumerate(p99s)
    ]
    r = Result(
        subject=subject,
        workload="diskmark",
        variant="rnd4k-q1t1-read",
        params={"variant": "rnd4k-q1t1-read", "rw": rw, "block_size": "4k", "iodepth": 1},
        metric="throughput",
        unit="MiB/s",
        samples=[s.value for s in samples],
        sample_details=samples,
        median=float(np.median([s.value for s in samples])),
        verdict_family={"looks": 1, "comparisons": 1, "alpha": 0.05},
    )
    r.latency = latency.summary(samples)
    return r


def test_a_six_times_longer_p99_is_marked_worse() -> None:
    base = _res("ext4", [100, 104, 98, 101, 99])
    slow = _res("ntfs-3g", [600, 640, 590, 610, 605])
    v = judge(base, slow, "p99")
    assert v is not None and v.mark == "above" and v.ratio == pytest.approx(6.0, rel=0.05)
    assert v.better(False) is False  # a longer latency is worse
    fast = judge(slow, base, "p99")
    assert fast is not None and fast.better(False) is True
    # The view is the same result with its p99s as samples, lower better.
    view = latency.view(slow, "p99")
    assert view is not None and view.samples == [600, 640, 590, 610, 605]
    assert not view.higher_is_better and view.unit == "µs"


def test_the_latency_verdict_is_the_throughput_procedure_on_the_p99s() -> None:
    from fsbench.stats.latency import FIO_RESOLUTION
    from fsbench.stats.verdict import Family, verdict

    base = _res("ext4", [100, 130, 90])
    other = _res("xfs", [110, 120, 95])
    v = judge(base, other, "p99")
    # The same procedure, at fio's histogram resolution (a percentile is a bucket's value).
    assert v == verdict([100, 130, 90], [110, 120, 95], Family(resolution=FIO_RESOLUTION))
    assert v is not None and v.mark == "open"


def test_a_bucket_step_alone_makes_no_mark() -> None:
    from dataclasses import replace

    from fsbench.stats.latency import FIO_RESOLUTION

    """Two identical subjects whose p99 sit in neighbouring fio buckets, every sample: the
    issue's 89.6 against 91.648 was ▲ at a zero-width interval; at the histogram's resolution
    it is not separated."""
    from fsbench.stats.verdict import table_family, verdict

    fam = table_family(8, 2)
    assert verdict([89.6] * 3, [91.648] * 3, fam).mark == "above"  # exact values: it is a step
    v = verdict([89.6] * 3, [91.648] * 3, replace(fam, resolution=FIO_RESOLUTION))
    assert v.mark == "open" and v.interval is not None and v.interval[0] < 1 < v.interval[1]


def test_result_latency_is_the_median_over_samples() -> None:
    r = _res("ext4", [100, 300, 200])
    assert r.latency == {"iops": pytest.approx(25856), "p50_us": 50, "p99_us": 200, "p99.9_us": 400}


def test_latency_columns_only_where_latency_bound() -> None:
    base, other = _res("ext4", [100, 101, 99]), _res("ntfs-3g", [600, 610, 590])
    (table,) = build(_run(base, other)).tables
    assert table.latency and table.rows[1].p99.startswith("600")
    c = table.rows[1].p99_comparison
    assert c is not None and c.outcome == "worse" and c.cell(interval=False).endswith("▼")
    seq = _res("ext4", [100, 101, 99])
    seq.params = {**seq.params, "rw": "read", "block_size": "1M"}
    (table,) = build(_run(seq)).tables
    assert not table.latency and table.rows[0].p99 == ""


def test_grid_and_cdf_of_a_run() -> None:
    base, other = _res("ext4", [100, 101, 99]), _res("ntfs-3g", [600, 610, 590], mib_s=10)
    run = _run(base, other)
    g = build(run).diskmark
    assert g is not None and g.subjects == ["ext4", "ntfs-3g"]
    name, cells = g.rows[0]
    assert name == "RND4K Q1T1 read"
    assert cells["ext4"].mb == fmt_value(101 * 1.048576, 1)  # the mean of the passes, MB/s
    assert cells["ntfs-3g"].outcome == "worse"
    # The geometric mean of 1200, 1220, 1180 (as the table's p99 is its samples'), not their
    # median 1200.
    x, pct = cdf_points(other)[-1]
    assert pct == 99.9 and x == pytest.approx((1200 * 1220 * 1180) ** (1 / 3)) and x != 1200
    plots = latency_plots(build(run))
    assert len(plots) == 1 and "p99 6." in plots[0].svg


def _run(*results: Result):
    from fsbench.records.schema import Environment, Run, Subject

    return Run(
        run_id="20261126-100000-abcd",
        started="2026-11-26T10:00:00",
        environment=Environment(kernel="6.18", cpus=2, backing="ram"),
        subjects=[
            Subject(id="ext4", driver="ext4", fs="ext4", kind="kernel"),
            Subject(id="ntfs-3g", driver="ntfs-3g", fs="ntfs", kind="fuse"),
        ],
        results=list(results),
    )


def test_every_report_names_the_latency_it_shows() -> None:
    """fio's total latency is called "latency, submit to completion" in the terminal grid,
    the tables' legend, the HTML grid and the CDF; a run stored before it keeps its clat
    figures, called completion latency."""
    from rich.console import Console

    from fsbench.report.views.diskmark import grid_table, grid_view

    new = [_res("ext4", [100, 101, 99]), _res("ntfs-3g", [600, 610, 590], mib_s=10)]
    old = [_res(r.subject, [100, 101, 99], basis=None) for r in new]
    said_new, said_old = "latency, submit to completion", "completion latency (clat)"
    assert latency.words(new) == said_new and latency.words(old) == said_old
    assert "clat" in latency.words([new[0], old[1]]) and said_new in latency.words([new[0], old[1]])
    assert latency.view(new[0]).metric == f"p99 {said_new}"  # type: ignore[union-attr]
    assert latency.view(old[0]).metric == f"p99 {said_old}"  # type: ignore[union-attr]
    for results, said in ((new, said_new), (old, said_old)):
        run = _run(*results)
        con = Console(width=120, record=True, color_system=None)
        for part in grid_table(build(run).diskmark) + workload_tables(build(run)):
            con.print(part)
        assert f"p99: fio's {said}" in con.export_text()
        assert grid_view(build(run).diskmark)["latency"] == said  # type: ignore[index]
        (plot,) = latency_plots(build(run))
        assert said in plot.title and said.split(",")[0] in plot.svg


def test_a_stored_run_with_completion_latency_loads_as_before(tmp_path: Path) -> None:
    from fsbench.records.store import Store

    old = _res("ext4", [100, 300, 200], basis=None)
    run = _run(old)
    with Store(tmp_path / "r.db") as db:
        db.begin_run(run, None)
        for subject in run.subjects:
            db.save_subject(run.run_id, subject)
        for sample in old.sample_details:
            db.save_sample(run.run_id, old.model_copy(update={"sample_details": []}), sample)
        db.save_result(run.run_id, old)
        db.finish_run(run.model_copy(update={"status": "complete"}))
    with Store(tmp_path / "r.db") as db:
        (res,) = db.load_run(run.run_id).results
    assert [s.extra["lat_us"]["p99"] for s in res.sample_details] == [100, 300, 200]
    assert latency.figures(res)["p99_us"] == 200
    assert latency.basis(res) == latency.LAT_COMPLETION


# -- the explanation at depth -------------------------------------------------------------------
def _inp(res: Result, kind: str, measured: dict, base_res: Result | None = None):
    from fsbench.records.probes.factor import FactorInput, Profile

    def prof(r: Result, k: str, m: dict) -> Profile:
        return Profile(result=r, per="GiB", amount=1.0, seconds=2.0, kind=k, driver=k, measured=m)

    base = prof(base_res, "kernel", {}) if base_res is not None else None
    return FactorInput(res, prof(res, kind, measured), base, "ext4", None, None, lambda r: None)  # type: ignore[arg-type]


def test_a_qd32_run_reaching_depth_1_is_the_finding() -> None:
    from fsbench.records.probes import depth
    from fsbench.records.probes.factor import OpFigures

    res = _res("ntfs-3g", [600, 610, 590])
    res.params = {**res.params, "iodepth": 32}
    # 4 s of READ request time per GiB over a 2 s run: ≈ 2 in flight at the daemon.
    read = OpFigures(1.0, {}, None, None, None, seconds=4.0, mean_us=None)
    base = _res("ext4", [100, 101, 99])
    base.params = {**base.params, "iodepth": 32}
    for s in base.sample_details:  # 30 requests queued on average while busy
        s.extra.update({"block.queue_ms": 300.0, "block.busy_ms": 10.0})
    (f,) = depth.factors(_inp(res, "fuse", {"fuse": {"READ": read}}, base))
    assert f.figure == pytest.approx(2.0) and f.baseline == pytest.approx(30.0)
    assert "queue depth 32 asked, ≈ 2.0 FUSE READ requests at the daemon" in f.sentence
    assert "lost" in f.sentence and f.weight > 10
    (k,) = depth.factors(_inp(base, "kernel", {}))
    assert k.figure == pytest.approx(30.0) and "lost" not in k.sentence
    # Depth 1 asked: nothing to explain.
    res.params["iodepth"] = 1
    assert depth.factors(_inp(res, "fuse", {"fuse": {"READ": read}}, base)) == []
