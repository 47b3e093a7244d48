"""copy-large, copy-small, compile and web-serve on a temporary directory with tiny sizes: the
bytes arrive intact, the built program runs, nginx serves the right byte count, and failures are
one-line WorkloadFailed with nothing left running or lying around.

Nothing here needs root: nginx runs unprivileged on a high port (without `user root;`).
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.registry import WORKLOADS, resolve_workloads
from fsbench.services import nginx as nginx_service
from fsbench.services.nginx import NginxServer, nginx_error
from fsbench.services.wrk import wrk_script
from fsbench.workloads import copy as copymod
from fsbench.workloads import webserve
from fsbench.workloads.base import Target
from fsbench.workloads.compile import Compile, generate_project
from fsbench.workloads.copy import CopyLarge, CopySmall
from fsbench.workloads.scratch import reap_stale_areas
from fsbench.workloads.webserve import WebServe

KiB = 1024
MiB = 1024 * KiB


def _target(tmp_path: Path, size: int = 16 * MiB, sid: str = "t") -> Target:
    work = tmp_path / f"work-{sid}"
    work.mkdir(exist_ok=True)
    return Target(sid, str(work), "directory", size)


def _same(a: str | Path, b: str | Path) -> bool:
    return Path(a).read_bytes() == Path(b).read_bytes()


def _pids_mentioning(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains text, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(int(entry.name))
    return found


# -- registry --------------------------------------------------------------------------------
def test_all_variants_are_registered_and_resolvable() -> None:
    ids = [
        "copy-large/in",
        "copy-large/out",
        "copy-small/in",
        "copy-small/out",
        "compile/configure",
        "compile/make",
        "compile/install",
        "web-serve/4k-warm",
        "web-serve/64m-cold",
    ]
    for wid in ids:
        assert wid in WORKLOADS
    assert len(resolve_workloads("web-serve", None)) == 7
    assert [w.id for w in resolve_workloads("copy-small", None)] == [  # type: ignore[attr-defined]
        "copy-small/in",
        "copy-small/out",
    ]
    for wid in ids:
        wl = WORKLOADS[wid]
        assert wl.description and wl.cache in ("none", "cold", "warm")


# -- copy ------------------------------------------------------------------------------------
def test_copy_large_in_then_out_copies_the_bytes(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    t = _target(tmp_path)
    size = 3 * MiB + 12345  # not a multiple of any buffer
    cin = CopyLarge("in", source_root=str(shm), file_bytes=size)
    cout = CopyLarge("out", source_root=str(shm), file_bytes=size)
    cin.prepare(t)
    m = cin.run(t)
    area = shm / f"fsbench-src-{os.getpid()}"
    src = area / f"copy-large-{size}.bin"
    dest = Path(t.workdir) / "copy-large" / "large.bin"
    assert _same(src, dest)
    assert m.bytes == size and m.ops == 1 and m.value > 0
    assert m.extra["copy_method"] in copymod.METHODS
    cout.prepare(t)
    m2 = cout.run(t)
    assert _same(src, area / "copy-large-out.bin")
    assert m2.bytes == size
    # The out copy is garbage for the next prepare; close() removes the whole area.
    cout.prepare(t)
    assert not (area / "copy-large-out.bin").exists()
    cin.close()
    cout.close()
    assert not area.exists()


def test_copy_params_are_the_same_for_every_subject_and_state_the_method(tmp_path: Path) -> None:
    a, b = _target(tmp_path, sid="a"), _target(tmp_path, sid="b")
    for wl in (CopyLarge("in"), CopyLarge("out"), CopySmall("in"), CopySmall("out")):
        assert wl.params(a) == wl.params(b)
        p = wl.params(a)
        assert p["copy_method"] == "copy_file_range" and "sendfile" in p["copy_fallback"]
        assert ("fsync" in p) and (p["cache"] == ("cold" if wl.variant == "out" else "none"))
    big = Target("x", str(tmp_path), "directory", 1000 * MiB)
    assert CopyLarge("in").size(big) == 400 * MiB  # 40 %, MiB-aligned
    assert CopySmall("in").count(big) == 250  # 25 % in 1 MiB files
    assert CopySmall("in").count(_target(tmp_path, 8 * MiB)) == 20  # at least 20
    big.scale = 2.0
    assert CopySmall("in").count(big) == 500


def test_copy_small_tree_round_trip(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    t = _target(tmp_path)
    kw = {"source_root": str(shm), "files": 7, "file_bytes": 64 * KiB}
    cin, cout = CopySmall("in", **kw), CopySmall("out", **kw)
    cin.prepare(t)
    m = cin.run(t)
    assert m.ops == 7 and m.bytes == 7 * 64 * KiB and m.extra["files_per_s"] > 0
    area = shm / f"fsbench-src-{os.getpid()}"
    src = area / f"copy-small-7x{64 * KiB}"
    dest = Path(t.workdir) / "copy-small" / "tree"
    src_files = sorted(p.relative_to(src) for p in src.rglob("*.bin"))
    assert src_files == sorted(p.relative_to(dest) for p in dest.rglob("*.bin"))
    assert all(_same(src / rel, dest / rel) for rel in src_files)
    cout.prepare(t)
    m2 = cout.run(t)
    out = area / "copy-small-out"
    assert m2.ops == 7
    assert all(_same(src / rel, out / rel) for rel in src_files)
    # out's prepare rebuilds a missing or damaged tree on the target, untimed.
    (dest / src_files[0]).write_bytes(b"short")
    cout.prepare(t)
    assert _same(src / src_files[0], dest / src_files[0])
    cin.close()
    cout.close()
    assert not area.exists()


def test_fallback_chain_and_a_subject_that_needs_another_method_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    wl = CopyLarge("in", source_root=str(shm), file_bytes=2 * MiB + 1)
    t1, t2 = _target(tmp_path, sid="a"), _target(tmp_path, sid="b")

    def exdev(*_a: object) -> int:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(copymod.os, "copy_file_range", exdev)
    wl.prepare(t1)
    m1 = wl.run(t1)
    assert m1.extra["copy_method"] == "sendfile"
    assert "EXDEV" in m1.extra["copy_method_note"] and m1.flags == []
    assert wl.pinned_method == "sendfile"

    def einval(*_a: object) -> int:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(copymod.os, "sendfile", einval)
    wl.prepare(t2)
    m2 = wl.run(t2)
    assert m2.extra["copy_method"] == "read/write"
    assert m2.flags
    assert m2.flags[0].startswith("copy-method-differs: read/write instead of sendfile")
    src = shm / f"fsbench-src-{os.getpid()}" / f"copy-large-{2 * MiB + 1}.bin"
    assert _same(src, Path(t2.workdir) / "copy-large" / "large.bin")
    wl.close()


def test_no_space_is_one_line_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    wl = CopySmall("in", source_root=str(shm), files=3, file_bytes=64 * KiB)
    t = _target(tmp_path)
    wl.prepare(t)

    def enospc(*_a: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(copymod.os, "copy_file_range", enospc)
    with pytest.raises(WorkloadFailed) as ei:
        wl.run(t)
    assert "No space left on device" in str(ei.value) and "\n" not in str(ei.value)
    assert not (Path(t.workdir) / "copy-small" / "tree").exists()
    wl.close()


def test_stale_areas_of_dead_processes_are_reaped(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"fsbench-src-{dead.pid}" / "x").mkdir(parents=True)
    (tmp_path / f"fsbench-src-{os.getppid()}").mkdir()  # alive: kept
    (tmp_path / "unrelated").mkdir()
    assert reap_stale_areas(str(tmp_path)) == [f"fsbench-src-{dead.pid}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"fsbench-src-{os.getppid()}",
        "unrelated",
    ]


def test_the_tmpfs_area_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    code = (
        "from fsbench.workloads.base import Target\n"
        "from fsbench.workloads.copy import CopyLarge\n"
        f"t = Target('t', {str(tmp_path / 'w')!r}, 'directory', 8 << 20)\n"
        f"wl = CopyLarge('in', source_root={str(tmp_path)!r}, file_bytes=1 << 20)\n"
        "wl.prepare(t); wl.run(t)\n"
        "import os; print(os.getpid())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())
    assert (tmp_path / "w" / "copy-large" / "large.bin").stat().st_size == MiB
    assert not (tmp_path / f"fsbench-src-{pid}").exists()


# -- compile ---------------------------------------------------------------------------------
need_cc = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("make") is None, reason="no cc or make"
)


def test_generated_project_is_deterministic() -> None:
    a, b = generate_project(3, 2), generate_project(3, 2)
    assert a.files == b.files and a.digest == b.digest and a.expected_output == b.expected_output
    assert generate_project(4, 2).digest != a.digest
    full = generate_project()
    assert len(full.files) >= 200  # a few hundred files at --scale 1
    assert {"Makefile", "configure", "src/main.c", "include/common.h"} <= set(full.files)


@need_cc
def test_compile_phases_build_a_program_that_runs_and_installs(tmp_path: Path) -> None:
    t = _target(tmp_path)
    phases = {v: Compile(v, modules=3, per_module=2, jobs=2) for v in ("configure", "make")}
    phases["install"] = Compile("install", modules=3, per_module=2)
    expected = generate_project(3, 2).expected_output
    proj = Path(t.workdir) / "compile" / "project"
    # install first: its prepare runs configure and make untimed.
    phases["install"].prepare(t)
    m = phases["install"].run(t)
    assert m.value == m.seconds > 0 and m.app_user_s + m.app_sys_s > 0
    installed = Path(t.workdir) / "compile" / "stage" / "usr" / "local"
    out = subprocess.run([installed / "bin" / "gen-app"], capture_output=True, text=True)
    assert out.stdout == expected
    assert (installed / "lib" / "libgen.a").exists()
    assert len(list((installed / "include" / "gen").glob("*.h"))) == 4
    # One install operation is one file installed: the count is what the stage holds.
    assert m.ops == sum(1 for f in installed.rglob("*") if f.is_file())
    # make's prepare cleans, so the sample builds everything again.
    phases["make"].prepare(t)
    assert not (proj / "build").exists()
    m = phases["make"].run(t)
    assert m.ops == 7 and m.extra["jobs"] == 2
    out = subprocess.run([proj / "build" / "app"], capture_output=True, text=True)
    assert out.stdout == expected
    phases["configure"].prepare(t)
    assert not (proj / "config.h").exists()
    m = phases["configure"].run(t)
    config = (proj / "config.h").read_text()
    assert "#define HAVE_STDIO_H 1" in config and "#define SIZEOF_INT 4" in config
    assert not list(proj.glob("conftest*"))
    assert m.ops == generate_project(3, 2).probes


def test_compiler_missing_is_the_one_liner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(WorkloadFailed, match=r"^cc not found; apt-get install build-essential$"):
        Compile("make", modules=2, per_module=1).prepare(_target(tmp_path))


@need_cc
def test_a_compile_error_fails_with_the_compilers_line(tmp_path: Path) -> None:
    t = _target(tmp_path)
    wl = Compile("make", modules=2, per_module=1, jobs=1)
    wl.prepare(t)
    (Path(t.workdir) / "compile" / "project" / "src" / "m00" / "f0.c").write_text("this is not C\n")
    with pytest.raises(WorkloadFailed) as ei:
        wl.run(t)
    msg = str(ei.value)
    assert msg.startswith("make: ") and "error" in msg and "\n" not in msg


# -- web-serve -------------------------------------------------------------------------------
need_web = pytest.mark.skipif(
    shutil.which("wrk") is None
    or (shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx")),
    reason="nginx or wrk not installed (apt-get install nginx-light wrk)",
)


@pytest.fixture
def no_leftover_nginx(tmp_path: Path):
    """The tests' nginx instances live under tmp_path: none may survive a test."""
    yield tmp_path
    left = _pids_mentioning(str(tmp_path))
    assert left == [], f"nginx left running: {left}"
    assert not list(tmp_path.glob("ngx/fsbench-nginx-*")), "nginx's private directory remains"


