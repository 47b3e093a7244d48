"""`web-serve` (a web server's transfer rate by file size, one request at a time): a real
nginx serving files from the target to a real client, wrk, over loopback.

Variants are a file size and a cache state. `-warm` fetches one file over and over for a fixed
time (it stays in the page cache); `-cold` fetches a set of distinct files once each after the
runner emptied the caches, so every byte comes from the device (the runner verifies it).

nginx runs in the foreground as one process (`master_process off`: no worker to orphan), from
a generated minimal nginx.conf in a private temporary directory, on a free 127.0.0.1 port, with
sendfile on, no access log and no open-file cache. It is started and stopped inside each
sample and always stopped, also on errors; it dies with fsbench even on SIGKILL (parent-death
signal via setpriv). wrk runs one thread with one connection; a Lua `done()` prints its
summary as JSON, so nothing depends on wrk's human-readable text. A cold sample counts its
requests in Lua (`delay()` runs before every real request) and times them with the monotonic
clock, then wrk is woken with SIGINT, since its main thread otherwise sleeps for all of -d.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.services.nginx import (
    KEEPALIVE_REQUESTS,
    NginxServer,
    find_nginx,
    head,
    nginx_version,
)
from fsbench.services.wrk import find_wrk, parse_wrk, run_wrk, wrk_script
from fsbench.units import size_text
from fsbench.workloads.base import (
    Declared,
    Measurement,
    Target,
    children_usage,
    fill_file,
    free_bytes,
)

KiB = 1024
MiB = 1024 * KiB
WEB_SHARE = 0.35  # of target.size: the most one variant's files may take
COLD_BYTES = 256 * MiB  # a cold sample reads at most this much at --scale 1
WARM_SECONDS = 2  # wrk -d of a warm sample
COLD_BOUND_S = 300  # a cold sample that takes longer has failed
WRK_TIMEOUT_S = 20  # wrk --timeout: one response slower than this is an error
NGINX_CHOICES = {
    "server": "nginx, one foreground process (daemon off, master_process off)",
    "sendfile": True,
    "tcp_nopush": True,
    "access_log": False,
    "open_file_cache": False,
    "keepalive_requests": KEEPALIVE_REQUESTS,
    "listen": "127.0.0.1, a free port",
}


_label = size_text  # one size formatter for everything (fsbench.units)


# -- the workload ----------------------------------------------------------------------------
@dataclass(eq=False)
class WebServe(Declared):
    # How a sample's iterations merge its extras (base.MERGE_RULES).
    merge_extra: ClassVar[dict[str, Any]] = {
        "wire_bytes": "sum", "requests_per_s": "rate:ops", "latency_us": "median",
    }  # fmt: skip
    size_name: str  # 4k, 64k, 1m, 16m, 64m
    file_bytes: int
    cache: str = field()  # warm | cold; field(): required, not Declared's default
    duration_s: int = WARM_SECONDS
    cold_files: int | None = None  # fixed count (tests); None: from the budget
    share: float = WEB_SHARE
    port: int | None = None  # fixed port (tests); None: a free one per sample
    tmp_root: str | None = None
    name: str = "web-serve"
    tools: tuple[str, ...] = ("nginx", "wrk")  # their versions go into the environment
    _version: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.cache not in ("warm", "cold"):
            raise ValueError(f"cache must be warm or cold, not {self.cache!r}")

    @property
    def variant(self) -> str:
        return f"{self.size_name}-{self.cache}"

    @property
    def description(self) -> str:
        how = (
            f"one {_label(self.file_bytes)} file fetched over and over for {self.duration_s} s"
            if self.cache == "warm"
            else f"distinct {_label(self.file_bytes)} files fetched once each, cold"
        )
        return f"nginx serving the target to wrk (1 connection): {how} (seed 004: Apache)"

    def budget(self, target: Target) -> int:
        return int(target.size * self.share)

    def files(self, target: Target) -> int:
        """How many files a sample fetches (0: they do not fit on this image)."""
        fit = self.budget(target) // self.file_bytes
        if self.cache == "warm":
            return min(1, fit)
        if self.cold_files is not None:
            return self.cold_files
        want = max(1, int(COLD_BYTES * target.scale) // self.file_bytes)
        return min(want, fit)

    def seconds(self, target: Target) -> int:
        """A warm sample's wrk -d: its amount of work, scaled by --scale as the cold bytes are
        (whole seconds, wrk's unit; at least 1)."""
        return max(1, round(self.duration_s * target.scale))

    def params(self, target: Target) -> dict[str, Any]:
        n = self.files(target)
        p: dict[str, Any] = {
            "engine": "nginx+wrk",
            "variant": self.variant,
            "file_size": self.file_bytes,
            "files": n,
            "cache": self.cache,
            **NGINX_CHOICES,
            "client": "wrk -t1 -c1 (one request at a time, as seed 004)",
            "value": "payload MiB/s (response headers not counted)",
        }
        if self.cache == "warm":
            p["duration_s"] = self.seconds(target)
        else:
            p["requests"] = n
        return p

    def _root(self, target: Target) -> str:
        return os.path.join(target.workdir, self.name)

    def _dir(self, target: Target) -> str:
        return os.path.join(self._root(target), self.variant)

    def _paths(self, n: int) -> list[str]:
        return [f"/{self.variant}/f{i:04d}.bin" for i in range(n)]

    def prepare(self, target: Target) -> None:
        find_nginx()
        find_wrk()
        n = self.files(target)
        if n < 1:
            raise Unsupported(f"image too small for {_label(self.file_bytes)} files")
        root, mine = self._root(target), self._dir(target)
        try:
            os.makedirs(mine, exist_ok=True)
            self._make_room(target, root, mine, n * self.file_bytes)
            for rel in self._paths(n):
                path = root + rel
                if not (os.path.exists(path) and os.path.getsize(path) == self.file_bytes):
                    _write_file(path, self.file_bytes)
            if self.cache == "warm":
                for rel in self._paths(n):
                    with open(root + rel, "rb") as f:
                        while f.read(MiB):
                            pass
        except OSError as e:
            raise WorkloadFailed(f"preparing {self.id}: {e.strerror} ({e.filename})") from None

    def _make_room(self, target: Target, root: str, mine: str, need: int) -> None:
        """Keep other variants' files only while everything fits in the budget."""
        with os.scandir(root) as it:
            others = [e.path for e in it if e.is_dir() and e.path != mine]
        used = sum(_tree_bytes(p) for p in others)
        missing = need - _tree_bytes(mine)
        if used + need > self.budget(target) or free_bytes(root) < missing:
            for p in others:
                shutil.rmtree(p, ignore_errors=True)

    def run(self, target: Target) -> Measurement:
        try:
            return self._run(target)
        except (OSError, http.client.HTTPException) as e:
            # A server or client that cannot be started or talked to: this subject fails alone.
            raise WorkloadFailed(f"{self.id}: {e}") from None

    def _run(self, target: Target) -> Measurement:
        wrk = find_wrk()
        n = self.files(target)
        paths = self._paths(n)
        before = children_usage()
        srv = NginxServer(self._root(target), port=self.port, tmp_root=self.tmp_root)
        with srv:
            assert srv.port is not None
            self._version = self._version or nginx_version(find_nginx())
            status, length = head(srv.port, paths[0])
            if status != 200 or length != self.file_bytes:
                raise WorkloadFailed(
                    f"nginx answered HEAD {paths[0]} with {status}, length {length} "
                    f"(expected 200, {self.file_bytes}): {srv._why() or 'no error logged'}"
                )
            script = os.path.join(srv.dir, "fsbench.lua")
            with open(script, "w") as f:
                f.write(wrk_script(None if self.cache == "warm" else paths))
            common = [wrk, "-t1", "-c1", f"--timeout={WRK_TIMEOUT_S}s", "--latency", "-s", script]
            if self.cache == "warm":
                warm_s = self.seconds(target)
                argv = [*common, f"-d{warm_s}s", srv.url(paths[0])]
                out = run_wrk(argv, None, warm_s + WRK_TIMEOUT_S + 30)
            else:
                argv = [*common, f"-d{COLD_BOUND_S}s", srv.url("/")]
                out = run_wrk(argv, "FSBENCH-STOP", COLD_BOUND_S + 30)
        used = children_usage() - before  # wrk and nginx, both reaped by now
        done = parse_wrk(out, "FSBENCH-DONE")
        bad = {k: v for k, v in done["errors"].items() if v}
        if bad:
            raise WorkloadFailed(f"wrk saw failed requests: {bad}")
        requests = int(done["requests"])
        if self.cache == "warm":
            seconds = done["duration_us"] / 1e6
        else:
            stop = parse_wrk(out, "FSBENCH-STOP")
            seconds = stop["elapsed_us"] / 1e6
            if requests != n:
                raise WorkloadFailed(f"wrk completed {requests} of {n} requests")
        if requests == 0 or seconds <= 0:
            raise WorkloadFailed("wrk completed no request")
        payload = requests * self.file_bytes
        return Measurement.rate(
            payload / MiB,
            seconds,
            "wrk's requests",
            used,
            bytes=payload,
            ops=requests,
            extra={
                "requests_per_s": requests / seconds,
                "wire_bytes": int(done["bytes"]),
                "latency_us": done["latency_us"],
                "nginx_version": self._version,
            },
        )


def _write_file(path: str, size: int) -> None:
    # fsynced, so no writeback of it can fall into a later sample's window.
    tmp = path + ".part"
    try:
        fill_file(tmp, size, fsync=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # no half file taking the space of later workloads
        raise


def _tree_bytes(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


WEB_SERVE_JOBS: list[WebServe] = [
    WebServe("4k", 4 * KiB, "warm"),
    WebServe("64k", 64 * KiB, "warm"),
    WebServe("1m", MiB, "warm"),
    WebServe("16m", 16 * MiB, "warm"),
    WebServe("64m", 64 * MiB, "warm"),
    WebServe("1m", MiB, "cold"),
    WebServe("64m", 64 * MiB, "cold"),
]
