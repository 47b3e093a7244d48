"""--clients: parsing and validation, fio's client-mode JSON (real captures), refusal of
workloads without a multi-client form, merging per-client figures. No network here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fsbench.cli.options import option
from fsbench.errors import UsageError
from fsbench.records.schema import SCHEMA_VERSION, Result, Run, Sample
from fsbench.registry import resolve_workloads
from fsbench.schedule.dimensions.clients import (
    Client,
    ClientsJob,
    apply_clients,
    job_section,
    parse_client_json,
    parse_clients,
    parse_probe,
)
from fsbench.schedule.merge import merge_extras
from fsbench.schedule.runner import aggregate
from fsbench.workloads.base import Measurement, Target
from fsbench.workloads.fio import FIO_JOBS

FIX = Path(__file__).parent / "fixtures" / "fio_clients"
NS = [Client("10.213.1.2"), Client("10.213.2.2"), Client("10.213.3.2")]


# -- parsing and validation --------------------------------------------------------------------
def test_parse_clients_forms() -> None:
    assert parse_clients("nas1, nas2:8766,[fd00::2]:9000,10.0.0.5") == [
        Client("nas1", 8765),
        Client("nas2", 8766),
        Client("fd00::2", 9000),
        Client("10.0.0.5", 8765),
    ]
    assert Client("fd00::2", 9000).fio_arg == "--client=ip6:fd00::2,9000"
    assert Client("nas2", 8766).fio_arg == "--client=ip:nas2,8766"
    assert Client("fd00::2", 9000).name == "[fd00::2]:9000"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "give HOST[:PORT]"),
        ("a,,b", "give HOST[:PORT]"),
        ("nas1:0", "not 1-65535"),
        ("nas1:99999", "not 1-65535"),
        ("nas1:http", "not 1-65535"),
        ("fd00::2", "as [fd00::2]:PORT"),
        ("[nonsense]:1", "not [IPV6-ADDRESS]:PORT"),
        ("bad_host!", "not a host name"),
        ("nas1,nas1:8765", "listed twice"),
    ],
)
def test_parse_clients_refuses(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=None) as e:
        parse_clients(text)
    assert says in str(e.value)
    assert "\n" not in str(e.value)


def parse_sweep(text: str, n_clients: int) -> list[int]:
    """`--clients-sweep TEXT` as the command line parses it, then fitted to the clients."""
    wl = resolve_workloads("seq-write/fsync", None)
    sweep = option("--clients-sweep").parse_text(text)
    clients = parse_clients(",".join(f"h{i}" for i in range(n_clients)))
    return [len(w.clients) for w in apply_clients(wl, clients, sweep)]  # type: ignore[attr-defined]


def test_sweep_counts() -> None:
    assert parse_sweep("1,2,3", 3) == [1, 2, 3]
    for bad, says in (("1,4", "4 clients asked, 3 given"), ("0,1", "at least 1"), ("x", "whole")):
        with pytest.raises(UsageError, match=says):
            parse_sweep(bad, 3)


def test_non_fio_workloads_are_refused() -> None:
    wl = resolve_workloads("seq-write/fsync,tree-hash", None)
    with pytest.raises(UsageError, match="tree-hash has no multi-client form"):
        apply_clients(wl, parse_clients("a,b"), None)
    with pytest.raises(UsageError, match="needs --clients"):
        apply_clients(wl, None, [1, 2])


def test_sweep_makes_one_workload_per_count() -> None:
    wl = apply_clients(
        resolve_workloads("seq-read/cold", None, [1, 2]), parse_clients("a,b,c"), [1, 3]
    )
    assert [w.id for w in wl] == [  # type: ignore[attr-defined]
        "seq-read/cold-c1",
        "seq-read/cold-c3",
        "seq-read/cold-j2-c1",
        "seq-read/cold-j2-c3",
    ]
    job = wl[1]
    assert isinstance(job, ClientsJob) and [c.host for c in job.clients] == ["a", "b", "c"]
    target = Target("d", "/x/.fsbench-1", "directory", 64 * 1024 * 1024)
    p = job.params(target)
    assert p["clients"] == 3 and p["numjobs"] == 1 and p["cache"] == "n/a"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSBENCH_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), FSBENCH_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-m", "fsbench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--clients", "nas1:99999"], "not 1-65535"),
        (["--clients", "a,b", "--clients-sweep", "1,3"], "3 clients asked, 2 given"),
        (["--clients-sweep", "1,2"], "needs --clients"),
        (["--clients", "a", "--workloads", "metadata"], "has no multi-client form"),
    ],
)
def test_cli_bad_clients_is_one_line_exit_2(tmp_path: Path, extra: list[str], says: str) -> None:
    target = tmp_path / "t"
    target.mkdir()
    proc = _cli(tmp_path, "run", "--target", str(target), *extra)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(target.iterdir()) == [] and not (tmp_path / "data").exists()


# -- fio's client-mode output, captured from real servers -------------------------------------
def test_three_clients_totals_and_each() -> None:
    out = parse_client_json((FIX / "three_clients_write.json").read_text(), "", "write", NS)
    per, total = out["clients"], out["total"]
    assert [c["client"] for c in per] == ["10.213.1.2:8765", "10.213.2.2:8765", "10.213.3.2:8765"]
    # fio's "All clients" entry is the total: every client's bytes and I/Os ...
    assert total["bytes"] == sum(c["bytes"] for c in per) == 3 * 64 * 1024 * 1024
    assert total["ios"] == sum(c["ios"] for c in per)
    # ... over the longest runtime (these size-based clients did not run equally long).
    assert total["seconds"] == max(c["seconds"] for c in per) == 0.093
    assert total["mib_s"] == pytest.approx(192 / 0.093)
    assert per[0]["sys_cpu"] == pytest.approx(10.810811) and per[0]["usr_cpu"] == 0.0
    assert per[0]["lat_us"]["p99"] > 0 and out["fio_version"] == "fio-3.33"


def test_one_client_has_no_aggregate() -> None:
    out = parse_client_json((FIX / "one_client_read.json").read_text(), "", "read", NS[:1])
    assert out["total"]["bytes"] == out["clients"][0]["bytes"] == 8 * 1024 * 1024


def test_killed_client_fails_the_sample_by_name() -> None:
    # Server 10.213.2.2 was killed mid-run: fio says so on stdout and leaves it out.
    stdout = (FIX / "killed_read.json").read_text()
    with pytest.raises(Exception, match=r"client 10\.213\.2\.2:8765 .*disconnected") as e:
        parse_client_json(stdout, "", "read", NS)
    assert "10.213.1.2" not in str(e.value) and "10.213.3.2" not in str(e.value)


def test_no_json_names_every_client() -> None:
    err = "fio: connect: Connection refused\nfio: failed to connect to 10.213.1.2:9999\n"
    with pytest.raises(Exception, match=r"10\.213\.1\.2:8765.*failed to connect to 10\.213\.1\.2"):
        parse_client_json("", err, "read", NS[:1])


def test_probe_line() -> None:
    line = "hostname=vm, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.33, flags=1\n"
    assert parse_probe(line) == {
        "hostname": "vm",
        "bits": "64",
        "os": "Linux",
        "arch": "x86-64",
        "fio": "fio-3.33",
    }
    assert parse_probe("fio: failed to connect to x:1") is None


def test_job_section_from_fio_argv() -> None:
    job = next(j for j in FIO_JOBS if j.id == "seq-write/fsync")
    target = Target("d", "/s/.fsbench-1", "directory", 32 * 1024 * 1024)
    text = job_section(job.argv(target), "seq.c0", timed=True)
    lines = text.splitlines()
    assert lines[0] == "[seq.c0]"
    assert "directory=/s/.fsbench-1" in lines and "end_fsync=1" in lines
    assert "bs=1M" in lines and "size=33554432" in lines
    assert not any(ln.startswith(("runtime=", "output-format", "name=")) for ln in lines)


# -- per-client figures through the runner's merge and aggregate ------------------------------
def _rec(name: str, nbytes: int, seconds: float, cpu: float) -> dict:
    return {
        "client": name,
        "bytes": nbytes,
        "ios": nbytes // 1024,
        "seconds": seconds,
        "mib_s": nbytes / 2**20 / seconds,
        "iops": nbytes / 1024 / seconds,
        "lat_us": {"p99": 10.0 * seconds},
        "lat_mean_us": 5.0,
        "usr_cpu": cpu,
        "sys_cpu": 2 * cpu,
        "cpu_s": 0.1,
        "error": 0,
    }


def _clients_job() -> Any:
    return apply_clients(resolve_workloads("seq-write/fsync", None), parse_clients("a,b"), None)[0]


def test_iterations_merge_per_client() -> None:
    """By the rule the workload declares (hook merge_extra): the runner knows no clients."""
    a = Measurement(1.0, 1.0, extra={"clients": [_rec("a", 2**20, 1.0, 10.0)]})
    b = Measurement(1.0, 3.0, extra={"clients": [_rec("a", 5 * 2**20, 3.0, 30.0)]})
    assert merge_extras([a, b], 4.0)["last_iteration_only"] == ["clients"]
    (c,) = merge_extras([a, b], 4.0, _clients_job().merge_extra)["clients"]
    assert c["bytes"] == 6 * 2**20 and c["seconds"] == 4.0
    assert c["mib_s"] == pytest.approx(1.5)
    assert c["usr_cpu"] == pytest.approx((10 * 1 + 30 * 3) / 4)
    assert c["lat_us"]["p99"] == pytest.approx(20.0)


def test_result_carries_per_client_medians() -> None:
    res = Result(subject="d", workload="seq-read", metric="throughput", unit="MiB/s")
    for v in (100.0, 110.0, 120.0):
        half = int(v / 2 * 2**20)
        s = Sample(
            value=v,
            seconds=1.0,
            bytes=int(v * 2**20),
            extra={
                "clients": [
                    _rec("a", half, 1.0, 5),
                    _rec("b", half, 1.0, 7),
                ]
            },
        )
        res.samples.append(v)
        res.sample_details.append(s)
    aggregate(res, summarize=_clients_job().summarize_samples)
    assert res.clients is not None
    assert [c.client for c in res.clients] == ["a", "b"]
    assert res.clients[0].mib_s == pytest.approx(55.0) and res.clients[1].usr_cpu == 7
    again = Result.model_validate_json(res.model_dump_json())
    assert again.clients == res.clients


def test_old_results_still_load() -> None:
    run = Run.model_validate({"schema_version": 1, "run_id": "x", "started": "t"})
    assert run.environment.clients == [] and SCHEMA_VERSION >= 2


# -- the probe before the first sample: a fake fio stands in for the servers ------------------
def test_probe_names_mismatch_and_silence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsbench.schedule.dimensions import clients as mod

    fake = tmp_path / "fio"
    # Client "old" answers with another fio version; client "silent" never answers, and dies
    # of SIGINT as fio's client does (a plain sleep keeps SIGINT ignored where the test runner
    # ignores it, and would hold the check for the SIGKILL grace).
    dies = "import signal, time; signal.signal(2, signal.SIG_DFL); time.sleep(30)"
    silent = f"{sys.executable} -c '{dies}'"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  *old*) echo 'hostname=old, be=0, 64-bit, os=Linux, arch=x86, fio=fio-3.1, flags=1';;\n"
        f"  *silent*) exec {silent};;\n"
        "  *) echo 'hostname=ok, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.33, flags=1';;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(mod, "fio_binary", lambda: str(fake))
    monkeypatch.setattr(mod, "fio_version", lambda: "fio-3.33")
    monkeypatch.setattr(mod, "PROBE_TIMEOUT_S", 1.0)
    group = mod.ClientGroup((Client("ok"), Client("old"), Client("silent")))
    t0 = time.monotonic()
    infos = group.check(str(tmp_path / "work"))
    # Given up, not waited for: the silent one would hold the check for its 30 s sleep. A
    # bound far from the probe timeout, so a loaded machine cannot fail it.
    assert time.monotonic() - t0 < 25
    assert infos[0].error is None and infos[0].os == "Linux"
    assert "fio version mismatch: the client runs fio-3.1, this host fio-3.33" in str(
        infos[1].error
    )
    assert "no answer within 1 s" in str(infos[2].error)
    problem = group.problem(group.clients[1:])
    assert problem is not None and "client old:8765" in problem and "silent:8765" in problem
    assert group.problem(group.clients[:1]) is None
    assert not list((tmp_path / "work").iterdir())  # the probe's job file is gone


def test_report_plots_scaling_and_lists_clients() -> None:
    from fsbench.records.schema import ClientInfo, Subject
    from fsbench.report.model.diff import environment_differences
    from fsbench.report.views.sections import render_html

    run = Run(run_id="r", started="t")
    run.subjects.append(Subject(id="/mnt/nfs", driver="directory", fs="nfs", kind="directory"))
    run.environment.clients = [ClientInfo(host=c.host, port=c.port) for c in NS]
    for n in (1, 2, 3):
        res = Result(
            subject="/mnt/nfs",
            workload="seq-read",
            params={"variant": "cold", "numjobs": 1, "clients": n},
            metric="throughput",
            unit="MiB/s",
        )
        for v in (100.0 * n**0.5, 101.0 * n**0.5, 99.0 * n**0.5):
            per = [_rec(c.name, int(v / n * 2**20), 1.0, 3.0) for c in NS[:n]]
            res.samples.append(v)
            res.sample_details.append(
                Sample(value=v, seconds=1.0, bytes=int(v * 2**20), extra={"clients": per})
            )
        aggregate(res, summarize=_clients_job().summarize_samples)
        run.results.append(res)
    html = render_html(run)
    assert 'id="clients-scaling-seq-read-cold"' in html
    assert html.count("<svg") >= 1 and "10.213.3.2:8765" in html
    other = run.model_copy(deep=True)
    other.environment.clients[0].fio_version = "fio-3.1"
    (d,) = [d for d in environment_differences(run, other) if d.what == "clients"]
    assert d.matters


def test_a_clients_job_has_every_typed_capability_a_workload_has() -> None:
    """The runner reads capabilities as typed fields (placement, warmup, variant, ...): a
    ClientsJob without Declared's defaults crashed every --clients run at its first note."""
    from dataclasses import fields, is_dataclass

    from fsbench.schedule.dimensions.clients import ClientsJob
    from fsbench.workloads.base import Declared

    assert issubclass(ClientsJob, Declared)
    declared = [n for n in vars(Declared) if not n.startswith("_")]
    assert is_dataclass(ClientsJob) and {f.name for f in fields(ClientsJob)} >= {"job", "count"}
    for name in declared:
        assert hasattr(ClientsJob, name), name
