"""Named records and choosing among them. `by_name` is the one form of a table of records
(formats, drivers, transports, aging profiles, placements, kernels). `parse_choices` is the
one grammar of a comma list of names from a fixed set (`--age`, `--placement`,
`--trace-probes`): names are taken in the order given, case-insensitively; an empty item, an
unknown name or a name given twice is refused with one line (a UsageError)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from fsbench.errors import UsageError


class Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Named)


def by_name(*records: R) -> dict[str, R]:
    """The records keyed by their names, in the order given (the order help and doctor list
    them in). A name twice is a mistake in the table, refused at import, where a dict
    comprehension would silently keep the last."""
    table: dict[str, R] = {}
    for r in records:
        if r.name in table:
            raise ValueError(f"two records are named {r.name!r}")
        table[r.name] = r
    return table


def parse_choices(
    flag: str, text: str, choices: Iterable[str], what: str, example: str
) -> list[str]:
    """`text` ("none,light") -> its names; `what` names one in the message ("profile")."""
    allowed = list(choices)
    names = [x.strip().lower() for x in text.split(",")]
    listed = "|".join(allowed)
    if not all(names):
        raise UsageError(f"{flag} {text!r}: give a comma list of {listed}, e.g. {example}")
    for n in names:
        if n not in allowed:
            raise UsageError(f"{flag} {n!r}: not one of {listed}")
    if len(set(names)) != len(names):
        raise UsageError(f"{flag} {text!r}: name each {what} once")
    return names