@need_web
def test_web_serve_warm_counts_payload_bytes(tmp_path: Path, no_leftover_nginx: Path) -> None:
    (tmp_path / "ngx").mkdir()
    t = _target(tmp_path)
    wl = WebServe("4k", 4 * KiB, "warm", duration_s=1, tmp_root=str(tmp_path / "ngx"))
    wl.prepare(t)
    m = wl.run(t)
    assert m.ops > 0 and m.bytes == m.ops * 4 * KiB
    assert m.extra["wire_bytes"] > m.bytes  # headers come on top
    assert m.value == pytest.approx(m.bytes / MiB / m.seconds) and m.extra["requests_per_s"] > 0
    assert m.app_user_s + m.app_sys_s > 0


def test_web_serve_warm_seconds_follow_scale(tmp_path: Path) -> None:
    """--scale is a warm sample's amount of work too: wrk's whole seconds, at least one."""
    wl = WebServe("4k", 4 * KiB, "warm")
    t = _target(tmp_path)
    got = {}
    for scale in (0.1, 0.5, 1.0, 3.0):
        t.scale = scale
        got[scale] = wl.params(t)["duration_s"]
    assert got == {0.1: 1, 0.5: 1, 1.0: 2, 3.0: 6}


@need_web
def test_web_serve_cold_fetches_every_file_once(tmp_path: Path, no_leftover_nginx: Path) -> None:
    (tmp_path / "ngx").mkdir()
    t = _target(tmp_path)
    wl = WebServe("64k", 64 * KiB, "cold", cold_files=5, tmp_root=str(tmp_path / "ngx"))
    wl.prepare(t)
    m = wl.run(t)
    assert m.ops == 5 and m.bytes == 5 * 64 * KiB
    assert m.extra["wire_bytes"] >= m.bytes
    assert m.seconds < 5  # wrk was woken, not left sleeping for all of -d


