"""A report that cannot be rendered is recorded with the run and said on the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsbench import pipeline
from fsbench.lab.backing import parse_backing
from fsbench.schedule import targets
from fsbench.workloads.fake import FakeWorkload


def test_report_failure_is_in_results_json_and_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsbench.report.views.sections as html

    def broken(_run, _out):  # type: ignore[no-untyped-def]
        raise RuntimeError("template exploded")

    monkeypatch.setattr(html, "write_report", broken)
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "out"
    plan = pipeline.Plan(
        subjects=None,
        explicit=False,
        workloads=[FakeWorkload()],
        repeat=1,
        backing=parse_backing(f"dir:{target}"),
        size=64 * 1024 * 1024,
        out_dir=out,
        db=tmp_path / "db.sqlite",
        command=["fsbench", "run"],
        target_dir=target,
        warmup=0,
    )
    run, _code = pipeline.execute(plan)
    doc = json.loads((out / "results.json").read_text())
    assert doc["environment"]["report_error"] == "report.html not written: template exploded"
    assert not (out / "report.html").exists()

    from rich.console import Console

    from fsbench.report.views.sections import render

    console = Console(record=True, width=100)
    render(run, console, out_dir=str(out))
    assert "report.html not written: template exploded" in console.export_text()


def test_read_only_volume_is_walked_once_not_before_every_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Choosing the file to read walks the volume (metadata reads): after make_cold that walk
    would warm the caches the timed run wants cold, so it happens at the first mount only."""
    from types import SimpleNamespace

    from fsbench.records.schema import Subject

    walks: list[str] = []

    def walk(root: str, limit: int = 20000) -> str:
        walks.append(root)
        return f"{root}/big.iso"

    monkeypatch.setattr(targets, "_existing_file", walk)
    driver = SimpleNamespace(name="ext4", kind="kernel", fs="ext4", posix_permissions=True,
                             symlinks=True, direct_io=True)  # fmt: skip
    ls = SimpleNamespace(
        mounted=True, mountpoint="/mnt/vol", workdir="/mnt/vol", block_device="loop9",
        daemon_pid=None, entry=None, spec=SimpleNamespace(id="ext4", driver=driver),
    )  # fmt: skip
    lab = SimpleNamespace(read_only=True, health=lambda _ls: None, make_cold=lambda _ls: None)
    rec = Subject(id="ext4", driver="ext4", fs="ext4", kind="kernel")
    mounted = targets.LabMounted(lab, ls, rec, 1 << 20)  # type: ignore[arg-type]
    made = [mounted.ensure() for _ in range(4)]
    assert walks == ["/mnt/vol"]
    assert {t.existing_file for t in made} == {"/mnt/vol/big.iso"}
