"""The one style table: what each outcome a reader sees looks like in every output.

An outcome is decided once (report/model/comparison.py, report/model/); a renderer looks it up here
for its glyph (every output), its terminal colour (rich), its page class (CSS) and its words. No
renderer reads one of these back from another's rendering.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Look:
    glyph: str  # beside a ratio ('' none)
    colour: str  # the terminal's rich style
    css: str  # the page's class
    words: str  # what it says, in words (the page's hover, the answer's phrases)


# Outcomes of a comparison (comparison.Comparison.outcome), and of a cell that has none.
OUTCOMES: dict[str, Look] = {
    "better": Look("▲", "green", "better", "better"),
    "worse": Look("▼", "red", "worse", "worse"),
    "same": Look("≈", "yellow", "ns", "no difference (within the run's equivalence band)"),
    "open": Look("?", "dim", "dim", "not separated"),
    "none": Look("?", "dim", "dim", "too few samples to judge"),
    # A cell without a comparison: the table's baseline, a subject not ranked, nothing to show.
    "baseline": Look("", "dim", "dim", "baseline"),
    "unranked": Look("", "red", "bad", "not ranked"),
    "empty": Look("", "dim", "dim", ""),
    # A figure among others: the best of its row (★), or one like any other.
    "best": Look("★", "bold green", "best", "the best of its row"),
    "plain": Look("", "", "", ""),
}
# A comparison's outcomes (the five a verdict can give).
VERDICT_OUTCOMES = ("better", "worse", "same", "open", "none")

# Why a result got no more samples (Result.stopped): the mark after its sample count, and its
# words (the page's hover).
STOP_MARKS = {"settled": "✓", "budget": "…", "max-repeat": "…", "planned": "…"}
STOP_WORDS = {
    "settled": "sampling stopped: its answer was settled",
    "budget": "sampling stopped by the time budget with the answer still open",
    "max-repeat": "sampling stopped at --max-repeat with the answer still open",
    "planned": "sampling stopped at the samples its variance planned, the answer still open",
}

# A result's cache state as every table names it.
CACHE_TEXT = {
    "cold-verified": "cold ✓",
    "cold-unverified": "cold ?",
    "warm": "warm",
    "direct": "direct",
    "direct-not-honored": "direct ✗",
    "n/a": "",
}


def glyph(outcome: str) -> str:
    return OUTCOMES[outcome].glyph


def colour(outcome: str) -> str:
    return OUTCOMES[outcome].colour


def css(outcome: str) -> str:
    return OUTCOMES[outcome].css


def words(outcome: str) -> str:
    return OUTCOMES[outcome].words
