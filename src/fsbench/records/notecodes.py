"""A result's notes as data: each a code and its parameters (`Note`), worded here once.

Where a note is measured (stats.py: a wide interval, a high CV, outliers; aggregate.py: mixed
cache states, samples too short; the probes' and workloads' sample flags; the integrity check;
an emulated VM) it is stored as a `Note` in `Result.notes`. Every output (terminal, HTML,
markdown, CSV) words it with `words` and groups it by its kind's `level`, so no renderer
reads a sentence back. Results of schema 3 and older carry only sentences (`flags`,
`warnings`): `legacy` turns each into a note once, when the result is loaded.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsbench.units import fmt_ratio

# "shown": told beside its subject in every output, --verbose or not (a finding, not a caveat).
Level = Literal["counted", "detail", "note", "shown"]


class Note(BaseModel):
    """One note on a result: its code (a kind of `KINDS`, or a sample flag's own code such as
    'direct-not-honored'), its parameters, and for a note its samples carried, on how many of
    how many (`samples`: [k, n])."""

    model_config = ConfigDict(extra="allow", frozen=True)

    code: str
    params: dict[str, Any] = Field(default_factory=dict)
    samples: tuple[int, int] | None = None


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


class _Template(string.Formatter):
    """A kind's words as a template of its parameters: `{cv:pct}` a fraction in per cent
    ('12.3 %'), `{states:sorted}` a collection sorted; any other field as str.format has it."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "pct":
            return _pct(value)
        if format_spec == "sorted":
            return str(sorted(value))
        return super().format_field(value, format_spec)


_TEMPLATE = _Template()


def _indices(ix: list[int]) -> str:
    shown = ", ".join(str(i) for i in ix[:10]) + (", …" if len(ix) > 10 else "")
    return f"index {shown}" if len(ix) == 1 else f"indices {shown}"


def _outliers(p: dict[str, Any]) -> str:
    ix, n = list(p["indices"]), p["n"]
    what = "1 outlier" if len(ix) == 1 else f"{len(ix)} outliers"
    return f"{what} among {n} samples ({_indices(ix)}): other activity may have disturbed them"


def _placement_split(p: dict[str, Any]) -> str:
    def group(name: str) -> str:
        lo, hi = p[name]
        share = p.get(f"same_cpu_{name}")
        on = "" if share is None else f", daemon on the app's CPU {share * 100:.0f} % of the time"
        return f"{p[f'n_{name}']} at {lo:,.4g}–{hi:,.4g} {p.get('unit', '')}".rstrip() + on

    slow, fast = p.get("same_cpu_slow"), p.get("same_cpu_fast")
    if slow is None or fast is None:
        cause = "where the daemon ran was not seen"
    elif abs(slow - fast) >= 0.5:
        cause = "the scheduler's placement of the daemon splits them"
    else:
        cause = "not where the daemon ran (alike in both groups)"
    return (
        f"samples in two groups under --placement free: {group('slow')}; {group('fast')}: "
        f"{cause}; --placement same or split pins it"
    )


def _round_moved(p: dict[str, Any]) -> str:
    low = fmt_ratio(p["low"]).rstrip("×")
    return (
        f"in round {p['round']} every subject's sample moved the same way ({low}–"
        f"{fmt_ratio(p['high'])} of its own median): the machine changed speed for that round"
    )


def _round_shared(p: dict[str, Any]) -> str:
    return _round_moved(p) + "; it widens this table's intervals without favouring a subject"


def _round_set_aside(p: dict[str, Any]) -> str:
    return (
        _round_moved(p) + ", so its samples were set aside and the round measured again "
        "(results.json: set_aside)"
    )


def _would_close(p: dict[str, Any]) -> str:
    more = p["more"]
    how = f"--time-budget {p['budget']}" if p.get("budget") else f"--repeat {p['repeat']}"
    return (
        f"not separated from {p['against']}: about {more} more sample{'s' if more > 1 else ''} "
        f"a side would decide it if the ratio holds ({how})"
    )


@dataclass(frozen=True)
class Kind:
    code: str
    level: Level = "note"
    # Counted kinds: the per-table line, with {k} subjects of {n} and the interval {target}.
    count: str = ""
    # A template of the parameters (_Template), or a function of them where the words need
    # more than filling in; None: a flag, 'code (k/n): detail'.
    words: str | Callable[[dict[str, Any]], str] | None = None
    legacy: str = ""  # how a schema ≤ 3 sentence of this kind starts (a regex)


