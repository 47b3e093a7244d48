"""Micro workloads run by fio, declared as data. fio's JSON is parsed, never its text."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Any

from fsbench.workloads.base import Measurement, Target, WorkloadFailed, measured_child

MiB = 1024 * 1024


@dataclass(frozen=True)
class FioJob:
    """One fio job as data: everything that decides what fio does is a field here."""

    name: str
    description: str
    rw: str  # fio's rw=: write, read, randread, randwrite, ...
    bs: str = "1M"
    direct: bool = False
    end_fsync: bool = False
    numjobs: int = 1
    cache: str = "none"  # cold | warm | direct | none (writes)
    fileset: str = "seq"  # jobs that share a fileset read what another one laid out
    fresh_file: bool = False  # delete the file before each sample (a new file, as dd does)
    metric: str = "throughput"
    unit: str = "MiB/s"
    higher_is_better: bool = True

    @property
    def is_write(self) -> bool:
        return "write" in self.rw or self.rw in ("rw", "randrw", "trim")

    def params(self, target: Target) -> dict[str, Any]:
        return {
            "engine": "fio",
            "rw": self.rw,
            "block_size": self.bs,
            "file_size": target.size,
            "numjobs": self.numjobs,
            "direct": self.direct,
            "fsync": "end" if self.end_fsync else "none",
            "ioengine": "psync",
        }

    def argv(self, target: Target, rw: str | None = None, end_fsync: bool | None = None) -> list:
        per_job = max(MiB, (target.size // self.numjobs) // MiB * MiB)
        fsync = self.end_fsync if end_fsync is None else end_fsync
        return [
            fio_binary(),
            "--output-format=json",
            f"--name={self.fileset}",
            f"--directory={target.workdir}",
            f"--rw={rw or self.rw}",
            f"--bs={self.bs}",
            f"--size={per_job}",
            f"--numjobs={self.numjobs}",
            f"--direct={int(self.direct)}",
            f"--end_fsync={int(fsync)}",
            "--ioengine=psync",
            "--group_reporting=1",
            # The runner, not fio, decides what is cached: no fadvise before the job.
            "--invalidate=0",
            # A plain write like dd's, not posix_fallocate first (FUSE drivers vary there).
            "--fallocate=none",
        ]

    def _files(self, target: Target) -> list[str]:
        return [os.path.join(target.workdir, f"{self.fileset}.{i}.0") for i in range(self.numjobs)]

    def prepare(self, target: Target) -> None:
        """Untimed: a write job starts from no file; a read job needs its file laid out."""
        os.makedirs(target.workdir, exist_ok=True)
        files = self._files(target)
        per_job = max(MiB, (target.size // self.numjobs) // MiB * MiB)
        if self.fresh_file:
            for f in files:
                if os.path.exists(f):
                    os.unlink(f)
            return
        if all(os.path.exists(f) and os.path.getsize(f) >= per_job for f in files):
            return
        res = measured_child(self.argv(target, rw="write", end_fsync=True))
        if res.returncode != 0:
            raise WorkloadFailed(
                f"laying out files for {self.name}: {fio_error(res.stdout, res.stderr)}"
            )

    def run(self, target: Target) -> Measurement:
        res = measured_child(self.argv(target))
        if res.returncode != 0:
            raise WorkloadFailed(fio_error(res.stdout, res.stderr))
        out = parse_fio_json(res.stdout, "write" if self.is_write else "read")
        return Measurement(
            value=out["bytes"] / MiB / out["seconds"] if out["seconds"] > 0 else 0.0,
            seconds=out["seconds"],
            bytes=out["bytes"],
            ops=out["ios"],
            app_user_s=res.user_s,
            app_sys_s=res.sys_s,
            app_ctx=res.ctx,
            extra={k: v for k, v in out.items() if k not in ("bytes", "seconds", "ios")},
        )


def fio_binary() -> str:
    path = shutil.which("fio")
    if path is None:
        raise WorkloadFailed("fio not found; apt-get install fio")
    return path


def _json_part(stdout: str) -> dict:
    # fio may print warnings before the document; the JSON starts at the first '{'.
    start = stdout.find("{")
    if start < 0:
        raise ValueError("no JSON in fio output")
    return json.loads(stdout[start:])


def parse_fio_json(stdout: str, direction: str) -> dict[str, Any]:
    """bytes, seconds, IOPS and latency percentiles of the (grouped) job, from fio's JSON."""
    try:
        doc = _json_part(stdout)
        job = doc["jobs"][0]
        part = job[direction]
    except (ValueError, KeyError, IndexError) as e:
        raise WorkloadFailed(f"could not read fio's JSON output ({e})") from e
    if job.get("error"):
        raise WorkloadFailed(f"fio job error {job['error']}: {os.strerror(job['error'])}")
    lat = part.get("clat_ns") or part.get("lat_ns") or {}
    pct = lat.get("percentile") or {}
    pick = {"p50": "50.000000", "p99": "99.000000", "p99.9": "99.900000"}
    return {
        "bytes": int(part["io_bytes"]),
        "seconds": float(part["runtime"]) / 1000.0,  # includes the final fsync when asked
        "ios": int(part.get("total_ios", 0)),
        "iops": float(part.get("iops", 0.0)),
        "lat_us": {k: pct[v] / 1000.0 for k, v in pick.items() if v in pct},
        "lat_mean_us": float(lat.get("mean", 0.0)) / 1000.0,
        "fio_version": doc.get("fio version"),
    }


def fio_error(stdout: str, stderr: str) -> str:
    for text in (stderr, stdout):
        for line in text.splitlines():
            low = line.lower()
            if "error" in low or "no space" in low or "err=" in low:
                return line.strip().removeprefix("fio: ")
    lines = [ln for ln in (stderr or stdout).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "fio failed without a message"


FIO_JOBS: list[FioJob] = [
    FioJob(
        "seq-write",
        "sequential write of a new file, 1 MiB records, fsync at the end (dd bs=1M conv=fsync)",
        rw="write",
        bs="1M",
        end_fsync=True,
        fresh_file=True,
    ),
    FioJob(
        "seq-read",
        "cold sequential read, 1 MiB records, after sync, drop_caches and (FUSE) a remount",
        rw="read",
        bs="1M",
        cache="cold",
    ),
]
