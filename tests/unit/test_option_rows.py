"""Issue #45's table, row by row: each input either runs as asked under a true label or is
refused with one line and exit 2, nothing made. Measuring is replaced by a recorder, so a row
that runs shows the plan it would have measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Sandbox  # tests/unit/conftest.py


DIR = ["compare", "--backing", "dir:target"]
REFUSED = [
    # the row, then the words its one line must hold
    ([*DIR, "--suite", "diskmark:psync"], "psync is synchronous (depth 1)"),
    ([*DIR, "--suite", "diskmark", "--numjobs", "1,4"], "run one job each (T1), not 4"),
    ([*DIR, "--workloads", "diskmark", "--numjobs", "4"], "run one job each (T1), not 4"),
    ([*DIR, "--suite", "diskmark:j4"], "run one job each (T1), not 4"),
    ([*DIR, "--suite", "diskmark", "--placement", "free,same"], "give one placement"),
    (
        [*DIR, "--workloads", "rand-read/4k-direct:j4", "--numjobs", "1,2"],
        "':j4' and --numjobs both set the job count",
    ),
    ([*DIR, "--command", "true", "--command", "false"], "--command given 2 times"),
    ([*DIR, "--workloads", "seq-write", "--workloads", "seq-read"], "--workloads given 2 times"),
    (["show", "x", "--db", "a.db", "--db", "b.db"], "--db given 2 times"),
    (["export", "x", "--format", "csv", "--format", "json"], "--format given 2 times"),
    ([*DIR, "--repeat", "5", "--time-budget", "60"], "--time-budget needs --repeat auto"),
    ([*DIR, "--repeat", "3", "--max-repeat", "3"], "--max-repeat needs --repeat auto"),
    (
        [*DIR, "--numjobs", "4", "--workloads", "tree-hash,metadata"],
        "tree-hash/cold, tree-hash/warm, metadata/create-flat and more take no job count",
    ),
    ([*DIR, "--numjobs", "2", "--workloads", "fio:job.fio"], "take no job count"),
    ([*DIR, "--warmup", "0", "--trace-probes", "fuse"], "--trace-probes needs a traced warm-up"),
    ([*DIR, "--no-trace", "--trace-probes", "fuse"], "--trace-probes and --no-trace cannot go"),
    ([*DIR, "--age", "light"], "--age does not apply to --backing dir:PATH"),
    ([*DIR, "--kernel", "debian-6.12"], "--kernel does not apply to --backing dir:PATH"),
    ([*DIR, "--no-integrity"], "--no-integrity does not apply to --backing dir:PATH"),
    ([*DIR, "--size", "2G"], "--size does not apply to --backing dir:PATH"),
    (["compare", "ext4", "--age-seed", "7"], "--age-seed needs --age"),
    (["compare", "ext4", "--vm-cpus", "2"], "--vm-cpus needs --kernel NAME or a subject@KERNEL"),
    ([*DIR, "--timeout", "5"], "--timeout needs --command or a fio:JOBFILE workload"),
    (
        [*DIR, "--workloads", "rand-read:qd32:qd16"],
        "'qd16' sets the queue depth again (qd32 before it)",
    ),
    ([*DIR, "--workloads", "rand-read:j2:t4"], "'t4' sets the job count again (j2 before it)"),
]


@pytest.mark.parametrize(("argv", "says"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_row_is_refused_with_one_line(sandbox: Sandbox, argv: list[str], says: str) -> None:
    before = sandbox.files()
    code, out, err = sandbox.fsbench(argv)
    assert code == 2, (argv, err)
    assert err.count("\n") == 1 and err.startswith("fsbench: "), err
    assert says in err, err
    assert out == "" and sandbox.files() == before and sandbox.plans == []


def test_what_runs_runs_under_a_true_label(sandbox: Sandbox) -> None:
    """The forms next to the refused ones run, labelled with what they run."""
    code, _out, err = sandbox.fsbench([*DIR, "--workloads", "rand-read/4k-direct:j4"])
    assert code == 0, err
    # free: a placement asked for besides the default (same), so a result of its own.
    code, _out, err = sandbox.fsbench([*DIR, "--suite", "diskmark:io_uring", "--placement", "free"])
    assert code == 0, err
    code, _out, err = sandbox.fsbench([*DIR, "--workloads", "rand-read/4k-direct:qd32:psync"])
    assert code == 2 and "psync is synchronous" in err
    j4, dm = sandbox.plans
    assert [str(w.id) for w in j4.workloads] == ["rand-read/4k-direct-j4"]
    assert {w.numjobs for w in j4.workloads} == {4}
    qd = {str(w.inner.id): w.inner.iodepth for w in dm.workloads}
    assert qd["diskmark/rnd4k-q32t1-read-io_uring"] == 32
    assert {w.inner.ioengine for w in dm.workloads} == {"io_uring"}
    assert {w.placement for w in dm.workloads} == {"free"}


def test_the_vm_stage_passes_every_option_the_guest_can_honour(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compare ntfs3 ntfs-3g --kernel debian-6.12 --command make --input ./proj ...`: the
    guest's command line carries the command, its input (absolute: the guest's working
    directory is not the user's), its timeout and user, and --no-integrity."""
    from fsbench.vm import VMPlan

    seen: dict[str, Any] = {}

    def fake_plan(subjects: list[str], kernel: str | None) -> VMPlan:
        return VMPlan(host=[])

    def fake_stage(_p: VMPlan, settings: Any) -> Any:
        seen["args"] = settings.args
        return lambda *_a: None

    monkeypatch.setattr("fsbench.cli.vm_options.plan", fake_plan)
    monkeypatch.setattr("fsbench.cli.vm_options.stage", fake_stage)
    argv = ["compare", "ntfs3", "ntfs-3g", "--kernel", "debian-6.12", "--command", "make"]
    argv += ["--input", "proj", "--timeout", "30", "--as-user", "nobody", "--no-integrity"]
    argv += ["--prepare", "make clean", "--numjobs", "1", "--warmup", "2"]
    code, _out, err = sandbox.fsbench(argv)
    assert code == 0, err
    args = seen["args"]
    pairs = dict(zip(args, [*args[1:], ""], strict=True))
    assert pairs["--command"] == "make" and pairs["--prepare"] == "make clean"
    assert pairs["--input"] == str(sandbox.path / "proj")
    assert (pairs["--timeout"], pairs["--as-user"], pairs["--warmup"]) == ("30", "nobody", "2")
    assert "--no-integrity" in args
    assert "--kernel" not in args and "--out" not in args  # the host's business


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--age", "light"], "--age does not apply inside a VM"),
        (["--read-only"], "--read-only does not apply inside a VM"),
        (["--backing", "file:."], "use --backing ram"),
    ],
)
def test_the_vm_stage_refuses_what_the_guest_cannot_honour(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, extra: list[str], says: str
) -> None:
    from fsbench.vm import VMPlan

    monkeypatch.setattr("fsbench.cli.vm_options.plan", lambda *_a: VMPlan(host=[]))
    code, _out, err = sandbox.fsbench(["compare", "ntfs3", "--kernel", "debian-6.12", *extra])
    assert code == 2 and says in err and err.count("\n") == 1, err


