"""KDiskMark's remaining test and choices: the MIX of each test (Read 70%/Write 30%, its figure
(R*70 + W*30) / 100) as the fio job KDiskMark runs, the `diskmark-mix` suite (its "Default
[+Mix]"), and `--diskmark-size` / `--diskmark-runtime` (its "Test: 1 GiB" and "Measure: 5 sec")
reaching every KDiskMark test's fio command, refused where they cannot apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fsbench.cli import options
from fsbench.errors import UsageError
from fsbench.lab.backing import Backing
from fsbench.lab.subject import parse_subject
from fsbench.registry import resolve_workloads
from fsbench.schedule.plan import plan_from_options
from fsbench.workloads.base import Target
from fsbench.workloads.diskmark import MIX_IDS, MIX_READ_PCT, RUNTIME_S, DiskmarkTest
from fsbench.workloads.fiojson import parse_fio_json

MiB = 1024 * 1024
FIO_JSON = Path(__file__).parent / "fixtures" / "fio_json" / "randrw-mix70-libaio.json"
TESTS = ("seq1m-q8t1", "seq1m-q1t1", "rnd4k-q32t1", "rnd4k-q1t1")
DEPTH = {"seq1m-q8t1": 8, "seq1m-q1t1": 1, "rnd4k-q32t1": 32, "rnd4k-q1t1": 1}


def _target(tmp_path: Path, size: int = 400 * MiB) -> Target:
    return Target("ext4", str(tmp_path), "kernel", size)


def _flag(argv: list[str], name: str) -> str | None:
    hits = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return hits[0] if hits else None


def test_each_test_has_its_mix_as_kdiskmark_runs_it(tmp_path: Path) -> None:
    jobs = resolve_workloads(",".join(MIX_IDS), None)
    assert [j.variant for j in jobs] == [f"{t}-mix" for t in TESTS]  # type: ignore[attr-defined]
    for j in jobs:
        assert isinstance(j, DiskmarkTest)
        test = j.variant.removesuffix("-mix")
        argv = j.argv(_target(tmp_path))
        # KDiskMark: rw for a sequential test's mix, randrw for a random one's; rwmixread=70.
        assert _flag(argv, "rw") == ("rw" if test.startswith("seq") else "randrw")
        assert _flag(argv, "rwmixread") == str(MIX_READ_PCT) == "70"
        assert _flag(argv, "bs") == ("1M" if test.startswith("seq") else "4k")
        assert int(_flag(argv, "iodepth") or 1) == DEPTH[test]
        for name, value in (("ioengine", "libaio"), ("direct", "1"), ("end_fsync", "1"),
                            ("randrepeat", "0"), ("refill_buffers", "1"),
                            ("runtime", str(RUNTIME_S)), ("numjobs", "1")):  # fmt: skip
            assert _flag(argv, name) == value, (j.id, name)
        # The layout pass writes the file plainly: no mix there.
        assert _flag(j.argv(_target(tmp_path), rw="write", whole=True), "rwmixread") is None
        p = j.params(_target(tmp_path))
        assert p["rwmixread"] == 70 and p["rw"] in ("rw", "randrw")
        # It writes: not for a --read-only volume, and its O_DIRECT is checked on writes.
        assert j.is_write and not j.read_only_ok
        assert "Read" not in j.description and "70 % reads and 30 % writes" in j.description


def test_the_suites_kdiskmark_default_and_default_plus_mix() -> None:
    plain = [j.id for j in resolve_workloads(None, "diskmark")]
    assert len(plain) == 8 and not any(i.endswith("-mix") for i in plain)
    assert [j.id for j in resolve_workloads("diskmark", None)] == plain  # a name: no mix
    mixed = [j.id for j in resolve_workloads(None, "diskmark-mix")]
    # KDiskMark's order: the reads, the writes, then the mixes.
    assert mixed == [*plain, *MIX_IDS]
    assert all(j.ioengine == "io_uring" for j in resolve_workloads(None, "diskmark-mix:io_uring"))  # type: ignore[attr-defined]


def _plan(tmp_path: Path, **typed: str | None) -> Any:
    raw = {k.replace("-", "_"): v for k, v in typed.items()}
    o = options.parse("compare", {"out": tmp_path / "out", **raw}, ("ext4",))
    return plan_from_options(o, ["fsbench"], 420.0, subjects=[parse_subject("ext4")],
                             explicit=True, backing=Backing("ram"), size=o["size"])  # fmt: skip


def test_size_and_runtime_reach_every_kdiskmark_test(tmp_path: Path) -> None:
    plan = _plan(tmp_path, suite="diskmark-mix", diskmark_size="64M", diskmark_runtime="10")
    assert len(plan.workloads) == 12
    for j in plan.workloads:
        argv = j.argv(_target(tmp_path))
        assert (_flag(argv, "runtime"), _flag(argv, "size")) == ("10", str(64 * MiB)), j.id
        assert "at most 10 s a pass" in j.description and "64 MiB test file" in j.description
        p = j.params(_target(tmp_path))
        assert (p["runtime_s"], p["file_size"]) == (10, 64 * MiB)
    # Not given: KDiskMark's 5 s and the subject's share of the image.
    plain = _plan(tmp_path / "b", workloads="diskmark/rnd4k-q1t1-mix,seq-write/fsync")
    dm, seq = plain.workloads
    assert _flag(dm.argv(_target(tmp_path, 123 * MiB)), "size") == str(123 * MiB)
    assert dm.runtime_s == RUNTIME_S
    # Other workloads are as they were.
    chosen = _plan(tmp_path / "c", workloads="diskmark/rnd4k-q1t1-mix,seq-write/fsync",
                   diskmark_runtime="3")  # fmt: skip
    assert chosen.workloads[1] == seq and chosen.workloads[0].runtime_s == 3


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ({"suite": "micro", "diskmark_runtime": "3"}, "--diskmark-runtime needs a KDiskMark test"),
        ({"diskmark_size": "64M"}, "--diskmark-size needs a KDiskMark test"),
        ({"suite": "diskmark", "diskmark_runtime": "0"}, "--diskmark-runtime 0: must be between"),
        ({"suite": "diskmark", "diskmark_size": "12X"}, "bad size '12X'"),
        # KDiskMark's 1 GiB file on a 1 GiB image: no room; --size 2560M is.
        ({"suite": "diskmark", "diskmark_size": "1G"}, "use --size 2560M or more"),
    ],
)
def test_choices_that_cannot_apply_are_refused(tmp_path: Path, typed: dict, says: str) -> None:
    with pytest.raises(UsageError) as e:
        _plan(tmp_path, **typed)
    assert says in str(e.value)
    _plan(tmp_path / "ok", suite="diskmark", diskmark_size="1G", size="2560M")


def test_a_mix_pass_is_kdiskmarks_weighted_figure() -> None:
    from fsbench.workloads.base import ChildResult
    from fsbench.workloads.diskmark import mix_measurement

    stdout = FIO_JSON.read_text()
    m = mix_measurement(stdout, 70, ChildResult(0, stdout, "", 1.0, 0.1, 0.2, 5))
    r, w = parse_fio_json(stdout, "read"), parse_fio_json(stdout, "write")
    rate = {d: x["bytes"] / MiB / x["seconds"] for d, x in (("read", r), ("write", w))}
    assert r["bytes"] > 0 and w["bytes"] > 0  # fio did both
    assert m.value == pytest.approx((rate["read"] * 70 + rate["write"] * 30) / 100)
    assert m.bytes == r["bytes"] + w["bytes"] and m.ops == r["ios"] + w["ios"]
    mix = m.extra["mix"]
    assert mix["read_pct"] == 70
    assert mix["read"]["mib_s"] == pytest.approx(rate["read"])
    assert mix["write"]["lat_us"]["p99"] >= mix["write"]["lat_us"]["p50"] > 0
    # About 70 % of fio's I/Os were reads, as asked.
    assert 0.6 < r["ios"] / (r["ios"] + w["ios"]) < 0.8
    assert json.loads(stdout)["jobs"][0]["job options"]["rwmixread"] == "70"


def test_a_mix_pass_is_direct_when_each_direction_reaches_the_device() -> None:
    """A mixed pass moves reads and writes: O_DIRECT is proven per direction (the device read
    the reads and wrote the writes), not by one direction against both."""
    from fsbench.probes.sample import ProbeDelta
    from fsbench.records.schema import Device
    from fsbench.schedule.merge import verify_cache
    from fsbench.workloads.base import Measurement

    mix = {"read": {"bytes": 7 * MiB}, "write": {"bytes": 3 * MiB}}
    m = Measurement(value=1.0, seconds=1.0, bytes=10 * MiB, extra={"mix": mix})

    def seen(read: int, written: int) -> tuple[str, list[str]]:
        d = ProbeDelta(device=Device(read_bytes=read, write_bytes=written))
        return verify_cache("direct", m, d, True, device_growth=0)

    assert seen(7 * MiB, 3 * MiB) == ("direct", [])
    state, why = seen(7 * MiB, MiB)  # the writes did not reach the device
    assert state == "direct-not-honored" and f"wrote {MiB} B of {3 * MiB} B" in why[0]
    assert seen(MiB, 3 * MiB)[0] == "direct-not-honored"  # the reads were served from a cache


def test_the_dry_run_says_the_choices(tmp_path: Path) -> None:
    from fsbench.schedule.dryrun import describe, lines

    plan = _plan(tmp_path, suite="diskmark-mix", diskmark_size="64M", diskmark_runtime="10")
    desc = describe(plan)
    assert {(w["file_size"], w["runtime_s"]) for w in desc["workloads"]} == {(64 * MiB, 10)}
    assert "  KDiskMark tests: test file 64 MiB, passes of at most 10 s" in lines(desc)
