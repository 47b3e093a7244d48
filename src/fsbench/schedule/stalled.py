"""A round that moved every subject of a table the same way: measured again, or named.

When the machine changes speed for a round (another job, a host stall), every subject of a
table moves the same way but not by the same amount: in run 20261127-110521 one round took
ext4 to 0.66x of its median and exfat-fuse to 0.26x, and the unpaired intervals of that
table went 1,280x wide. Such a round says nothing about the subjects, so the runner sets its
samples aside and measures that round again, by a rule fixed before the run:

- the round is found by fsbench.stats.serial.stalls (at least 4 subjects with 3 samples, every
  one moved the same way from its own median, by 1.22x or more on average); the rule reads
  rounds, never subjects, so in an A/A table it favours no one (bench/verdict_designs.py);
- only a round that made every subject worse (a stall slows; nothing speeds everyone up);
- at most three rounds per table (a machine that stalls in every round is named, not chased);
- only when the round's samples fit the time budget again (a fixed --repeat always fits);
  otherwise the round stays in and is named (the `round-shared` note).

The samples set aside stay in the result (`Result.set_aside`, each with its round) and the
note `round-set-aside` says which round and by how much; no interval uses them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from fsbench.records.notecodes import Note, words
from fsbench.records.schema import Result, Sample
from fsbench.stats import serial
from fsbench.units import fmt_ratio

# Rounds measured again per table, at most (simulated: 1 left 19 % of a default-like run's
# tables with an interval wider than 5x under 5 % stalled rounds, 3 left 10 %; docs/verdicts.md).
REDO_PER_TABLE = 3


@dataclass(frozen=True)
class Aside:
    pos: int  # the round's index in the cells' kept samples when it was set aside
    round: int  # the round, 0-based, counting every round the table ran
    stall: serial.Stall


@dataclass
class Stalled:
    """The runner's record of rounds set aside: which cells owe a sample, and per table the
    rounds set aside, in the order they were."""

    owed: set[tuple[str, str]] = field(default_factory=set)
    done: dict[str, list[Aside]] = field(default_factory=dict)
    # (subject, workload) -> its samples set aside alone (slow_sample), at most SLOW_PER_CELL.
    alone: dict[tuple[str, str], int] = field(default_factory=dict)
    # (subject, workload) -> how many samples the cell kept when its latest was set aside
    # alone: while it keeps only these, that sample is owed (restore).
    kept: dict[tuple[str, str], int] = field(default_factory=dict)

    def look(
        self,
        wid: str,
        table: Iterable[Result],
        fits: Callable[[list[Result]], bool],
    ) -> bool:
        """After a round of table ``wid``: set aside a round that moved every subject alike,
        if the rule allows and its samples fit again (``fits``: the cells to re-measure).
        True: cells now owe a sample (Stalled.owed)."""
        table = list(table)
        if len(self.done.get(wid, [])) >= REDO_PER_TABLE:
            return self._look_alone(wid, table, fits)
        cells = [r for r in table if r.status == "ok" and len(r.samples) >= 3]
        # Only a round that made every subject worse: that is what a machine's stall does
        # (nothing runs faster for everyone), and from a median that two stalled rounds of
        # three pulled down, the one good round looks "moved up": it must not be dropped.
        better = {r.higher_is_better for r in cells}
        if len(better) != 1:
            return False
        worse = -1 if better.pop() else 1
        found = serial.stalls([r.samples for r in cells], worse)
        if not found:
            return self._look_alone(wid, table, fits)
        # The deepest, if several: the one that moved the table most.
        st = max(found, key=lambda s: abs(s.depth))
        hit = [r for r in cells if len(r.samples) > st.round]
        if not fits(hit):
            return False
        aside = Aside(st.round, self.round_of(wid, st.round), st)
        for r in hit:
            value = r.samples.pop(st.round)
            if len(r.sample_details) > st.round:
                kept = r.sample_details.pop(st.round)
            else:
                kept = Sample(value=value, seconds=0.0)
            kept.extra["round"] = aside.round + 1
            r.set_aside.append(kept)
            self.owed.add((r.subject, wid))
        self.done.setdefault(wid, []).append(aside)
        return True

    def _look_alone(
        self, wid: str, table: list[Result], fits: Callable[[list[Result]], bool]
    ) -> bool:
        """After a round: a cell with one sample far slower than all its others (slow_sample)
        sets it aside and is measured again, once per cell. One stalled sample of 736 MiB/s
        among xfs's 3,136-4,126 took its cold read against ext4 to x0.041-12.7; one of
        lowntfs-3g's at 148 MiB/s among ~420, its second, went unjudged when only the newest
        was, and its interval went 11.9x wide."""
        slow = {
            id(r): pos for r in table
            if r.status == "ok" and self.alone.get((r.subject, wid), 0) < SLOW_PER_CELL
            and (pos := slow_sample(r.samples, r.higher_is_better)) is not None
        }  # fmt: skip
        hit = [r for r in table if id(r) in slow]
        if not hit or not fits(hit):
            return False
        for r in hit:
            pos = slow[id(r)]
            value = r.samples.pop(pos)
            kept = (
                r.sample_details.pop(pos)
                if len(r.sample_details) > pos
                else Sample(value=value, seconds=0.0)
            )
            kept.extra["alone"] = pos + 1  # the sample's place among the cell's kept ones
            r.set_aside.append(kept)
            self.kept[(r.subject, wid)] = len(r.samples)
            self.alone[(r.subject, wid)] = self.alone.get((r.subject, wid), 0) + 1
            self.owed.add((r.subject, wid))
            ratio = value / float(np.exp(np.median(np.log(r.samples))))
            _add(r, Note(code="sample-set-aside", params={"sample": pos + 1, "ratio": ratio}))
        return True

    def restore(self, results: dict[tuple[str, str], Result]) -> None:
        """Put back the samples of a round set aside that was not measured again (the run
        was interrupted first): a cell keeps every sample it has, and a table whose round no
        cell measured again has nothing set aside."""
        for sid, wid in sorted(self.owed):
            res = results.get((sid, wid))
            alone = [k for k in (res.set_aside if res else []) if "alone" in k.extra]
            if res is not None and alone and self.kept.get((sid, wid)) == len(res.samples):
                k = alone[-1]  # its own sample set aside, not measured again: put back
                res.set_aside.remove(k)
                pos = int(k.extra.pop("alone")) - 1  # at its place among the cell's samples
                res.samples.insert(pos, k.value)
                if len(res.sample_details) >= pos:
                    res.sample_details.insert(pos, k)
                # Nothing was set aside after all: the note said it was, and measured again.
                for n in [n for n in res.notes if n.code == "sample-set-aside"]:
                    res.notes.remove(n)
                    if (w := words(n)) in res.warnings:
                        res.warnings.remove(w)
                continue
            asides = self.done.get(wid, [])
            if res is None or not asides:
                continue
            a = asides[-1]  # cells owe only the latest: a redo round comes before any other
            back = [k for k in res.set_aside if k.extra.get("round") == a.round + 1]
            for k in back:
                res.set_aside.remove(k)
                k.extra.pop("round", None)
                res.samples.insert(a.pos, k.value)
                if len(res.sample_details) >= a.pos:
                    res.sample_details.insert(a.pos, k)
            if not any(a.round + 1 == k.extra.get("round") for r in results.values()
                       if r.workload_id == wid for k in r.set_aside):  # fmt: skip
                asides.remove(a)
        self.owed.clear()

    def round_of(self, wid: str, pos: int) -> int:
        """The 0-based round of a cell's kept sample at ``pos``: each round set aside at or
        before it shifts it by one (undone latest first)."""
        for a in reversed(self.done.get(wid, [])):
            if pos >= a.pos:
                pos += 1
        return pos

    def note(self, tables: dict[str, dict[str, Result]]) -> None:
        """Name on each subject of a table the round set aside (`round-set-aside`) and any
        round left in that moved every subject alike (`round-shared`): it is why that
        table's intervals are wide (fsbench.stats.serial.stalls)."""
        for wid, table in tables.items():
            ok = [r for r in table.values() if r.status == "ok" and r.samples]
            for a in self.done.get(wid, []):
                for r in ok:
                    if any(k.extra.get("round") == a.round + 1 for k in r.set_aside):
                        _add(r, _note("round-set-aside", a.round + 1, a.stall))
            first = first_round_slow(ok)
            if first is not None:
                for r in ok:
                    _add(r, first)
            for st in serial.stalls([r.samples for r in ok]):
                note = _note("round-shared", self.round_of(wid, st.round) + 1, st)
                for r in ok:
                    if len(r.samples) > st.round:
                        _add(r, note)


