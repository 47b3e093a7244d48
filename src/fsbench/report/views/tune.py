"""The tune record in the terminal (one screen) and on the page (a table and a bar chart of
each change's gain with its interval). Reads `run.tune` only (fsbench.tunerecord); what is
printed of a change, the best one and the one to use are the model's (report/model/tune.py).

A change's gain is the confirmed one (measured again on fresh samples) where it was confirmed,
the selecting run's beside it; a change not separated gets no share of the gap, only the words
that say so. Every figure is a geometric mean or a ratio of them, with its interval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from fsbench.report.model import (
    EXPLAINED_ENOUGH,
    TuneChange,
    TuneRecord,
    best_change,
    confidence_text,
    recommended,
    shown,
    tune_of,
)
from fsbench.report.style import colour, css
from fsbench.units import fmt_ratio, fmt_value

if TYPE_CHECKING:
    from fsbench.report.model import Run
    from fsbench.report.plots.figure import Plot

SAFETY = {
    "safe": "safe",
    "trades-durability": "UNSAFE: durability",
    "changes-semantics": "UNSAFE: semantics",
}


def pct(x: float | None) -> str:
    return "–" if x is None else f"{round(100 * x)} %"


def placement(c: TuneChange) -> str:
    """The change's placement where it is one (the untuned subject's, pinned as compare pins
    it, or free in tunes stored before, is no change: "free")."""
    return c.placement if c.placement not in ("free", c.untuned_placement) else "free"


def where(c: TuneChange) -> str:
    """The workload column's tag: a placement that is a change, a VM the change ran in."""
    tags = [placement(c)] if placement(c) != "free" else []
    if c.vm:
        tags.append(f"VM {c.vm.split(' ')[0]}" + (", emulated" if c.emulated else ""))
    return f" [{'; '.join(tags)}]" if tags else ""


def label(c: TuneChange) -> str:
    if c.name == "combination":
        return "together: " + " + ".join(c.remedies)
    other = _driver(c.subject) != _driver(c.untuned)
    return f"{c.name} ({c.subject})" if other else c.name  # another driver: say which


def _driver(subject: str) -> str:
    """The driver of a subject id ("exfat-fuse (mkfs -c 1M)", "ntfs-3g:big_writes")."""
    return subject.split(" (", 1)[0].split(":", 1)[0]


# The centres column: the untuned subject's geometric mean and the changed one's.
CENTRES = "untuned → changed"

# A change that closes no share of the gap, in words (its outcome's).
NO_SHARE = {
    "open": "none: not separated",
    "same": "none: the same",
    "worse": "none: slower",
    "none": "none: not compared",
}


def share(c: TuneChange) -> str:
    """The share of the gap a ▲ closes; for any other outcome the words that say why none."""
    x = shown(c)
    if x.outcome != "better":
        return NO_SHARE.get(x.outcome, "none")
    return pct(x.gap_closed)


def gap_lines(t: TuneRecord) -> list[str]:
    out = []
    for g in t.gaps:
        if not g.subject_center or not g.reference_center:
            continue
        slower = f" ({fmt_ratio(g.slower)} slower)" if g.slower and g.slower > 1 else ""
        top = next((f for f in g.factors if f.get("first")), g.factors[0] if g.factors else None)
        why = f"; first factor: {top.get('line') or top['brief']}" if top is not None else ""
        covered = (
            f"; explained: {pct(g.explained)} of the gap (the largest factor's share; factors "
            "overlap, so they are not added)"
            if g.explained is not None
            else "; explained: 0 % of the gap (no factor stands for its time)"
        )
        if not (g.slower and g.slower > 1):  # the subject as fast or faster: no gap to close
            covered = (
                f"; no gap: {t.subject} is not the slower here (the remedies for what a gap of "
                "this kind usually comes from were candidates all the same: a change may make "
                "it faster still)"
            )
        elif (g.explained or 0.0) < EXPLAINED_ENOUGH:
            rest = 1.0 - max(0.0, g.explained or 0.0)
            covered += (
                f"; {pct(rest)} unaccounted for: the remedies for its usual causes were "
                "candidates (measured below, or skipped with the reason)"
            )
        out.append(
            f"{g.workload}: {t.subject} {fmt_value(g.subject_center)} {g.unit} against "
            f"{g.reference} {fmt_value(g.reference_center)}: {g.cell}{slower}{why}{covered}"
        )
    return out


