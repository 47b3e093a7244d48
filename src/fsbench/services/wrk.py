"""wrk as a measured workload's client: its Lua (JSON summary from done(); for cold samples a
fixed request list that stops the thread after the last response), its output parsed, and its
run bounded. Used by `web-serve`."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from typing import Any

from fsbench.errors import WorkloadFailed


def find_wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise WorkloadFailed("wrk not found; apt-get install wrk")
    return path


# -- wrk -------------------------------------------------------------------------------------
_DONE_LUA = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'FSBENCH-DONE {"duration_us": %d, "requests": %d, "bytes": %d, '
    .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
    .. '"latency_us": {"mean": %.1f, "p50": %d, "p90": %d, "p99": %d, "max": %d}}\\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
"""

# delay() runs before every real request (not before the one wrk makes to check the
# script), so it counts them; after the last response it reports and stops the thread.
_COLD_LUA = """
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } fsbench_timespec;
int clock_gettime(int clock, fsbench_timespec *tp);
]]
local ts = ffi.new("fsbench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end
local paths = {%PATHS%}
local n, t0 = 0, 0
delay = function()
  n = n + 1
  if n == 1 then t0 = now_us() end
  if n > #paths then
    io.write(string.format('FSBENCH-STOP {"elapsed_us": %.0f, "requests": %d}\\n',
      now_us() - t0, #paths))
    io.flush()
    wrk.thread:stop()
  end
  return 0
end
request = function()
  return wrk.format("GET", paths[math.max(1, math.min(n, #paths))])
end
"""


def wrk_script(paths: list[str] | None) -> str:
    """The Lua for wrk: JSON from done(), and for a cold sample the fixed request list."""
    if paths is None:
        return _DONE_LUA
    listed = ", ".join(json.dumps(p) for p in paths)
    return _COLD_LUA.replace("%PATHS%", listed) + _DONE_LUA


def parse_wrk(output: str, marker: str) -> dict[str, Any]:
    for line in output.splitlines():
        if line.startswith(marker + " "):
            try:
                return json.loads(line[len(marker) + 1 :])
            except ValueError as e:
                raise WorkloadFailed(f"could not read wrk's {marker} line ({e})") from None
    last = [ln for ln in output.splitlines() if ln.strip()]
    raise WorkloadFailed(f"wrk printed no {marker} line: {last[-1] if last else 'no output'}")


def run_wrk(argv: list[str], stop_marker: str | None, timeout: float) -> str:
    """wrk's whole output. With stop_marker: SIGINT as soon as that line appears (the Lua
    stopped its thread after the last request; SIGINT ends wrk's sleep for the rest of -d)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    out = b""
    deadline = time.monotonic() + timeout
    try:
        signalled = False
        fd = proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkloadFailed(f"wrk did not finish within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2 if signalled else 1.0))
            if not ready:
                if signalled and proc.poll() is None:
                    # The kernel gives a process-directed signal to any thread: one that hit
                    # the thread then stopping left wrk's main thread asleep for all of -d
                    # (a cold sample that took 300 s). Again until it ends.
                    proc.send_signal(signal.SIGINT)
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
            if stop_marker and not signalled and stop_marker.encode() in out:
                proc.send_signal(signal.SIGINT)
                signalled = True
        proc.wait(max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise WorkloadFailed(f"wrk exited with {proc.returncode}: {text.strip()[-200:]}")
    return text