KINDS: tuple[Kind, ...] = (
    Kind(
        "ci-wide",
        "counted",
        "CI wider than {target} for {k} of {n} subjects",
        "confidence interval is ±{halfwidth_rel:pct} of the median, wider than the "
        "{target_rel:pct} target",
        r"confidence interval is ",
    ),
    Kind(
        "cv-high",
        "counted",
        "CV > 10 % for {k}",
        "CV is {cv:pct} of the mean: the machine may be busy",
        r"CV is ",
    ),
    Kind("outliers", "counted", "outliers in {k}", _outliers, r"\d+ outliers? among "),
    Kind(
        "one-sample",
        words="only 1 sample: no confidence interval; use --repeat 3 or more",
        legacy=r"only 1 sample",
    ),
    Kind("no-samples", words="no samples: nothing was measured", legacy="no samples"),
    Kind(
        "too-short",
        words="samples last only {seconds:.2f} s (under the ~{need_s:g} s a sample needs): "
        "too short to trust; raise {grow}",
        legacy=r"samples last only ",
    ),
    Kind(
        "mixed-cache",
        words="mixed cache states over samples: {states:sorted}",
        legacy=r"mixed cache states",
    ),
    Kind(
        "integrity-failed",
        words="integrity-failed: {problem} (not ranked)",
        legacy=r"integrity-failed",
    ),
    Kind("placement-split", "shown", words=_placement_split, legacy=r"samples in two groups under"),
    Kind(
        "round-shared",
        "counted",
        "a round moved all {k} alike",
        _round_shared,
    ),
    Kind(
        "round-set-aside",
        "counted",
        "a round moved all {k} alike: measured again",
        _round_set_aside,
    ),
    Kind("would-close", "shown", words=_would_close),
    Kind(
        "sample-set-aside",
        "counted",
        "a sample set aside in {k}",
        "sample {sample} ran at {ratio:.2f}x of this subject's others, far below their spread "
        "(a stall of this subject alone): set aside and measured again (results.json: "
        "set_aside)",
    ),
    Kind(
        "first-round-slow",
        "counted",
        "round 1 ran slower for all {k}",
        "round {round} ran slower for every subject of this table ({low}–{high} of each "
        "one's later median), after its warm-up: a first touch the warm-up did not pay; "
        "it widens the intervals without favouring a subject",
    ),
    # The /proc probes' bookkeeping: a thread that came or went during a sample (flags
    # 'kthread-vanished', 'daemon-threads-exited', 'app-threads-started', ...).
    Kind("kthread-vanished", "detail"),
    Kind("daemon-threads", "detail"),
    Kind("app-threads", "detail"),
)
_BY_CODE = {k.code: k for k in KINDS}


def kind(code: str) -> Kind | None:
    """A code's kind: its own, or the family it starts with ('daemon-threads-exited')."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    return next((k for k in KINDS if k.words is None and code.startswith(k.code + "-")), None)


def level(note: Note) -> Level:
    k = kind(note.code)
    return k.level if k is not None else "note"


def words(note: Note) -> str:
    """The note in words, the same in every output. An older run's note is its stored
    sentence (`params.text`) without the advice it carried (the report says one advice)."""
    if "text" in note.params:
        return str(note.params["text"])
    k = kind(note.code)
    if k is not None and isinstance(k.words, str):
        return _TEMPLATE.vformat(k.words, (), note.params)
    if k is not None and k.words is not None:
        return k.words(note.params)
    label = note.code
    if note.samples is not None:
        label += f" ({note.samples[0]}/{note.samples[1]} samples)"
    detail = note.params.get("detail", "")
    return f"{label}: {detail}" if detail else label


def flag_note(flag: str, samples: tuple[int, int] | None = None) -> Note:
    """A sample flag ('code', 'code:detail') as a note: the code is what precedes ':'."""
    code, _, detail = flag.partition(":")
    return Note(
        code=code.strip(), params={"detail": detail.strip()} if detail else {}, samples=samples
    )


def collapse(per_sample: list[list[str]]) -> list[Note]:
    """One note per kind of sample flag, on how many samples it was ('direct-not-honored
    (3/3 samples): …'), with the first sample's detail."""
    first: dict[str, str] = {}
    count: dict[str, int] = {}
    for flags in per_sample:
        for code in {f.split(":", 1)[0] for f in flags}:
            count[code] = count.get(code, 0) + 1
        for f in flags:
            first.setdefault(f.split(":", 1)[0], f)
    n = len(per_sample)
    return [
        flag_note(f, None if count[code] == n == 1 else (count[code], n))
        for code, f in first.items()
    ]


# --- results of schema 3 and older: sentences and flags, read once into notes ---------------

# The advice older sentences carried, dropped: the report gives one advice per table (a fixed
# --repeat turns adaptive sampling off, so "raise --repeat" was wrong for the default run).
_OLD_ADVICE = re.compile(
    r"; (close other programs or raise --repeat|raise --repeat.*|re-run on a.*)$"
)
_OLD_FLAG = re.compile(r"([a-z][a-z0-9-]*)(?: \((\d+)/(\d+) samples\))?(?::\s*(.*))?$", re.S)


def legacy(text: str) -> Note:
    """A stored sentence or collapsed flag of a schema ≤ 3 result as a note: a kind's sentence
    keeps its words (`params.text`, advice dropped); a flag its code, samples and detail."""
    for k in KINDS:
        if k.legacy and re.match(k.legacy, text):
            return Note(code=k.code, params={"text": _OLD_ADVICE.sub("", text)})
    m = _OLD_FLAG.match(text)
    if m is None:
        return Note(code="note", params={"text": text})
    code, k_, n_, detail = m.groups()
    samples = (int(k_), int(n_)) if k_ else None
    return Note(code=code, params={"detail": detail} if detail else {}, samples=samples)