def _note(code: str, rnd: int, st: serial.Stall) -> Note:
    return Note(code=code, params={"round": rnd, "low": st.low, "high": st.high})


def _add(r: Result, note: Note) -> None:
    # `not in`: finish runs a second time after an interrupt.
    if note not in r.notes:
        r.notes.append(note)
        r.warnings.append(words(note))


# Round 1 is named when every subject's first sample fell below its later ones' median, by
# this much on average (the warm-up is meant to leave it like the rest: Sampler.warm_up).
FIRST_ROUND_LOG = math.log(1.10)


def first_round_slow(table: list[Result]) -> Note | None:
    """The note that round 1 ran slower for every subject of a table (2 or more subjects with
    3 or more samples each), None when it did not: a first touch the warm-up left unpaid."""
    cells = [r for r in table if len(r.samples) >= 3 and min(r.samples) > 0]
    if len(cells) < 2 or len(cells) < len(table):
        return None
    dev = []
    for r in cells:
        d = math.log(r.samples[0]) - float(np.median(np.log(r.samples[1:])))
        dev.append(d if r.higher_is_better else -d)
    if max(dev) >= 0 or -sum(dev) / len(dev) < FIRST_ROUND_LOG:
        return None
    ratios = [math.exp(d) for d in dev]
    return Note(
        code="first-round-slow",
        params={"round": 1, "low": fmt_ratio(min(ratios)), "high": fmt_ratio(max(ratios))},
    )