WHY = "file is not a database"  # SQLite's words


def test_show_refuses_a_file_that_is_not_a_results_database(sandbox: Sandbox) -> None:
    not_db = sandbox.path / "results.json"
    not_db.write_text('{"schema_version": 1}\n')
    for argv in (["show", "--db", str(not_db), "--list"], ["show", "x", "--db", str(not_db)]):
        code, out, err = sandbox.fsbench(argv)
        assert code == 2 and out == "", err
        assert (
            err
            == f"fsbench: --db {not_db}: not an fsbench results database (file is not a database)\n"
        )
    assert not_db.read_text() == '{"schema_version": 1}\n'  # looked at, not changed


def test_hash_json_prints_only_json_on_stdout(sandbox: Sandbox) -> None:
    """`fsbench hash DIR --json | jq`: stdout is one JSON document, the manifest's lines in it
    (checkable by xxhsum -c once written out)."""
    import json

    tree = sandbox.path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a").write_bytes(b"alpha")
    (tree / "sub" / "b").write_bytes(b"beta" * 1000)
    code, out, err = sandbox.fsbench(["hash", str(tree), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["files"] == 2 and doc["manifest"] is None
    names = sorted(line.split("  ", 1)[1] for line in doc["lines"])
    assert names == [str(tree / "a"), str(tree / "sub" / "b")]
    assert all(len(line.split("  ", 1)[0]) == 32 for line in doc["lines"])  # XXH128 hex
    manifest = sandbox.path / "m.xxh128"
    manifest.write_text("".join(f"{line}\n" for line in doc["lines"]))
    code, out, err = sandbox.fsbench(["verify", str(manifest)])
    assert code == 0, out + err


NTFS_HINT = (
    "; a VM of a kernel that has it (ntfs@debian-sid): fsbench compare ntfs ntfs-3g "
    "--kernel debian-sid"
)


def _skip_if_the_kernel_has_ntfs() -> None:
    from fsbench.lab.drivers import DRIVERS, availability

    if availability(DRIVERS["ntfs"]).available:
        pytest.skip("not applicable here: this kernel has the ntfs driver")


def test_a_kernel_driver_this_host_lacks_names_the_kernel_that_has_it() -> None:
    """`compare ntfs ntfs-3g` on a host whose kernel has no ntfs (6.x): the hint names
    debian-sid and the command, not only "use a kernel built with it"."""
    from fsbench.lab.subject import parse_subject
    from fsbench.schedule.plan import vm_hint

    _skip_if_the_kernel_has_ntfs()
    assert vm_hint([parse_subject("ntfs"), parse_subject("ntfs-3g")]) == NTFS_HINT


# The lab checks for root before drivers: as another user the exit is about root, not ntfs.
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the lab checks for root first")
def test_compare_with_a_kernel_driver_this_host_lacks_exits_3_with_the_hint(
    tmp_path: Path,
) -> None:
    """The same, as the user meets it: exit 3 and one line ending with the hint."""
    _skip_if_the_kernel_has_ntfs()
    res = subprocess.run(
        [sys.executable, "-m", "fsbench", "compare", "ntfs", "ntfs-3g", "--out", "out",
         "--db", "r.db"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},
    )  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.rstrip().endswith(NTFS_HINT), res.stderr
