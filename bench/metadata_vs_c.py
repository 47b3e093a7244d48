"""fsbench's metadata stat rate against a plain C loop making the same calls, alternated in one
invocation (C, fsbench, C, fsbench, ...) over the same files on a tmpfs.

    uv run python bench/metadata_vs_c.py [--files 100000] [--rounds 7] [--dir /dev/shm]

The C loop is bench/stat_loop.c, compiled here with cc into a temporary directory. fsbench's
side is the metadata/stat-flat workload itself: its prepare and run, exactly as the runner calls
them, and the ops/s it reports. Prints the median of each and the ratio fsbench/C; the target is
>= 0.9. A second, informative line compares with stat() on full paths, the call a naive program
makes. Prints, never asserts: the numbers are for people.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from fsbench.registry import WORKLOADS
from fsbench.workloads.base import Target
from fsbench.workloads.metadata import DEFAULT_FILES, MetadataOp

HERE = Path(__file__).resolve().parent


def compile_reference(tmp: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler (cc) found; apt-get install gcc")
    exe = tmp / "stat_loop"
    subprocess.run([cc, "-O2", "-o", str(exe), str(HERE / "stat_loop.c")], check=True)
    return exe


def c_rate(exe: Path, root: str, files: int, how: str) -> float:
    out = subprocess.run(
        [str(exe), root, str(files), how], capture_output=True, text=True, check=True
    ).stdout
    ops, ns, _failed = (int(x) for x in out.split())
    return ops / (ns / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100_000, help="files stat-ed per pass")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default="/dev/shm", help="where the files go (a tmpfs)")
    args = ap.parse_args()

    job = WORKLOADS["metadata/stat-flat"]
    assert isinstance(job, MetadataOp)
    with tempfile.TemporaryDirectory(prefix="fsbench-metabench-") as tmp_s:
        tmp = Path(tmp_s)
        exe = compile_reference(tmp)
        work = Path(tempfile.mkdtemp(prefix="fsbench-metabench-", dir=args.dir))
        try:
            # The workload's own file count comes from --scale; pick the scale giving --files.
            target = Target("bench", str(work), "directory", 0, scale=args.files / DEFAULT_FILES)
            job.prepare(target)
            root, files = job.set_dir(target), job.files(target)
            # One untimed pass of each, so neither side pays for first touches.
            c_rate(exe, root, files, "at")
            job.run(target)
            c_at: list[float] = []
            c_path: list[float] = []
            ours: list[float] = []
            for _ in range(args.rounds):
                c_at.append(c_rate(exe, root, files, "at"))
                job.prepare(target)
                ours.append(job.run(target).value)
                c_path.append(c_rate(exe, root, files, "path"))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    m_at, m_ours, m_path = (statistics.median(x) for x in (c_at, ours, c_path))
    # Each round's fsbench pass against the C pass just before it: drift (other load on the
    # machine) hits both alike, so the median of these ratios is the steadier figure.
    paired = statistics.median(o / c for o, c in zip(ours, c_at, strict=True))
    print(f"{files} files in {args.dir}, {args.rounds} rounds, medians:")
    print(f"  C loop, fstatat(dirfd, name):  {m_at:12,.0f} stat/s")
    print(f"  fsbench metadata/stat-flat:    {m_ours:12,.0f} stat/s")
    print(f"  C loop, stat(full path):       {m_path:12,.0f} stat/s")
    print(f"ratio fsbench / C (same calls):  {m_ours / m_at:.3f}  (target >= 0.9)")
    print(f"  median of per-round ratios:    {paired:.3f}")
    print(f"ratio fsbench / C (full paths):  {m_ours / m_path:.3f}  (informative)")


if __name__ == "__main__":
    main()
