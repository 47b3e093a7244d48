"""The `sched` probe: wake-ups of the application's and the driver daemon's tasks, those to
another CPU than the waker's, migrations; and what they cost where a cross-CPU wake-up is
costly."""

from __future__ import annotations

from typing import Any

from fsbench.records.probes.factor import Factor, FactorInput, Profile, share_text, time_factor
from fsbench.records.probes.numbers import as_dict, fmt_count, fmt_short, fmt_time, fmt_us, number
from fsbench.records.probes.record import Figure, Maps, Probe, SubjectKeys, rows
from fsbench.records.schema import COSTLY_WAKEUP_RATIO, Environment

# The subject's cross-CPU wake-ups matter when their extra cost is this share of a sample (what
# is "costly" is schema.COSTLY_WAKEUP_RATIO: doctor, the run's note and the explanation agree).
WAKEUP_SHARE_MIN = 0.05

# The waker's CPU is known at sched_waking only: sched_wakeup may run on the target CPU (wake
# lists), which would hide a cross-CPU wake-up (measured: half of them).
SCRIPT = """
tracepoint:sched:sched_waking {
  @sched_waker[args->pid] = cpu + 1;
}
tracepoint:sched:sched_wakeup {
  @sched_wake[args->comm] = count();
  $w = @sched_waker[args->pid];
  if ($w && (uint64)args->target_cpu + 1 != $w) { @sched_cross[args->comm] = count(); }
  delete(@sched_waker[args->pid]);
}
tracepoint:sched:sched_migrate_task {
  @sched_mig[str(args->comm)] = count();
}
"""


def parse(maps: Maps, keys: SubjectKeys) -> dict[str, Any]:
    sc: dict[str, dict[str, int]] = {"wakeups": {}, "cross_cpu": {}, "migrations": {}}
    for m, part in (("sched_wake", "wakeups"), ("sched_cross", "cross_cpu"),
                    ("sched_mig", "migrations")):  # fmt: skip
        got = {k[0]: int(v) for k, v in rows(maps, m)}
        for role, comms in keys.comms.items():
            sc[part][role] = sum(got.get(c, 0) for c in comms)
    return sc


def read(part: dict[str, Any] | None, prof: Profile) -> tuple[float, float, float] | None:
    """(wake-ups, cross-CPU wake-ups, migrations) per unit of work, all roles together."""
    if part is None:
        return None

    def total(key: str) -> float:
        return sum(number(v) or 0.0 for v in as_dict(part.get(key)).values())

    return (
        total("wakeups") / prof.amount,
        total("cross_cpu") / prof.amount,
        total("migrations") / prof.amount,
    )


def figures(sc: tuple[float, float, float], per: str) -> list[Figure]:
    return [("sched.cross", f"cross-CPU wake-ups per {per}", sc[1], "count")] if sc else []


def wakeup_costs(env: Environment) -> tuple[float, float] | None:
    """(same-CPU, cross-CPU) wake-up cost in µs as the environment measured them: of the
    measurement at the run's start and the one after its last sample, the one with the
    cheaper cross-CPU wake-up (a busy host inflates the figure; it never deflates it)."""
    w = getattr(env, "wakeup_us", None)
    if w is None:
        w = (env.model_extra or {}).get("wakeup_us")
    if hasattr(w, "model_dump"):
        w = w.model_dump()
    if not isinstance(w, dict):
        return None
    pairs = [(w.get(f"same_cpu{e}"), w.get(f"cross_cpu{e}")) for e in ("", "_end")]
    ok = [
        (float(s), float(c))
        for s, c in pairs
        if isinstance(s, int | float) and isinstance(c, int | float) and s > 0
    ]
    return min(ok, key=lambda sc: sc[1]) if ok else None


def factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    sched = prof.measured.get("sched")
    costs = wakeup_costs(inp.env)
    if not sched or costs is None or not prof.seconds:
        return []
    same, cross = costs
    if cross < COSTLY_WAKEUP_RATIO * same:
        return []  # wake-ups across CPUs are cheap here: no story to tell
    wakeups, crossed, migrations = sched
    extra = crossed * (cross - same) / 1e6
    if extra / prof.seconds < WAKEUP_SHARE_MIN:
        return []
    bounded = extra > prof.seconds
    if bounded:
        # The measured cost cannot have held during this run: the wake-ups would have taken
        # longer than the whole run. No time is claimed for them (never > 100 %).
        text = (
            f"{fmt_count(crossed)} of {fmt_count(wakeups)} wake-ups per {prof.per} crossed "
            f"CPUs; at the {fmt_us(cross)} each measured here that would be "
            f"{fmt_time(extra)} per {prof.per}, more than the traced run took "
            f"({fmt_time(prof.seconds)}): the host was busier when the cost was measured, so "
            f"their share of it is unknown"
        )
    else:
        text = (
            f"{fmt_count(crossed)} of {fmt_count(wakeups)} wake-ups per {prof.per} crossed "
            f"CPUs; at {fmt_us(cross)} each against {fmt_us(same)} on one CPU (measured here) "
            f"that is ≈ {fmt_time(extra)} per {prof.per}" + share_text(extra, prof)
        )
    if migrations:
        text += f"; {fmt_count(migrations)} migrations"
    bsched = base.measured.get("sched") if base is not None else None
    base_extra = None
    if bsched is not None:
        base_extra = None if bounded else bsched[1] * (cross - same) / 1e6
        text += f" ({base_name}: {fmt_count(bsched[1])} crossed)"
    brief = f"{fmt_short(crossed)} cross-CPU wake-ups/{prof.per}"
    if not bounded:
        brief += f" ≈ {fmt_time(extra)}/{prof.per}"
    return [
        time_factor(
            "wake-ups",
            crossed,
            f"cross-CPU wake-ups/{prof.per}",
            text,
            brief,
            None if bounded else extra,
            base_extra,
            prof,
            inp.gap,
            bsched[1] if bsched is not None else None,
        )
    ]


PROBE = Probe.of_module(
    __name__,
    "sched",
    ("sched/sched_waking", "sched/sched_wakeup", "sched/sched_migrate_task"),
    "wake-ups of the application's and the driver daemon's tasks, how many were to "
    "another CPU than the waker's, migrations",
    SCRIPT,
    ("sched_wake", "sched_cross", "sched_mig"),
    scratch=("sched_waker",),
)
