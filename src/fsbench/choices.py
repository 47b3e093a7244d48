"""A comma list of names from a fixed set: the one grammar of `--age`, `--placement` and
`--trace-probes`. Names are taken in the order given, case-insensitively; an empty item, an
unknown name or a name given twice is refused with one line (a UsageError)."""

from __future__ import annotations

from collections.abc import Iterable

from fsbench.errors import UsageError


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
