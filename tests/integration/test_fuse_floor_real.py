"""The FUSE floor for real: libfuse 3.18's passthrough_hp (fsbench's own build) over each
transport in one `fsbench compare` on a small image. Each result records its transport; the
io_uring daemon really holds rings (checked at every mount); passthrough's reads and writes
never reach the daemon, so the FUSE tracepoints see none; enable_uring is back to what it was;
the transports' explanations name the floor's cost from the same run. fuse2fs built against
libfuse 3.18 (a real file system) runs over io_uring in the same run. libfuse's USDT probe
(request_process) splits the requests of the daemons over /dev/fuse and sees none over io_uring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import fsbench, need_drivers, release_leftovers

from fsbench.fuse import transports
from fsbench.probes import trace as ktrace

pytestmark = pytest.mark.root
SUBJECTS = ("passthrough_hp", "passthrough_hp:uring", "passthrough_hp:passthrough")
FUSE2FS = "fuse2fs-3.18:uring"


def test_three_transports_in_one_run(tmp_path: Path, state_dir: Path) -> None:
    need_drivers("passthrough_hp", "fuse2fs-3.18")
    for name in ("uring", "passthrough"):
        st = transports.kernel_status(name)
        if not st.available:
            pytest.skip(f"not applicable here: transport {name} unavailable ({st.reason})")
    probes = ktrace.availability(wanted=("fuse", "sched"))
    if any(probes.get(n) != "ok" for n in ("fuse", "sched")):
        pytest.skip(f"trace probes unavailable here: {probes}")
    before = transports.uring_enabled()
    out = tmp_path / "out"
    try:
        res = fsbench(
            "compare", *SUBJECTS, FUSE2FS, "--size", "64M", "--scale", "0.3",
            "--workloads", "seq-write/fsync,seq-read/cold", "--repeat", "1", "--warmup", "1",
            "--min-sample-time", "0.01", "--trace-probes", "fuse,sched,libfuse", "--no-integrity",
            "--out", str(out), "--db", str(tmp_path / "results.db"), "--json",
        )  # fmt: skip
    finally:
        release_leftovers(state_dir)
    assert res.returncode == 0, res.stderr
    assert transports.uring_enabled() == before  # held for the run only
    doc = json.loads((out / "results.json").read_text())
    subjects = {s["id"]: s for s in doc["subjects"]}
    assert {i: subjects[i]["transport"] for i in SUBJECTS} == {
        "passthrough_hp": "dev-fuse",
        "passthrough_hp:uring": "uring",
        "passthrough_hp:passthrough": "passthrough",
    }
    assert all("libfuse 3.18" in subjects[i]["driver_version"] for i in (*SUBJECTS, FUSE2FS))
    assert subjects[FUSE2FS]["transport"] == "uring"  # and its daemon held rings at each mount
    if before is False:
        assert any("enable_uring N -> Y" in n for n in doc["environment"]["notes"])
    # The daemons fsbench built carry libfuse's USDT notes: the probe attached to them.
    assert doc["environment"]["trace_probes"]["libfuse"] == "ok"
    fuse, split = {}, {}
    for r in doc["results"]:
        assert r["status"] == "ok", (r["subject"], r.get("error"))
        fuse[r["subject"], r["params"]["rw"]] = r["trace"]["fuse"]["requests"]
        split[r["subject"]] = split.get(r["subject"], 0) + sum(
            r["trace"]["libfuse"]["requests"].values()
        )
        if r["subject"] == "passthrough_hp":  # the daemon's own threads are found and counted
            assert r["trace"]["sched"]["wakeups"]["driver"] > 0
    # The tracepoints fire over /dev/fuse and over io_uring alike...
    for sid in (*SUBJECTS[:2], FUSE2FS):
        assert fuse[sid, "write"].get("WRITE", 0) > 0 and fuse[sid, "read"].get("READ", 0) > 0
    # ... and with passthrough the data never reaches the daemon: no READ or WRITE requests,
    # while the file's open still is one.
    assert "WRITE" not in fuse[SUBJECTS[2], "write"] and "READ" not in fuse[SUBJECTS[2], "read"]
    assert fuse[SUBJECTS[2], "read"].get("OPEN", 0) > 0
    # Every 8th request is split where the daemon reads /dev/fuse (passthrough's opens too);
    # libfuse 3.18's io_uring path fires no request_process.
    assert split["passthrough_hp"] > 0 and split["passthrough_hp:passthrough"] > 0, split
    assert split["passthrough_hp:uring"] == 0 and split[FUSE2FS] == 0, split
    explanations = json.loads(res.stdout)["explanations"]  # --json: the run and its explanations
    # The floor's explanation says how much of a request its daemon worked.
    assert any(f["name"] == "daemon split" for e in explanations
               if e["subject"] == "passthrough_hp" for f in e["factors"])  # fmt: skip
    # Over io_uring a READ reply's traced length is not its payload: no size is claimed.
    uring_says = [f["sentence"] for e in explanations if e["subject"].endswith(":uring")
                  for f in e["factors"] if "FUSE READ" in f["sentence"]]  # fmt: skip
    assert not any("64 B" in s for s in uring_says), uring_says
    floors = {
        (e["subject"], e["title"]): f["sentence"]
        for e in explanations
        for f in e["factors"]
        if f["name"] == "fuse floor"
    }
    assert {s for s, _ in floors} >= set(SUBJECTS[1:]), floors
    assert "passthrough_hp" not in {s for s, _ in floors}  # the floor itself
    assert any("never reach the daemon" in s for s in floors.values())
