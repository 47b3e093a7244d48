"""fio's client mode as data: a client host (`Client`), what fio reports for each client and
for "All clients" (its JSON parsed into per-client figures), and how a sample's iterations and a
result's samples merge them. Pure over fio's output; `clients.py` runs fio and is the workload.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from fsbench.errors import WorkloadFailed
from fsbench.records.schema import ClientFigures, Sample
from fsbench.stats.aggregate import median_of
from fsbench.workloads.fio import part_figures

MiB = 1024 * 1024
DEFAULT_PORT = 8765  # fio's own default for --server
ALL_CLIENTS = "All clients"


@dataclass(frozen=True)
class Client:
    host: str
    port: int = DEFAULT_PORT

    @property
    def name(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def fio_arg(self) -> str:
        kind = "ip6" if ":" in self.host else "ip"
        return f"--client={kind}:{self.host},{self.port}"


# -- fio's client-mode JSON --------------------------------------------------------------------
def _json_doc(stdout: str) -> dict[str, Any]:
    # Client mode prefixes each server's text lines with "<host>"; the document starts at the
    # first line that is a lone "{".
    m = re.search(r"^\{\s*$", stdout, re.M)
    if m is None:
        raise ValueError("no JSON in fio's output")
    return json.loads(stdout[m.start() :])  # type: ignore[no-any-return]


def _figures(entry: dict[str, Any], direction: str) -> dict[str, Any]:
    fig = part_figures(entry[direction])
    del fig["lat_pct_us"]  # a client's p50/p99/p99.9 are what its table shows
    nbytes, seconds = fig["bytes"], fig["seconds"]
    usr, sys_ = float(entry.get("usr_cpu", 0.0)), float(entry.get("sys_cpu", 0.0))
    return {
        **fig,
        "mib_s": nbytes / MiB / seconds if seconds > 0 else 0.0,
        # fio's own figures: percent of one CPU over the jobs' runtime, on the client host.
        "usr_cpu": usr,
        "sys_cpu": sys_,
        "cpu_s": (usr + sys_) / 100.0 * float(entry.get("job_runtime", 0)) / 1000.0,
        "error": int(entry.get("error", 0)),
    }


def parse_client_json(
    stdout: str, stderr: str, direction: str, clients: list[Client]
) -> dict[str, Any]:
    """Totals ("All clients", or the single client's) and one record per client, in the
    order given. A client missing from the report, or with an error, fails the sample by name."""
    try:
        doc = _json_doc(stdout)
        stats = doc["client_stats"]
    except (ValueError, KeyError) as e:
        missing = ", ".join(c.name for c in clients)
        why = _client_errors(stdout, stderr, clients) or str(e)
        raise WorkloadFailed(f"no result from the clients ({missing}): {why}") from None
    per: dict[Client, dict[str, Any]] = {}
    total: dict[str, Any] | None = None
    for entry in stats:
        if entry.get("jobname") == ALL_CLIENTS:
            total = _figures(entry, direction)
            continue
        c = _client_of(entry, clients)
        if c is None:
            continue
        fig = _figures(entry, direction)
        if c in per:  # several groups of one client: amounts add up
            fig = _add(per[c], fig)
        per[c] = fig
    missing = [c for c in clients if c not in per]
    if missing:
        why = _client_errors(stdout, stderr, missing)
        names = ", ".join(c.name for c in missing)
        raise WorkloadFailed(f"client {names} failed during the sample: {why or 'no result'}")
    failed = [c for c in clients if per[c]["error"]]
    if failed:
        raise WorkloadFailed(
            "; ".join(
                f"client {c.name}: fio job error {per[c]['error']}: {os.strerror(per[c]['error'])}"
                for c in failed
            )
        )
    if total is None:  # one client: fio prints no aggregate
        total = dict(per[clients[0]])
    return {
        "total": total,
        "clients": [{"client": c.name, **per[c]} for c in clients],
        "fio_version": doc.get("fio version"),
    }


def _add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(b)
    for k in ("bytes", "ios", "cpu_s"):
        out[k] = a[k] + b[k]
    out["seconds"] = max(a["seconds"], b["seconds"])
    out["mib_s"] = out["bytes"] / MiB / out["seconds"] if out["seconds"] > 0 else 0.0
    out["iops"] = out["ios"] / out["seconds"] if out["seconds"] > 0 else 0.0
    out["error"] = a["error"] or b["error"]
    return out


def _client_of(entry: dict[str, Any], clients: list[Client]) -> Client | None:
    host, port = str(entry.get("hostname", "")), int(entry.get("port", DEFAULT_PORT) or 0)
    for c in clients:
        if c.host == host and c.port == port:
            return c
    for c in clients:
        if c.host == host:
            return c
    return None


def _client_errors(stdout: str, stderr: str, clients: list[Client]) -> str:
    """What fio said about these clients, one line: "client: host=X disconnected" (on stdout),
    "client X timed out", "failed to connect to X" (on stderr)."""
    m = re.search(r"^\{\s*$", stdout, re.M)
    text = stderr + "\n" + (stdout[: m.start()] if m else stdout)
    said = []
    for line in text.splitlines():
        line = line.strip().removeprefix("fio: ")
        if line.startswith("<"):  # a server's own job output
            continue
        if line and any(re.search(rf"\b{re.escape(c.host)}\b", line) for c in clients):
            said.append(line)
    return "; ".join(dict.fromkeys(said))[:400]


def why_failed(stdout: str, stderr: str, clients: list[Client]) -> str:
    """Why a fio client run failed, one line: what fio said about these clients, else the
    end of its stderr."""
    return _client_errors(stdout, stderr, clients) or stderr.strip()[-300:]


# -- merging and summarizing per-client figures ------------------------------------------------
def merge_clients(per_iteration: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A sample's iterations into one record per client: amounts add up, rates are recomputed
    over the summed time, CPU percentages are time-weighted, latency percentiles the median."""
    out = []
    for recs in zip(*per_iteration, strict=True):
        seconds = sum(r["seconds"] for r in recs)
        nbytes = sum(r["bytes"] for r in recs)
        ios = sum(r["ios"] for r in recs)
        merged = dict(recs[-1])
        merged.update(
            bytes=nbytes,
            ios=ios,
            seconds=seconds,
            mib_s=nbytes / MiB / seconds if seconds > 0 else 0.0,
            iops=ios / seconds if seconds > 0 else 0.0,
            cpu_s=sum(r["cpu_s"] for r in recs),
        )
        for k in ("usr_cpu", "sys_cpu", "lat_mean_us"):
            merged[k] = sum(r[k] * r["seconds"] for r in recs) / seconds if seconds > 0 else 0.0
        keys = recs[-1].get("lat_us", {})
        merged["lat_us"] = {
            k: median_of([r["lat_us"][k] for r in recs if k in r.get("lat_us", {})]) for k in keys
        }
        out.append(merged)
    return out


def summarize_clients(samples: list[Sample]) -> list[ClientFigures] | None:
    """Per client, the medians over a result's samples (None: not a multi-client result)."""
    per: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        for rec in s.extra.get("clients") or []:
            per.setdefault(rec["client"], []).append(rec)
    if not per:
        return None
    out = []
    for name, recs in per.items():
        keys = recs[-1].get("lat_us", {})
        out.append(
            ClientFigures(
                client=name,
                samples=len(recs),
                mib_s=median_of([r["mib_s"] for r in recs]),
                iops=median_of([r["iops"] for r in recs]),
                bytes=int(median_of([r["bytes"] for r in recs])),
                lat_us={k: median_of([r["lat_us"].get(k, 0.0) for r in recs]) for k in keys},
                usr_cpu=median_of([r["usr_cpu"] for r in recs]),
                sys_cpu=median_of([r["sys_cpu"] for r in recs]),
                cpu_s=median_of([r["cpu_s"] for r in recs]),
            )
        )
    return out
