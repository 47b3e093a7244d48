"""Several fio clients against one shared directory, through fio's client/server mode.

Every address lives inside network namespaces the fixture creates, both ends: each client in
a namespace of its own (fsbench-t-TAG-N) running `fio --server`, and fsbench itself in a hub
namespace (fsbench-t-TAG-hub) joined to each client by a veth pair created inside the two
namespaces (10.213.X.Y/30). The root namespace holds no address and no route of the test, and
the hub has no interface but its veths and lo: a packet for a client can go nowhere else. Before
anything is sent, `ip route get ADDR` in the hub must name that client's own veth, or the set-up
refuses (a sabotaged set-up, below, proves it). All clients share one directory under /dev/shm
the test owns. The finalizer removes servers and namespaces (with their veths) even when a test
fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, fsbench_argv, wait_until

PORT = 8765


@dataclass
class NsClient:
    ns: str
    addr: str
    server: subprocess.Popen

    @property
    def spec(self) -> str:
        return f"{self.addr}:{PORT}"

    def server_children(self) -> list[int]:
        """The server's per-connection processes (a job runs in one)."""
        kids = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    stat = (p / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.server.pid:
                    kids.append(int(p.name))
        return kids

    def kill(self) -> None:
        os.killpg(self.server.pid, signal.SIGKILL)


class RouteRefused(AssertionError):
    """A client address the hub would not reach over the veth the test made for it."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _free_octet() -> int:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for _ in range(50):
        x = 100 + secrets.randbelow(150)
        if f"10.213.{x}." not in used:
            return x
    pytest.skip("not applicable here: no free 10.213.X.0/24 for the namespace clients")


def check_route(hub: str, addr: str, link: str) -> None:
    """Refuse unless the hub reaches `addr` directly over `link`, the veth made for it."""
    got = subprocess.run(
        ["ip", "-n", hub, "-o", "route", "get", addr], capture_output=True, text=True, timeout=20
    )
    words = got.stdout.split()
    dev = words[words.index("dev") + 1] if "dev" in words[:-1] else None
    if got.returncode != 0 or "via" in words or dev != link:
        raise RouteRefused(f"refusing to send to {addr}: {(got.stdout + got.stderr).strip()!r}")


def hub_links(hub: str) -> list[str]:
    """The interfaces inside the hub namespace."""
    out = subprocess.run(["ip", "-n", hub, "-o", "link"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]


@contextlib.contextmanager
def namespaces(n: int, sabotage: Callable[[str, str], None] | None = None) -> Iterator[dict]:
    """A hub namespace and `n` client namespaces, each joined to the hub by a veth pair created
    inside them (never in the root namespace), with routes checked. `sabotage(hub, link)` runs
    mid-set-up, after a pair is made and before it is addressed. Yields {hub, clients: [(ns,
    addr)], links}; everything is deleted on the way out."""
    tag = secrets.token_hex(2)
    hub = f"fsbench-t-{tag}-hub"
    made: list[str] = []
    try:
        _ip("netns", "add", hub)
        made.append(hub)
        _ip("-n", hub, "link", "set", "lo", "up")
        x = _free_octet()
        clients, links = [], []
        for i in range(n):
            ns, hub_if, ns_if = f"fsbench-t-{tag}-{i}", f"fbt{i}h", f"fbt{i}n"
            hub_addr, addr = f"10.213.{x}.{4 * i + 1}", f"10.213.{x}.{4 * i + 2}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", hub, "link", "add", hub_if, "type", "veth", "peer", "name", ns_if,
                "netns", ns)  # fmt: skip
            if sabotage is not None:
                sabotage(hub, hub_if)
            with contextlib.suppress(subprocess.CalledProcessError):  # the check below says
                _ip("-n", hub, "addr", "add", f"{hub_addr}/30", "dev", hub_if)
                _ip("-n", hub, "link", "set", hub_if, "up")
                _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", ns_if)
                _ip("-n", ns, "link", "set", ns_if, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            check_route(hub, addr, hub_if)
            clients.append((ns, addr))
            links.append(hub_if)
        yield {"hub": hub, "clients": clients, "links": links}
    finally:
        for ns in reversed(made):  # a namespace takes its veth ends with it
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_a_sabotaged_veth_is_refused_and_nothing_can_leave() -> None:
    """The link deleted mid-set-up: the route check refuses before anything is sent, and the
    hub, where fsbench would run, has no interface but lo, so no packet could have gone out."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2: creates network namespaces")
    seen: dict[str, list[str]] = {}

    def delete_link(hub: str, link: str) -> None:
        _ip("-n", hub, "link", "del", link)
        seen["links"] = hub_links(hub)

    with pytest.raises(RouteRefused, match=r"refusing to send to 10\.213\."):  # noqa: SIM117
        with namespaces(1, sabotage=delete_link):
            pass
    assert seen["links"] == ["lo"]


