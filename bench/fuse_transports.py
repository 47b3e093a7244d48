"""What FUSE itself costs per transport: the floor daemon (libfuse 3.18's passthrough_hp over
/dev/fuse, io_uring and passthrough) against ext4 on the same image, in one `fsbench compare`.

    flock /tmp/fsbench-heavy.lock uv run python bench/fuse_transports.py \
        [--size 1G] [--repeat auto|N] [--placement free] [--with ntfs-3g] [--keep DIR]
        [--extra 'COMPARE OPTIONS']

Prints per transport the floor's seq-write/fsync and seq-read/cold rates and their ratio to
ext4's (same run, same image copy, interleaved), its wake-ups and cross-CPU wake-ups per GiB
(from the traced run), its daemon CPU per GiB and its FUSE requests per GiB with their mean
latency, split by libfuse's USDT probe into waiting for the daemon and the daemon's work.
`--with ntfs-3g` adds a FUSE driver, whose explanation then names the floor's cost;
`--with fuse2fs-3.18 --with fuse2fs-3.18:uring` a real file system over both transports.
docs/fuse-transports.md compares the figures with the published ones.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

FLOOR = ("passthrough_hp", "passthrough_hp:uring", "passthrough_hp:passthrough")
WORKLOADS = ("seq-write/fsync", "seq-read/cold")
GiB = 2**30


def compare(args: argparse.Namespace, out: Path) -> dict:
    subjects = ["ext4", *FLOOR, *args.with_]
    argv = [
        sys.executable, "-m", "fsbench", "compare", *subjects, "--size", args.size,
        "--workloads", ",".join(WORKLOADS), "--repeat", str(args.repeat),
        "--placement", args.placement, "--json", "--out", str(out / "run"),
        "--db", str(out / "results.db"), *args.extra.split(),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"fsbench compare failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout)


def _per_gib(trace: dict, part: str, key: str) -> float | None:
    work = (trace.get("work") or {}).get("bytes") or 0
    values = (trace.get(part) or {}).get(key)
    if not work or not isinstance(values, dict):
        return None
    return sum(v for v in values.values() if isinstance(v, int | float)) / (work / GiB)


def _split(trace: dict, op: str) -> str:
    """libfuse's USDT split of `op`: "waited/worked" µs per request; "none" when the probe ran
    and split no such request (io_uring, passthrough's READ/WRITE), "" when it did not run."""
    status = (trace.get("probes") or {}).get("libfuse")
    part = trace.get("libfuse") or {}
    if status != "ok":
        return ""
    n = (part.get("requests") or {}).get(op)
    if not n:
        return "none"
    wait, work = part["wait_us"][op] / n, part["work_us"][op] / n
    return f"{wait:,.0f}/{work:,.0f}"


def rows(doc: dict) -> list[list[str]]:
    transport = {s["id"]: s.get("transport") or "kernel" for s in doc["subjects"]}
    by = {
        (r["subject"], f"{r['workload']}/{r['params'].get('variant')}"): r for r in doc["results"]
    }
    out = []
    for wl in WORKLOADS:
        base = by.get(("ext4", wl))
        for sid in ("ext4", *FLOOR, *[s for s in transport if s not in ("ext4", *FLOOR)]):
            r = by.get((sid, wl))
            if r is None or r.get("median") is None:
                out.append([wl, sid, transport.get(sid, "?"), "failed", *[""] * 6])
                continue
            ratio = r["median"] / base["median"] if base and base.get("median") else None
            t = r.get("trace") or {}
            fuse = (t.get("fuse") or {}).get("requests") or {}
            op = "WRITE" if "write" in wl else "READ"
            lat = ((t.get("fuse") or {}).get("latency_us") or {}).get(op, {})
            n = fuse.get(op, 0)
            work = ((t.get("work") or {}).get("bytes") or 0) / GiB
            wake = _per_gib(t, "sched", "wakeups")
            cross = _per_gib(t, "sched", "cross_cpu")
            cpu = (r.get("cpu") or {}).get("per_gib") or {}
            split = _split(t, op)
            out.append(
                [
                    wl,
                    sid,
                    transport.get(sid, "?"),
                    f"{r['median']:,.0f}",
                    f"{ratio:.2f}×" if ratio else "",
                    f"{wake:,.0f} ({cross:,.0f} cross)" if wake is not None else "n/a",
                    f"{cpu.get('driver', 0):.2f}" if cpu else "",
                    f"{n / work:,.0f}" if work and sid != "ext4" else "",
                    f"{lat['total'] / n:,.0f}" if n and lat.get("total") else "",
                    split,
                ]
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="1G")
    ap.add_argument("--repeat", default="auto")
    ap.add_argument("--placement", default="free")
    ap.add_argument("--with", dest="with_", action="append", default=[])
    ap.add_argument("--extra", default="", help="more compare options, e.g. '--no-trace'")
    ap.add_argument("--keep", type=Path, help="keep the run here (results.json, report.html)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuse-transports-") as tmp:
        out = args.keep or Path(tmp)
        doc = compare(args, out)
    head = ["workload", "subject", "transport", "MiB/s", "vs ext4", "wake-ups/GiB",
            "daemon s/GiB", "FUSE req/GiB", "µs/req", "waited/worked µs"]  # fmt: skip
    table = [head, *rows(doc)]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    floors = [
        f"{e['subject']} {e['title']}: {f['sentence']}"
        for e in doc.get("explanations", [])
        for f in e["factors"]
        if f["name"] in ("fuse floor", "daemon split")
    ]
    for line in floors:
        print(line)
    env = doc["environment"]
    print(
        f"run {doc['run_id']}: {env.get('cpus')} CPUs, {env.get('backing')}, kernel "
        f"{env.get('kernel')}, wake-up µs {env.get('wakeup_us')}"
    )


if __name__ == "__main__":
    main()
