"""Issue 22, "every label true": each figure is what its label says (unit tests, no root)."""

from __future__ import annotations

import json

import pytest

from fsbench import registry
from fsbench.errors import UsageError
from fsbench.workloads.base import Target, hook
from fsbench.workloads.fio import FioJob, with_numjobs


def test_fake_workload_only_reachable_from_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py opens the door for the suite; a user's shell does not have it.
    assert [w.name for w in registry.resolve_workloads("fake", None)] == ["fake"]
    monkeypatch.delenv("FSBENCH_TEST_FAKE_WORKLOAD", raising=False)
    with pytest.raises(UsageError, match="unknown workload 'fake'"):
        registry.resolve_workloads("fake", None)


def test_params_distinguish_every_workload_variant(tmp_path) -> None:
    # results.json tells results apart by their params: two variants that do different
    # things (reread warmed by reading, seq-read/warm by writing) must not record the same.
    target = Target("s", str(tmp_path / "work"), "kernel", 1 << 30, fs="ext4")
    pool = {**registry.WORKLOADS, **registry.MATRIX_WORKLOADS}
    variants = [
        *pool.values(),
        *(with_numjobs(w, 4) for w in registry.WORKLOADS.values() if isinstance(w, FioJob)),
    ]
    seen: dict[str, str] = {}
    for wl in variants:
        key = json.dumps(wl.params(target), sort_keys=True, default=str)
        wid = str(hook(wl, "id"))
        assert key not in seen, f"{wid} and {seen.get(key)} record the same params: {key}"
        seen[key] = wid
    assert len(seen) == len(variants)