@pytest.fixture
def ns_clients() -> Iterator[tuple[list[NsClient], Path, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces")
    if shutil.which("fio") is None or shutil.which("ip") is None:
        pytest.skip("needs fio and iproute2")
    shared = Path(f"/dev/shm/fsbench-t-{secrets.token_hex(2)}")
    clients: list[NsClient] = []
    try:
        shared.mkdir()
        with namespaces(3) as net:
            assert sorted(hub_links(net["hub"])) == sorted(["lo", *net["links"]])
            for ns, addr in net["clients"]:
                server = subprocess.Popen(
                    ["ip", "netns", "exec", ns, "fio", f"--server=ip:{addr},{PORT}"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                clients.append(NsClient(ns, addr, server))
            for c in clients:
                assert wait_until(lambda c=c: _listening(c), 10), f"no fio server in {c.ns}"
            yield clients, shared, net["hub"]
    finally:
        for c in clients:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.server.pid, signal.SIGKILL)
            c.server.wait(timeout=10)
        # A server's per-connection processes can leave its session (seen: one outlived the
        # test under PID 1): every process serving one of our addresses goes too.
        ours = [f"--server=ip:{c.addr},{PORT}".encode() for c in clients]
        for pid, argv in _processes():
            if any(a in argv for a in ours):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(shared, ignore_errors=True)


def _listening(c: NsClient) -> bool:
    ss = ["ip", "netns", "exec", c.ns, "ss", "-ltn"]
    return f"{c.addr}:{PORT}" in subprocess.run(ss, capture_output=True, text=True).stdout


def in_hub(hub: str, *args: str) -> list[str]:
    """fsbench's command line, run inside the hub namespace (uv offline: there is no network)."""
    return ["ip", "netns", "exec", hub, "env", "UV_OFFLINE=1", *fsbench_argv(*args)]


def _processes() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every process on this host that can still be read."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                yield int(p.name), (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def fio_clients_of_ours(clients: list[NsClient]) -> list[int]:
    """fio client processes on this host that name one of the namespace servers."""
    ours = [c.addr.encode() for c in clients]
    return [
        pid
        for pid, argv in _processes()
        if any(a.startswith(b"--client=") and any(x in a for x in ours) for a in argv)
    ]


@pytest.mark.root
def test_sweep_over_three_namespace_clients(
    ns_clients: tuple[list[NsClient], Path], tmp_path: Path
) -> None:
    clients, shared, hub = ns_clients
    out = tmp_path / "out"
    res = subprocess.run(
        in_hub(
            hub, "run", "--target", str(shared),
            # Two counts make a sweep (and its scaling plot); 1 and all three of them.
            "--clients", ",".join(c.spec for c in clients), "--clients-sweep", "1,3",
            "--workloads", "seq-write/buffered",
            "--scale", "0.05",  # 51 MiB files, 1 s time-based samples
            "--repeat", "2", "--warmup", "0", "--out", str(out), "--db", str(tmp_path / "db"),
        ),
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run = json.loads((out / "results.json").read_text())
    env_clients = run["environment"]["clients"]
    assert [(c["host"], c["port"]) for c in env_clients] == [(c.addr, PORT) for c in clients]
    local_fio = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout
    assert all(c["fio_version"] == local_fio.strip() and c["os"] == "Linux" for c in env_clients)
    by_count = {r["params"]["clients"]: r for r in run["results"]}
    assert sorted(by_count) == [1, 3]
    for n, r in by_count.items():
        assert r["status"] == "ok" and len(r["samples"]) == 2, r
        assert [c["client"] for c in r["clients"]] == [c.spec for c in clients[:n]]
        assert r["cache"] == "n/a"
        for s in r["sample_details"]:
            per = s["extra"]["clients"]
            assert len(per) == n
            # fio's "All clients" total: the bytes and I/Os of every client, exactly ...
            assert sum(c["bytes"] for c in per) == s["bytes"] > 0
            assert sum(c["ios"] for c in per) == s["ops"]
            # ... and its rate is all their bytes over the longest client's window (fio's
            # aggregate rule), so the clients' own rates add up to at least it: a client that
            # started late on a busy machine ran a shorter window at its own rate (the sum
            # was 6 % above the total once, under the full suite).
            window = max(c["seconds"] for c in per)
            total = sum(c["bytes"] for c in per) / 2**20 / window
            assert s["value"] == pytest.approx(total, rel=0.002)
            assert sum(c["mib_s"] for c in per) >= s["value"] * 0.998
            assert all(c["usr_cpu"] + c["sys_cpu"] > 0 and c["lat_us"]["p99"] > 0 for c in per)
    html = (out / "report.html").read_text()
    assert 'id="clients-scaling' in html and "<svg" in html
    assert not fio_clients_of_ours(clients)
    assert not list(shared.glob(".fsbench-*")), "fsbench's scratch directory was left"


@pytest.mark.root
def test_client_killed_mid_sample_fails_it_by_name(
    ns_clients: tuple[list[NsClient], Path], tmp_path: Path
) -> None:
    clients, shared, hub = ns_clients
    out = tmp_path / "out"
    victim = clients[1]
    proc = subprocess.Popen(
        in_hub(
            hub, "run", "--target", str(shared), "--clients", ",".join(c.spec for c in clients),
            "--workloads", "seq-write/buffered",
            "--scale", "1",  # 2 s samples: the kill lands inside one
            "--repeat", "2", "--warmup", "0", "--out", str(out), "--db", str(tmp_path / "db"),
        ),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # The sample is running once the victim's server has a connection that lasts (the
        # version probe's is gone within a moment) and its client has written a MiB.
        def writing() -> bool:
            mine = shared.glob(f".fsbench-*/{victim.addr}.*")
            return bool(victim.server_children()) and any(_size(f) > 2**20 for f in mine)

        t0 = time.monotonic()
        assert wait_until(writing, 30), "the sample never started on the victim"
        victim.kill()
        killed = time.monotonic()
        _out, stderr = proc.communicate(timeout=90)
        after = time.monotonic() - killed
        print(f"started after {killed - t0:.1f} s; ended {after:.1f} s after the kill")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr
    run = json.loads((out / "results.json").read_text())
    (r,) = run["results"]
    assert r["status"] == "failed"
    assert victim.addr in r["error"], r["error"]
    assert all(c.addr not in r["error"] for c in clients if c is not victim), r["error"]
    assert not fio_clients_of_ours(clients)
    assert not list(shared.glob(".fsbench-*"))