# A cell's slowest sample is set aside alone when it ran slower than the median of its other
# samples by at least half and by SLOW_SD of their spread: a stall of one subject, which the
# round rule (serial.stalls, every subject at once) does not see. Slower only (a stall
# slows), judged against at least SLOW_MIN others, and once per cell.
SLOW_LOG = math.log(2.0)
SLOW_SD = 5.0
SLOW_MIN = 3
SLOW_PER_CELL = 1


def slow_sample(samples: list[float], higher_is_better: bool) -> int | None:
    """The place of the cell's slowest sample when it ran far slower than all its others
    (above), None otherwise. It is judged at every look, wherever it stands: a stall in a
    cell's second sample, before there were others to judge it by, is found once there are."""
    if len(samples) <= SLOW_MIN or min(samples) <= 0:
        return None
    logs = np.log(np.asarray(samples, dtype=float))
    # Judging the slowest alone is judging every sample against the others (leave-one-out)
    # and taking the one furthest below them: the slowest lies furthest below its others'
    # median, and when a faster one (j) passes, so does the slowest (i). Either j lies below
    # the mean of the samples but i and j, and then the others of i spread less than the
    # others of j (the same samples, with j in place of the further-off i); or it does not,
    # and then j lies less than one sd of its others below their median (a median is within
    # one sd of the mean), and does not pass (a test tries both on random cells).
    i = int(np.argmin(logs) if higher_is_better else np.argmax(logs))
    others = np.delete(logs, i)
    dev = float(np.median(others)) - float(logs[i])
    if not higher_is_better:
        dev = -dev
    return i if dev > max(SLOW_LOG, SLOW_SD * float(others.std(ddof=1))) else None