def selecting(c: TuneChange) -> str:
    """The selecting run's cell, beside a confirmed one ('' when there is no confirmation)."""
    return c.cell if c.confirmation is not None and c.name != "combination" else ""


def measured(c: TuneChange) -> str:
    """Which samples the gain is from: confirmed (the selecting run's beside it), or the
    selecting run only."""
    if c.name == "combination":
        return "fresh samples" if c.confirmation else "–"
    if c.confirmation is None:
        return "selecting run only"
    return f"confirmed; selecting run {c.cell}"


def centres(c: TuneChange) -> str:
    """The two centres the printed ratio divides: '141 → 1,128 MiB/s' (untuned → changed)."""
    x = shown(c)
    if not x.untuned_center or not x.center:
        return "–"
    return f"{fmt_value(x.untuned_center)} → {fmt_value(x.center)} {c.unit}".rstrip()


# The changes' table, as every output heads it.
COLUMNS = ("change", "workload", CENTRES, "gain (verdict)", "measured", "gap closed", "safety")


def changes_table(t: TuneRecord) -> Table:
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    for c in [*t.changes, *t.combination]:
        x = shown(c)
        table.add_row(
            label(c),
            Text(c.workload + where(c)),  # text: "[same]" is no markup
            centres(c),
            Text(x.cell or "–", style=colour(x.outcome)),
            Text(measured(c), style="" if c.confirmation else "dim"),
            share(c),
            Text(SAFETY.get(c.safety, c.safety), style="bold red" if c.safety != "safe" else ""),
        )
    return table


def lab_lines(t: TuneRecord) -> list[str]:
    """What the lab changed for a change, once per change."""
    seen = dict.fromkeys(
        f"lab for {label(c)}: {c.lab}" for c in [*t.changes, *t.combination] if c.lab
    )
    return list(seen)


def gain_words(c: TuneChange) -> str:
    """'12.2× faster (12.2× 8.1–18.4 ▲; selecting run 14.0× 9.9–19.8 ▲)': the confirmed gain
    first, the selecting run's beside it."""
    x = shown(c)
    beside = f"; selecting run {c.cell}" if selecting(c) and c.cell != x.cell else ""
    return f"{fmt_ratio(x.gain)} faster ({x.cell}{beside})"


def answer_lines(t: TuneRecord) -> list[Text]:
    out: list[Text] = []
    single = best_change(t.changes)
    if single is not None:
        closes = shown(single).gap_closed is not None
        # Pinning closes no share: the gap itself is measured pinned, as compare measures it.
        tail = f", {share(single)} of the gap closed" if closes else (
            " (no share of the gap: the gap is measured pinned, as compare measures it)"
            if single.untuned_placement == "free" else "")  # fmt: skip
        head = "closes most of the gap" if closes else "the largest gain"
        out.append(Text(f"{head}, confirmed on fresh samples: {single.name} on "
                        f"{single.workload}: {gain_words(single)}{tail}", "green"))  # fmt: skip
    for c in t.combination:
        vs = f"; {c.versus}" if c.versus else "; not measured against the best change alone"
        out.append(Text(f"together ({' + '.join(c.remedies)}) on {c.workload}: {c.cell}, "
                        f"gap closed: {share(c)}{vs}"))  # fmt: skip
    out += emulated_lines(t)
    use = recommended(t)
    if use is None:
        out.append(Text("no change was decidedly faster (▲) than the untuned subject, both in the "
                        "selection and on fresh samples: none to recommend"))  # fmt: skip
        return out
    unsafe = f" ({SAFETY[use.safety]}: {use.change})" if use.safety != "safe" else ""
    out.append(Text(f"to use {label(use)}{unsafe}:", "bold red" if unsafe else "green"))
    out += [Text(f"  {u}") for u in use.use]
    return out


def emulated_lines(t: TuneRecord) -> list[Text]:
    """Changes measured in an emulated VM, once each: their verdicts beside the untuned subject
    in that VM, that they are not representative, and the command to use them."""
    out: list[Text] = []
    for name in dict.fromkeys(c.name for c in t.changes if c.emulated):
        mine = [c for c in t.changes if c.name == name]
        cells = ", ".join(f"{c.workload} {c.cell}" for c in mine)
        out.append(Text(f"{label(mine[0])}: {cells} in an emulated VM beside {mine[0].untuned}: "
                        "not representative; measure it under KVM before choosing it; to use "
                        "it:", "yellow"))  # fmt: skip
        out += [Text(f"  {u}") for u in mine[0].use]
    return out


