"""Issue 22, "every label true": each figure is what its label says (unit tests, no root)."""

from __future__ import annotations

import pytest

from fsbench import registry
from fsbench.errors import UsageError


def test_fake_workload_only_reachable_from_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py opens the door for the suite; a user's shell does not have it.
    assert [w.name for w in registry.resolve_workloads("fake", None)] == ["fake"]
    monkeypatch.delenv("FSBENCH_TEST_FAKE_WORKLOAD", raising=False)
    with pytest.raises(UsageError, match="unknown workload 'fake'"):
        registry.resolve_workloads("fake", None)