@need_web
def test_nginx_serves_the_files_bytes(tmp_path: Path, no_leftover_nginx: Path) -> None:
    (tmp_path / "ngx").mkdir()
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(300 * KiB + 7)
    (root / "f.bin").write_bytes(data)
    with NginxServer(str(root), tmp_root=str(tmp_path / "ngx")) as srv:
        with urllib.request.urlopen(srv.url("/f.bin"), timeout=10) as resp:
            assert resp.read() == data
        assert _pids_mentioning(srv.conf)
    assert not os.path.exists(srv.dir)


@need_web
def test_occupied_port_fails_with_nginxs_line_and_leaves_nothing(
    tmp_path: Path, no_leftover_nginx: Path
) -> None:
    (tmp_path / "ngx").mkdir()
    t = _target(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ngx = str(tmp_path / "ngx")
        wl = WebServe("4k", 4 * KiB, "warm", duration_s=1, port=port, tmp_root=ngx)
        wl.prepare(t)
        with pytest.raises(WorkloadFailed) as ei:
            wl.run(t)
    msg = str(ei.value)
    assert msg.startswith("nginx did not start: bind() to 127.0.0.1:") and "in use" in msg
    assert "\n" not in msg


@need_web
def test_bad_port_fails_with_nginxs_line(tmp_path: Path, no_leftover_nginx: Path) -> None:
    (tmp_path / "ngx").mkdir()
    with pytest.raises(WorkloadFailed, match=r"nginx did not start: .*invalid port"):
        NginxServer(str(tmp_path), port=70000, tmp_root=str(tmp_path / "ngx")).start()


@need_web
def test_nginx_is_stopped_when_the_client_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leftover_nginx: Path
) -> None:
    (tmp_path / "ngx").mkdir()
    t = _target(tmp_path)
    wl = WebServe("4k", 4 * KiB, "warm", duration_s=1, tmp_root=str(tmp_path / "ngx"))
    wl.prepare(t)

    def boom(*_a: object, **_k: object) -> str:
        raise KeyboardInterrupt  # as a Ctrl-C in the middle of a sample

    monkeypatch.setattr(webserve, "run_wrk", boom)
    with pytest.raises(KeyboardInterrupt):
        wl.run(t)
    assert not nginx_service._LIVE


