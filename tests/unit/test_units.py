"""One formatter for sizes, ratios and values: every renderer's labels come from it."""

from __future__ import annotations

import pytest

from fsbench import units
from fsbench.lab.backing import format_size
from fsbench.units import fmt_ratio, size_text
from fsbench.workloads.iozone import human_size


@pytest.mark.parametrize(
    ("n", "text"),
    [(512, "512 B"), (64 * 1024, "64 KiB"), (3 * 2**19, "1.5 MiB"), (2**30, "1 GiB"),
     (int(1.02 * 2**30), "1 GiB"), (5 * 2**40, "5 TiB")],
)  # fmt: skip
def test_sizes(n: int, text: str) -> None:
    assert units.size_text(n) == text
    # The old names are the same function: no renderer can drift.
    assert format_size(n) == size_text(n) == human_size(n) == text


def test_tags_ratios_values_and_intervals() -> None:
    assert [units.size_tag(n) for n in (64 * 1024, 2**20, 2**31, 1000)] == [
        "64k", "1m", "2g", "1000",
    ]  # fmt: skip
    assert [fmt_ratio(r) for r in (0.0512, 1.234, 12.6, None, float("inf"))] == [
        "0.051×", "1.23×", "12.6×", "–", "–",
    ]  # fmt: skip
    assert [units.fmt_value(v) for v in (1234.5, 12.34, 1.2345, None)] == [
        "1,234", "12.3", "1.23", "–",
    ]  # fmt: skip
    assert units.fmt_value(3.14159, 1) == "3.1"
    assert units.fmt_halfwidth(100.0, (95.0, 105.0)) == "±5%"
    assert units.fmt_halfwidth(100.0, (92.0, 105.0)) == "±8%"  # under 10 %: the larger side
    # A log-scale interval, visibly asymmetric: each side, never a "±" below 0.
    assert units.fmt_halfwidth(100.0, (28.0, 359.0)) == "−72 +259%"
    assert units.fmt_halfwidth(100.0, None) == ""