def terminal(run: Run) -> list[RenderableType]:
    t = tune_of(run)
    if t is None:
        return []
    used = f", used {t.used_s:.0f} s of {t.budget_s:.0f} s" if t.used_s and t.budget_s else ""
    out: list[RenderableType] = [
        Text(f"fsbench tune {t.subject} (against {t.against}{used})", style="bold")
    ]
    out += [Text(f"  {t.measured_as}", style="dim")] if t.measured_as else []
    out += [Text("  " + line) for line in gap_lines(t)]
    if t.changes or t.combination:
        out.append(changes_table(t))
        out += [Text(f"▲/▼ decided, ≈ same, ? not separated; {f}", style="dim") for f in t.families]
        out += [Text(line, style="cyan") for line in lab_lines(t)]
    out += answer_lines(t)
    for s in t.skipped:
        out.append(Text(f"skipped {s.name} ({s.change}): {s.reason}", style="dim"))
    out += [Text(f"note: {n}", style="yellow") for n in t.notes]
    return out


def gain_plot(t: TuneRecord) -> Plot | None:
    """Each change's speed-up over the untuned subject with its interval, one bar per
    change and workload (the combination last); 1× drawn as the untuned subject."""
    from fsbench.report.plots.figure import headed, row_labels, rows_figure

    rows = [c for c in [*t.changes, *t.combination] if shown(c).gain is not None]
    if not rows:
        return None
    fig, ax = rows_figure(len(rows))
    ys = list(range(len(rows)))[::-1]
    colour = {"better": "#55a868", "worse": "#c44e52", "same": "#dd8452"}
    for y, c in zip(ys, rows, strict=True):
        x = shown(c)
        assert x.gain is not None
        ax.barh(y, x.gain, height=0.7, color=colour.get(x.outcome, "#8c8c8c"))
        if x.interval is not None:
            lo, hi = x.interval if c.higher_is_better else [1 / x.interval[1], 1 / x.interval[0]]
            ax.errorbar(x.gain, y, xerr=[[x.gain - lo], [hi - x.gain]], color="black",
                        capsize=2, lw=0.8)  # fmt: skip
        ax.text(x.gain, y, f"  {x.cell}", va="center", fontsize=7)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    row_labels(ax, ys, [f"{label(c)} · {c.workload}{where(c)}" for c in rows])
    ax.set_xlabel(f"speed-up over the untuned subject (×, log scale; {axis_interval(rows)})")
    return headed(
        fig,
        "tune-gain",
        "Tune",
        f"What each change gains for {t.subject}",
        "Each bar: one change against the untuned subject in the same run (identical images, "
        "interleaved rounds), confirmed on fresh samples where it won; the line at 1× is the "
        "untuned subject. Green ▲ faster, red ▼ slower, orange ≈ the same, grey not separated. "
        + " ".join(t.families),
    )


def axis_interval(rows: list[TuneChange]) -> str:
    """What the bars' intervals' confidences are, as the chart's axis says them: each the
    family's of the comparison the bar draws (the selection's, or the confirmation's)."""
    confs = sorted({x.confidence for x in map(shown, rows) if x.confidence is not None})
    said = ", ".join(f"{confidence_text(c)} %" for c in confs)
    return "each interval at its family's confidence" + (f", {said}" if said else "")


def html(run: Run) -> dict[str, Any] | None:
    t = tune_of(run)
    if t is None:
        return None
    rows = [
        {
            "change": label(c),
            "workload": c.workload + where(c),
            "centres": centres(c),
            "cell": shown(c).cell,
            "measured": measured(c),
            "outcome": css(shown(c).outcome),
            "gap": share(c),
            "safety": SAFETY.get(c.safety, c.safety),
            "unsafe": c.safety != "safe",
            "lab": c.lab,
            "use": c.use,
        }
        for c in [*t.changes, *t.combination]
    ]
    return {"tune": {"record": t, "gaps": gap_lines(t), "rows": rows, "plot": gain_plot(t),
                     "families": t.families}}  # fmt: skip