def test_large_variants_need_a_big_enough_image(tmp_path: Path) -> None:
    small = _target(tmp_path, 102 * MiB)  # a 256 MiB image
    for wl in (WebServe("64m", 64 * MiB, "warm"), WebServe("64m", 64 * MiB, "cold")):
        assert wl.files(small) == 0
        with pytest.raises(Unsupported, match="image too small for 64 MiB files"):
            wl.prepare(small)
    assert WebServe("16m", 16 * MiB, "warm").files(small) == 1
    assert WebServe("1m", MiB, "cold").files(small) == 35
    big = Target("b", str(tmp_path), "directory", 1600 * MiB)
    assert WebServe("64m", 64 * MiB, "cold").files(big) == 4  # 256 MiB at --scale 1


def test_missing_client_is_the_one_liner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nginx_service.shutil, "which", lambda name, path=None: None)
    with pytest.raises(WorkloadFailed, match=r"^nginx not found; apt-get install nginx-light$"):
        WebServe("4k", 4 * KiB, "warm").prepare(_target(tmp_path))


def test_nginx_error_line_and_wrk_script() -> None:
    log = (
        "2026/01/01 00:00:00 [warn] 12#12: something harmless\n"
        "2026/01/01 00:00:00 [emerg] 12#12: bind() to 127.0.0.1:8080 failed (98: Address "
        "already in use)\n"
    )
    assert nginx_error(log) == "bind() to 127.0.0.1:8080 failed (98: Address already in use)"
    assert nginx_error("", "plain words\n") == "plain words"
    lua = wrk_script(["/a/f0000.bin", "/a/f0001.bin"])
    assert '"/a/f0000.bin", "/a/f0001.bin"' in lua and "FSBENCH-STOP" in lua
    assert "FSBENCH-DONE" in wrk_script(None) and "request =" not in wrk_script(None)


def test_a_run_timed_at_zero_seconds_fails_instead_of_reading_as_zero() -> None:
    from fsbench.errors import WorkloadFailed
    from fsbench.workloads.base import per_second

    assert per_second(512.0, 2.0, "the copy") == 256.0
    with pytest.raises(WorkloadFailed, match=r"the copy timed at 0\.0 s: no rate to report"):
        per_second(512.0, 0.0, "the copy")
