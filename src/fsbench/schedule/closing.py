"""What would close a comparison left open: the note a finished run puts on it.

A user told "not separated" needs to know whether more time would answer: the samples the
comparison's interval needs to exclude 1 if its ratio holds (fsbench.stats.decide.closing,
planned as the runner plans) and the --time-budget (or --repeat) that buys them at what the
cells' samples cost in this run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fsbench.records.notecodes import Note, words
from fsbench.records.schema import Result
from fsbench.stats import decide


def closing_notes(
    results: Mapping[tuple[str, str], Result],
    order: Sequence[str],
    cost: Mapping[tuple[str, str], float],
    ran_s: float,
) -> None:
    """Note on each result whose comparison with its baseline is open after it ran out of
    budget or rounds what would close it (`would-close`); ``ran_s``: the seconds the budget
    counted (or the budget, if more), which the suggested budget adds the samples' cost to."""
    for key, c in decide.closing(list(results.values()), order, cost).items():
        res = results[key]
        if res.stopped not in ("budget", "repeat", "max-repeat") or not c.more:
            continue
        params: dict[str, object] = {"against": c.against, "more": c.more}
        if res.stopped == "budget" and c.seconds is not None:
            params["budget"] = int(math.ceil((ran_s + c.seconds) / 10.0) * 10)
        else:
            params["repeat"] = len(res.samples) + c.more
        note = Note(code="would-close", params=params)
        if note not in res.notes:  # finish runs a second time after an interrupt
            res.notes.append(note)
            res.warnings.append(words(note))