def markdown(run: Run) -> list[str]:
    """The tune record for `export --format markdown`: the gaps, the changes' table, the
    command to use, what was not measured and why."""
    t = tune_of(run)
    if t is None:
        return []
    out = [f"### Tune: {t.subject} against {t.against}", "", *(f"{g}  " for g in gap_lines(t))]
    out += ["", f"| {' | '.join(COLUMNS)} | lab |", "|---" * (len(COLUMNS) + 1) + "|"]
    for c in [*t.changes, *t.combination]:
        out.append(f"| {label(c)} | {c.workload}{where(c)} | {centres(c)} | {shown(c).cell} | "
                   f"{measured(c)} | {share(c)} | {SAFETY.get(c.safety, c.safety)} | "
                   f"{c.lab} |")  # fmt: skip
    out += ["", *(f"{f}  " for f in t.families)]
    use = recommended(t)
    if use is not None:
        unsafe = f" ({SAFETY[use.safety]})" if use.safety != "safe" else ""
        out += ["", f"To use {label(use)}{unsafe}:", "", *(f"    {u}" for u in use.use)]
    out += ["", *(f"- not measured: {s.name} (`{s.change}`): {s.reason}" for s in t.skipped)]
    return [*out, *(f"- note: {n}" for n in t.notes), ""]


# -- `fsbench diff` of two tune runs --------------------------------------------------------------
def _key(c: TuneChange) -> tuple[str, str, str]:
    return label(c), c.workload, placement(c)


def tune_diff(a: Run, b: Run) -> dict[str, Any] | None:
    """Two tune records side by side: per change and workload both verdicts (each against its
    own run's untuned subject, so the cells are set side by side, not divided), the change to
    use in each, and what one measured that the other skipped. None unless both are tunes."""
    ta, tb = tune_of(a), tune_of(b)
    if ta is None or tb is None:
        return None
    ia = {_key(c): c for c in [*ta.changes, *ta.combination]}
    ib = {_key(c): c for c in [*tb.changes, *tb.combination]}
    rows = []
    for k in dict.fromkeys([*ia, *ib]):
        x, y = ia.get(k), ib.get(k)
        rows.append({
            "change": k[0], "workload": k[1], "placement": k[2],
            "a": shown(x).cell if x else None, "b": shown(y).cell if y else None,
            "outcome_a": shown(x).outcome if x else None,
            "outcome_b": shown(y).outcome if y else None,
            "gain_a": shown(x).gain if x else None, "gain_b": shown(y).gain if y else None,
            "moved": bool(x and y and shown(x).outcome != shown(y).outcome),
            "safety": (x or y).safety if (x or y) else "safe",
        })  # fmt: skip
    use_a, use_b = recommended(ta), recommended(tb)
    return {
        "subject_a": ta.subject, "subject_b": tb.subject,
        "use_a": label(use_a) if use_a else None, "use_b": label(use_b) if use_b else None,
        "rows": rows,
        # What one tune skipped and the other measured: the runs asked different questions.
        "skipped_a": {s.name: s.reason for s in ta.skipped if s.name in _names(tb)},
        "skipped_b": {s.name: s.reason for s in tb.skipped if s.name in _names(ta)},
    }  # fmt: skip


def _names(t: TuneRecord) -> set[str]:
    return {c.name for c in t.changes}


def tune_diff_lines(d: dict[str, Any]) -> list[Text]:
    """The tune part of `fsbench diff`, a line per change and workload: A's verdict → B's."""
    out = [Text(f"tune: {d['subject_a']} (A) → {d['subject_b']} (B); each change against its "
                "own run's untuned subject", style="bold")]  # fmt: skip
    for r in d["rows"]:
        at = f" [{r['placement']}]" if r["placement"] != "free" else ""
        a, b = r["a"] or "not measured", r["b"] or "not measured"
        moved = "  (verdict changed)" if r["moved"] else ""
        unsafe = f" ({SAFETY.get(r['safety'], r['safety'])})" if r["safety"] != "safe" else ""
        out.append(Text(f"  {r['change']}{unsafe} · {r['workload']}{at}: {a} → {b}{moved}",
                        style="yellow" if r["moved"] else ""))  # fmt: skip
    same = d["use_a"] == d["use_b"]
    out.append(Text(f"  the change to use: {d['use_a'] or 'none decided'} → "
                    f"{d['use_b'] or 'none decided'}" + ("" if same else "  (changed)"),
                    style="green" if same else "yellow"))  # fmt: skip
    for side in ("a", "b"):
        for name, why in d[f"skipped_{side}"].items():
            out.append(Text(f"  skipped in {side.upper()} only: {name}: {why}", style="dim"))
    return out
