"""Fresh against aged: what aging did to each image, the ratio aged/fresh per driver
and workload with its interval, and whether the ranking between drivers changes with age.

An aged subject is `BASE (aged:PROFILE)` with `Subject.aging`; its fresh counterpart is the
subject whose id is BASE. Under each ratio, what changed with age (report/model/aging_why.py). Reads
finished `Run` records only.
"""

from __future__ import annotations

from typing import Any

from fsbench.records.schema import Aging, Result, Run, Subject
from fsbench.report.model.aging_why import age_changes, why_line
from fsbench.report.model.comparison import Comparison
from fsbench.report.model.decided import Decided, Pair
from fsbench.report.model.grouping import by_title
from fsbench.report.model.naming import centre_of
from fsbench.stats.baseline import ranked
from fsbench.units import size_text

__all__ = ["age_effects", "aged_subjects", "aging_lines", "effect_lines"]


def aged_subjects(run: Run) -> list[Subject]:
    return [s for s in run.subjects if s.aging is not None]


def base_of(s: Subject) -> str:
    return s.id.split(" (aged:", 1)[0]


def _pct(x: Any) -> str:
    return f"{float(x) * 100:.0f} %" if isinstance(x, int | float) else "?"


def image_text(a: Aging) -> str:
    """What aging did, in one line: utilization, file and free-space fragmentation."""
    f, fr = a.files, a.free_space
    bits = [f"{_pct(a.utilization)} used"]
    if f.get("files") is not None:
        mean = f.get("extents_per_file_mean")
        bits.append(
            f"{f['files']} files, {mean if mean is not None else '?'} extents/file "
            f"({_pct(f.get('fragmented_share'))} fragmented, max {f.get('extents_per_file_max')})"
        )
    if fr.get("free_extents") is not None:
        avg = fr.get("free_extent_mean_bytes") or 0
        bits.append(
            f"free space in {fr['free_extents']} extents (mean {size_text(int(avg))}, "
            f"{_pct(fr.get('free_in_extents_ge_1mib'))} in ≥1 MiB)"
        )
    return "; ".join(bits)


def origin_text(a: Aging) -> str:
    how = (
        f"cached copy, digest checked ({a.setup_seconds:.1f} s)"
        if a.reused
        else f"aged now in {a.aging_seconds:.0f} s"
    )
    version = f" ({a.reference_driver_version})" if a.reference_driver_version else ""
    drv = a.reference_driver + version
    return f"profile {a.profile}, seed {a.seed}, aged through {drv}; {how}"


def aging_lines(run: Run) -> list[str]:
    """One or two lines per aged image (one image per format and profile)."""
    out, seen = [], set()
    for s in aged_subjects(run):
        a = s.aging
        assert a is not None
        if (s.fs, a.key) in seen:
            continue
        seen.add((s.fs, a.key))
        out.append(f"aged {s.fs} image: {origin_text(a)}")
        out.append(f"  {image_text(a)}")
        if a.note:
            out.append(f"  note: {a.note}")
    return out


def _ratio(fresh: Result, aged: Result, pair: Pair) -> Comparison | None:
    """Aged against fresh (the baseline), as the report decided it (`pair`: Decided.pair)."""
    if not (fresh.samples and aged.samples and ranked(fresh) and ranked(aged)):
        return None
    c = pair(fresh, aged)
    return c if c.ratio is not None else None


def _order(results: dict[str, Result], higher: bool) -> list[str]:
    # By the centre every table prints and every ratio divides (naming.centre_of), not the
    # median: a ranking must agree with the ratios printed beside it.
    usable = [(k, c) for k, r in results.items() if (c := centre_of(r)) is not None and ranked(r)]
    return [k for k, _ in sorted(usable, key=lambda kv: kv[1], reverse=higher)]


def age_effects(run: Run, decided: Decided | None = None) -> list[dict[str, Any]]:
    """Per workload: each driver's aged/fresh ratio (with its interval) and the ranking of the
    drivers on the fresh images against their ranking on each profile's aged images
    (`decided`: the report's comparisons; None: the run's own, decided here once)."""
    by_id = {s.id: s for s in run.subjects}
    pair = (decided or Decided(run)).pair
    out = []
    for title, results in by_title(run).items():
        fresh = {r.subject: r for r in results if (s := by_id.get(r.subject)) and not s.aging}
        aged: dict[str, dict[str, Result]] = {}  # profile -> base -> result
        for r in results:
            s = by_id.get(r.subject)
            if s is not None and s.aging is not None:
                aged.setdefault(s.aging.profile, {})[base_of(s)] = r
        if not aged or not fresh:
            continue
        higher = results[0].higher_is_better
        entry: dict[str, Any] = {
            "workload": title,
            "unit": results[0].unit,
            "higher_is_better": higher,
            "profiles": {},
        }
        for profile, rs in aged.items():
            ratios = {b: _ratio(fresh[b], r, pair) for b, r in rs.items() if b in fresh}
            order_fresh = _order({b: fresh[b] for b in rs if b in fresh}, higher)
            order_aged = _order({b: r for b, r in rs.items() if b in fresh}, higher)
            # What changed with age, figure by figure, for each driver with both results.
            why = {b: age_changes(fresh[b], r, run) for b, r in rs.items() if b in ratios}
            entry["profiles"][profile] = {
                "ratios": ratios,
                "why": why,
                "ranking_fresh": order_fresh,
                "ranking_aged": order_aged,
                "ranking_changed": order_fresh != order_aged,
            }
        out.append(entry)
    return out


def effect_lines(run: Run, decided: Decided | None = None) -> list[str]:
    lines = []
    for e in age_effects(run, decided):
        for profile, p in e["profiles"].items():
            ratios = ", ".join(f"{b} {c.cell() if c else '–'}" for b, c in p["ratios"].items())
            lines.append(f"{e['workload']}: aged:{profile}/fresh {ratios}")
            if len(p["ranking_fresh"]) > 1:
                if p["ranking_changed"]:
                    lines.append(
                        f"  ranking (best first) changes with age: fresh "
                        f"{', '.join(p['ranking_fresh'])}; aged {', '.join(p['ranking_aged'])}"
                    )
                else:
                    lines.append(
                        f"  ranking unchanged (best first): {', '.join(p['ranking_fresh'])}"
                    )
            lines += [ln for b, cs in p["why"].items() if (ln := why_line(b, cs))]
    return lines
