"""A fake workload (as hyperfine's mock executor) for testing the scheduler, statistics and
reports without root or noise. It never counts as a measurement of anything real.

Each sample's value comes from a deterministic sequence set per subject, so tests can assert
exact medians and ratios: FSBENCH_FAKE_VALUES="subjA=100,101,99;subjB=50,51,49".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from fsbench.errors import Unsupported, WorkloadFailed
from fsbench.workloads.base import Declared, Measurement, Target


@dataclass
class FakeWorkload(Declared):
    name: str = "fake"
    description: str = "fake workload for tests: values from FSBENCH_FAKE_VALUES"
    cache: str = "none"  # a field: tests give each state
    # Few, small files: no share of the file budget needed (see runner.space_share).
    space_group: str | None = None
    min_sample_s: float = 0.0  # one run per sample: tests count calls exactly
    warmup: int = 0
    calls: list[tuple[str, str]] = field(default_factory=list)  # (phase, subject) in order
    _counters: dict[str, int] = field(default_factory=dict)

    def _values(self, subject: str) -> list[float]:
        spec = os.environ.get("FSBENCH_FAKE_VALUES", "")
        for part in spec.split(";"):
            name, _, vals = part.partition("=")
            if name.strip() == subject:
                return [float(v) for v in vals.split(",") if v.strip()]
        return [100.0]

    def params(self, target: Target) -> dict[str, Any]:
        return {"engine": "fake", "file_size": target.size}

    def prepare(self, target: Target) -> None:
        self.calls.append(("prepare", target.subject_id))

    def run(self, target: Target) -> Measurement:
        self.calls.append(("run", target.subject_id))
        vals = self._values(target.subject_id)
        if vals and vals[0] == -1:
            raise WorkloadFailed("fake failure: No space left on device")
        if vals and vals[0] == -2:
            raise Unsupported("fake: operation not supported by this file system")
        i = self._counters.get(target.subject_id, 0)
        self._counters[target.subject_id] = i + 1
        value = vals[i % len(vals)]
        nbytes = target.size
        return Measurement(value=value, seconds=nbytes / 2**20 / value, bytes=nbytes, ops=1)
