"""The explanation's factors from a result's own figures, not the trace probes': CPU by part,
context switches, device amplification. Each is a function of a `FactorInput`, like a probe
record's `factors`; the /proc probe records (`counter.CounterProbe`) that measure those figures
name them, and `report/model/explain.py` calls them through that catalogue."""

from __future__ import annotations

from fsbench.records.probes.factor import PART_WORDS, Factor, FactorInput, differs, ratio_weight
from fsbench.records.probes.numbers import fmt_count, fmt_short, fmt_time


def cpu_factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    if not prof.cpu:
        return []
    total = sum(prof.cpu.values())
    btotal = sum(base.cpu.values()) if base is not None and base.cpu else None
    if btotal is not None and not differs(total, btotal):
        return []

    def parts(cpu: dict[str, float]) -> str:
        order = ("driver", "app", "kernel_threads")
        return ", ".join(
            f"{PART_WORDS[k]} {fmt_time(cpu[k])}" for k in order if cpu.get(k, 0) >= 0.005
        )

    text = f"CPU per {prof.per}: {parts(prof.cpu) or fmt_time(total)}"
    if base is not None and base.cpu:
        text += f" ({base_name}: {parts(base.cpu) or fmt_time(btotal or 0)})"
    brief = f"CPU {fmt_time(total)}/{prof.per}"
    inner = [f"daemon {fmt_time(prof.cpu['driver'])}"] if prof.cpu.get("driver") else []
    if btotal is not None:
        inner.append(f"{base_name} {fmt_time(btotal)}")
    if inner:
        brief += f" ({'; '.join(inner)})"
    return [
        Factor(
            "cpu",
            total,
            f"s/{prof.per}",
            text,
            brief,
            btotal,
            weight=ratio_weight(total, btotal),
        )
    ]


def ctx_factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    if prof.ctx is None:
        return []
    # A subject's figure is set only against a subject's, a machine's against a machine's.
    same = base is not None and base.ctx_machine == prof.ctx_machine
    bctx = base.ctx if base is not None and same else None
    if bctx is not None and not differs(prof.ctx, bctx):
        return []
    if prof.ctx_machine:
        text = f"{fmt_count(prof.ctx)} context switches per GiB on the whole machine"
        brief = f"{fmt_short(prof.ctx)} machine ctx switches/GiB"
    else:
        text = f"{fmt_count(prof.ctx)} app + daemon context switches per GiB"
        brief = f"{fmt_short(prof.ctx)} app+daemon ctx switches/GiB"
    if bctx is not None:
        text += f" ({base_name}: {fmt_count(bctx)})"
        brief += f" ({base_name} {fmt_short(bctx)})"
    return [
        Factor(
            "context switches",
            prof.ctx,
            "switches/GiB",
            text,
            brief,
            bctx,
            weight=ratio_weight(prof.ctx, bctx),
        )
    ]


def amplification_factors(inp: FactorInput) -> list[Factor]:
    prof, base, base_name = inp.prof, inp.base, inp.base_name
    out = []
    for d, v in prof.amplification.items():
        b = base.amplification.get(d) if base is not None else None
        if b is None or not differs(v, b):
            continue  # amplification alone, without a baseline, is in the table already
        out.append(
            Factor(
                f"{d} amplification",
                v,
                "device bytes per byte",
                f"the device {'read' if d == 'read' else 'wrote'} {v:.2f} bytes per byte "
                f"({base_name}: {b:.2f})",
                f"{d} amp {v:.2f} ({base_name} {b:.2f})",
                b,
                weight=ratio_weight(v, b),
            )
        )
    return out
