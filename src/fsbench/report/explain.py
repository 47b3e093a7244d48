"""Why a subject differs from its workload's baseline, in words and numbers.

For every finished result a `Profile` collects what the run measured about it (the kernel
trace probes' figures per GiB or per 1000 operations, CPU by part, context switches, device
amplification), and `explain_run` turns two profiles (the result's and its baseline's) into
ranked `Factor` records: a name, a figure, its unit, the seconds of the traced run it stands for
and the share of the difference to the baseline it accounts for, and the sentence that says so.
The terminal table, the HTML report, `--json` and `diff` all read these records.

Nothing here is canned: a sentence exists only when the numbers it quotes were measured in this
run. A probe that was unavailable (or a run without tracing) gives no claim, only a note.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fsbench.report.floor import floor_factors
from fsbench.report.naming import (
    OUTCOME_WORDS,
    baseline_result,
    interval_text,
    outcome,
    result_title,
)
from fsbench.report.summary import compare, fmt_ratio, measured_subjects, size_text, usable
from fsbench.schema import COSTLY_WAKEUP_RATIO, Environment, Quirk, Result, Run

GiB = 2**30
# The subject's cross-CPU wake-ups matter when their extra cost is this share of a sample (what
# is "costly" is schema.COSTLY_WAKEUP_RATIO: doctor, the run's note and the explanation agree).
WAKEUP_SHARE_MIN = 0.05
# FUSE requests whose summed latency exceeds the traced run by this factor were in flight
# together: reported as concurrency, never as a share above 100 %.
OVERLAPPING = 1.05
# A histogram bucket holding this share of the events is "the" size ("4 KiB each").
DOMINANT = 0.9
# Figures closer than this ratio to the baseline's (or to the other run's) are not a difference.
SAME_WITHIN = 1.1
PLACEMENT_WORDS = {
    "same": "on one CPU",
    "split": "on separate CPUs",
    "free": "unpinned",
}


# -- reading the inputs ---------------------------------------------------------------------------
def trace_of(obj: Any) -> dict[str, Any] | None:
    """The probe data of a Result or Sample: the schema's `trace` field when it has one, the
    model's extra fields before (one accessor, so both old and new records read the same)."""
    t = getattr(obj, "trace", None)
    if t is None:
        t = (getattr(obj, "model_extra", None) or {}).get("trace")
    if hasattr(t, "model_dump"):
        t = t.model_dump(exclude_none=True)
    return t if isinstance(t, dict) and t else None


def placement_of(res: Result) -> str:
    return str(res.params.get("placement") or "free")


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


def workload_key(res: Result) -> str:
    """The result's workload title with its placement left out: results that differ only in
    where the processes ran belong together."""
    params = {k: v for k, v in res.params.items() if k != "placement"}
    return result_title(res.model_copy(update={"params": params}))


def _d(v: Any) -> dict[str, Any]:
    """v when it is a dict, else an empty one: probe data from another version is read, not
    trusted."""
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def _hist(h: Any) -> dict[int, float]:
    """{"4096": 262144} -> {4096: 262144.0}, dropping what is not a number."""
    out: dict[int, float] = {}
    if isinstance(h, dict):
        for k, v in h.items():
            try:
                key = int(k)
            except (TypeError, ValueError):
                continue
            n = _num(v)
            if n is not None and n > 0:
                out[key] = out.get(key, 0.0) + n
    return out


def dominant(h: dict[int, float]) -> tuple[int, float] | None:
    """The bucket holding the most events and its share of them."""
    total = sum(h.values())
    if not total:
        return None
    k = max(h, key=lambda b: (h[b], -b))
    return k, h[k] / total


def hist_median(h: dict[int, float]) -> int | None:
    total = sum(h.values())
    if not total:
        return None
    seen = 0.0
    for k in sorted(h):
        seen += h[k]
        if seen >= total / 2:
            return k
    return None


# -- formatting -----------------------------------------------------------------------------------
def fmt_count(n: float) -> str:
    return f"{n:,.0f}" if n >= 10 else f"{n:.2g}"


def fmt_short(n: float) -> str:
    """1.1 M, 250 k, 980: for the terminal's short lines."""
    if n >= 1e6:
        return f"{n / 1e6:.2g} M"
    if n >= 1e4:
        return f"{n / 1e3:.0f} k"
    return fmt_count(n)


def fmt_time(seconds: float) -> str:
    """36 µs, 4.1 ms, 9.4 s."""
    a = abs(seconds)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{seconds * 1e6:.2g} µs" if a * 1e6 < 10 else f"{seconds * 1e6:.0f} µs"
    if a < 1:
        return f"{seconds * 1e3:.2g} ms" if a * 1e3 < 10 else f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2g} s" if a < 10 else f"{seconds:.0f} s"


def fmt_us(us: float) -> str:
    return fmt_time(us / 1e6)


def fmt_pct(x: float) -> str:
    return f"{x * 100:.0f} %" if x * 100 >= 1 else f"{x * 100:.1g} %"


def _size_phrase(h: dict[int, float], mean: float | None) -> tuple[str, int | None]:
    """('4 KiB each' | 'mostly 4 KiB (60 %)', the dominant bucket when it dominates)."""
    d = dominant(h)
    if d is not None and d[1] >= DOMINANT:
        size = mean if mean is not None and d[0] <= mean < 2 * d[0] else d[0]
        return f"{size_text(size)} each", d[0]
    if d is not None:
        avg = f", average {size_text(mean)}" if mean else ""
        return f"mostly {size_text(d[0])} ({fmt_pct(d[1])}){avg}", None
    if mean:
        return f"{size_text(mean)} on average", None
    return "", None


# -- what was measured about one result -----------------------------------------------------------
@dataclass
class OpFigures:
    """FUSE requests of one opcode, or block requests of one direction, per unit of work."""

    count: float
    size_hist: dict[int, float]  # bucket (lower bound, bytes) -> requests per unit of work
    mean_size: float | None
    p50_us: float | None
    p99_us: float | None
    seconds: float | None  # total latency per unit of work
    mean_us: float | None  # per request
    latency_hist: dict[int, float] = field(default_factory=dict)  # µs bucket -> per unit


@dataclass
class Profile:
    result: Result
    per: str  # "GiB" or "1000 ops"
    amount: float  # units of work the samples moved
    seconds: float | None  # wall seconds per unit
    kind: str  # subject kind: fuse, kernel, ...
    driver: str
    quirks: list[Quirk] = field(default_factory=list)  # the driver's, as the subject records
    unavailable: list[str] = field(default_factory=list)
    fuse: dict[str, OpFigures] | None = None  # None: not measured
    readahead: tuple[float, dict[int, float]] | None = None  # (windows per unit, window hist)
    block: dict[str, OpFigures] | None = None
    writeback: tuple[float, float, float | None] | None = None  # pauses, pause s, pages /unit
    sched: tuple[float, float, float] | None = None  # wake-ups, cross-CPU, migrations /unit
    cpu: dict[str, float] | None = None  # seconds per unit by part
    ctx: float | None = None  # context switches per GiB
    ctx_machine: bool = False  # ctx is the whole machine's (older runs), not app + daemon
    amplification: dict[str, float] = field(default_factory=dict)

    def figures(self) -> list[tuple[str, str, float, str]]:
        """(key, label, value, how to print it) of every figure, for `diff`."""
        out: list[tuple[str, str, float, str]] = []
        per = self.per
        for op, f in sorted((self.fuse or {}).items()):
            out.append((f"fuse.{op}.count", f"FUSE {op} requests per {per}", f.count, "count"))
            d = dominant(f.size_hist)
            size = f.mean_size or (d[0] if d else None)
            if size:
                out.append((f"fuse.{op}.size", f"FUSE {op} request size", size, "bytes"))
            if f.mean_us is not None:
                out.append((f"fuse.{op}.latency", f"FUSE {op} latency", f.mean_us, "us"))
        if self.readahead:
            m = hist_median(self.readahead[1])
            if m:
                out.append(("readahead.window", "readahead window", m, "bytes"))
        for d_, f in sorted((self.block or {}).items()):
            out.append((f"block.{d_}.count", f"device {d_} requests per {per}", f.count, "count"))
            dm = dominant(f.size_hist)
            size = f.mean_size or (dm[0] if dm else None)
            if size:
                out.append((f"block.{d_}.size", f"device {d_} request size", size, "bytes"))
            if f.p50_us is not None:
                out.append((f"block.{d_}.p50", f"device {d_} latency p50", f.p50_us, "us"))
        if self.writeback:
            out.append(("writeback.pauses", f"dirty throttling per {per}", self.writeback[0], "n"))
        if self.sched:
            out.append(("sched.cross", f"cross-CPU wake-ups per {per}", self.sched[1], "count"))
        for part, v in sorted((self.cpu or {}).items()):
            out.append((f"cpu.{part}", f"CPU {_PART_WORDS.get(part, part)} per {per}", v, "s"))
        if self.ctx is not None:
            # Different keys: diff never sets a machine figure against a subject's.
            if self.ctx_machine:
                out.append(("ctx.machine", "machine context switches per GiB", self.ctx, "count"))
            else:
                out.append(("ctx", "context switches per GiB (app + daemon)", self.ctx, "count"))
        return out


_PART_WORDS = {"app": "app", "driver": "daemon", "kernel_threads": "kernel threads"}


def _work(res: Result, trace: dict[str, Any] | None) -> tuple[str, float, float | None]:
    w = _d(_d(trace).get("work"))
    nbytes = _num(w.get("bytes")) or float(sum(s.bytes for s in res.sample_details))
    ops = _num(w.get("ops")) or float(sum(s.ops for s in res.sample_details))
    secs = _num(w.get("seconds")) or float(sum(s.seconds for s in res.sample_details))
    if nbytes > 0:
        amount, per = nbytes / GiB, "GiB"
    elif ops > 0:
        amount, per = ops / 1000, "1000 ops"
    else:
        return "GiB", 0.0, None
    return per, amount, (secs / amount if secs > 0 else None)


def _probe_ok(trace: dict[str, Any], name: str, unavailable: list[str]) -> bool:
    status = _d(trace.get("probes")).get(name)
    if status is not None and status != "ok":
        unavailable.append(f"{name}: {status}")
        return False
    return isinstance(trace.get(name), dict)


def _ops(part: dict[str, Any], key: str, amount: float) -> dict[str, OpFigures]:
    out = {}
    for op, n in _d(part.get("requests")).items():
        count = _num(n)
        if not count:
            continue
        nbytes = _num(_d(part.get("bytes")).get(op))
        lat = _d(_d(part.get("latency_us")).get(op))
        total = _num(lat.get("total"))
        out[op] = OpFigures(
            count=count / amount,
            size_hist={k: v / amount for k, v in _hist(_d(part.get(key)).get(op)).items()},
            mean_size=nbytes / count if nbytes else None,
            p50_us=_num(lat.get("p50")),
            p99_us=_num(lat.get("p99")),
            seconds=total / 1e6 / amount if total is not None else None,
            mean_us=total / count if total is not None else None,
            latency_hist={
                k: v / amount for k, v in _hist(_d(part.get("latency_hist_us")).get(op)).items()
            },
        )
    return out


def _unsized_reads(fuse: dict[str, OpFigures], unavailable: list[str]) -> None:
    """Over io_uring the trace's reply length is not the payload (64 bytes for a 256 KiB READ
    here: the reply's data is in the ring, not counted), so READ sizes are unknown there, not
    the header's size."""
    read = fuse.get("READ")
    if read is not None and (read.size_hist or read.mean_size is not None):
        fuse["READ"] = replace(read, size_hist={}, mean_size=None)
        unavailable.append("FUSE READ sizes: not measured over io_uring (the reply is in the ring)")


def profile(res: Result, run: Run) -> Profile:
    subject = next((s for s in run.subjects if s.id == res.subject), None)
    trace = trace_of(res)
    per, amount, seconds = _work(res, trace)
    p = Profile(
        res,
        per,
        amount,
        seconds,
        subject.kind if subject else "",
        subject.driver if subject else res.subject.split(":")[0],
        subject.quirks if subject else [],
    )
    if trace is None:
        p.unavailable.append("trace: no probe data in this result (tracing off or an older run)")
    elif amount > 0:
        u = p.unavailable
        if p.kind == "kernel":
            p.fuse = {}  # a kernel driver sends no FUSE requests: measured as none
        if _probe_ok(trace, "fuse", u):
            p.fuse = _ops(trace["fuse"], "size_hist", amount)
            if subject is not None and subject.transport == "uring":
                _unsized_reads(p.fuse, u)
        if _probe_ok(trace, "readahead", u):
            ra = trace["readahead"]
            windows = _hist(ra.get("windows"))
            count = _num(ra.get("count")) or sum(windows.values())
            p.readahead = (count / amount, {k: v / amount for k, v in windows.items()})
        if _probe_ok(trace, "block", u):
            p.block = _ops(trace["block"], "size_hist", amount)
        if _probe_ok(trace, "writeback", u):
            wb = trace["writeback"]
            pages = _num(wb.get("pages_written"))
            p.writeback = (
                (_num(wb.get("balance_dirty_pages")) or 0.0) / amount,
                (_num(wb.get("pause_ms")) or 0.0) / 1e3 / amount,
                pages / amount if pages is not None else None,
            )
        if _probe_ok(trace, "sched", u):
            sc = trace["sched"]

            def total(key: str) -> float:
                return sum(_num(v) or 0.0 for v in _d(sc.get(key)).values())

            p.sched = (
                total("wakeups") / amount,
                total("cross_cpu") / amount,
                total("migrations") / amount,
            )
    if per == "GiB" and res.cpu.per_gib:
        p.cpu = {k: v for k, v in res.cpu.per_gib.items() if isinstance(v, int | float)}
        own = getattr(res, "subject_ctx_switches_per_gib", None)
        p.ctx = own if own is not None else res.ctx_switches_per_gib
        p.ctx_machine = own is None and p.ctx is not None
    elif per != "GiB":
        per_kop = getattr(res.cpu, "per_kop_ms", None) or {}
        if per_kop:
            p.cpu = {k: v / 1e3 for k, v in per_kop.items() if isinstance(v, int | float)}
    if res.read_amplification is not None:
        p.amplification["read"] = res.read_amplification
    if res.write_amplification is not None:
        p.amplification["write"] = res.write_amplification
    return p


# -- the explanation ------------------------------------------------------------------------------
@dataclass
class Factor:
    """One measured reason, with its number; what every renderer shows."""

    name: str  # "fuse WRITE", "readahead", "block write", "writeback", "wake-ups", "cpu", ...
    figure: float
    unit: str  # "requests/GiB", "bytes", "s/GiB", ...
    sentence: str
    brief: str  # the same, shorter, for the terminal
    baseline: float | None = None  # the baseline subject's figure, when it has one
    seconds: float | None = None  # seconds per unit of work this factor stands for
    share: float | None = None  # seconds / the traced run's seconds per unit of work
    accounts: float | None = None  # share of the difference to the baseline it accounts for
    weight: float = 0.0  # rank: larger first


@dataclass
class Explanation:
    index: int  # position of the result in run.results
    subject: str
    title: str
    placement: str
    baseline: str | None
    is_baseline: bool
    per: str
    seconds: float | None  # the subject's seconds per unit of work
    baseline_seconds: float | None
    factors: list[Factor]
    unavailable: list[str]
    # The traced run's rate over the samples' median, oriented so that < 1 is slower: what the
    # probes cost this subject in the one run they ran in (None: no traced rate recorded).
    traced_speed: float | None = None

    def sentence(self) -> str:
        return f"{self.subject}: " + "; ".join(f.sentence for f in self.factors)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _time_factor(
    name: str,
    figure: float,
    unit: str,
    sentence: str,
    brief: str,
    seconds: float | None,
    base_seconds: float | None,
    prof: Profile,
    gap: float | None,
    baseline: float | None = None,
) -> Factor:
    share = seconds / prof.seconds if seconds is not None and prof.seconds else None
    accounts = None
    if gap is not None and seconds is not None and base_seconds is not None:
        accounts = (seconds - base_seconds) / gap
    # Time that explains the gap first, then time that fills the sample; a few per cent of
    # either ranks below the factors without a time (a 220× in context switches says more).
    if accounts is not None:
        weight = 10 + abs(accounts) if abs(accounts) >= 0.05 else abs(accounts)
    else:
        weight = 5 + (share or 0.0) if (share or 0.0) >= 0.05 else share or 0.0
    return Factor(name, figure, unit, sentence, brief, baseline, seconds, share, accounts, weight)


def _ratio_weight(a: float | None, b: float | None) -> float:
    if a is None or b is None or a <= 0 or b <= 0:
        return 1.0 if (a or 0) != (b or 0) else 0.0
    return abs(math.log(a / b))


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return True  # nothing to compare with: the figure stands on its own
    if a <= 0 or b <= 0:
        return a != b
    return max(a, b) / min(a, b) >= SAME_WITHIN


def _share_text(seconds: float | None, prof: Profile) -> str:
    if seconds is None or not prof.seconds:
        return ""
    share = seconds / prof.seconds
    if share > 1.05:
        return f" ({fmt_pct(share)} of the traced run: they overlap)"
    return f", {fmt_pct(share)} of the traced run"


def _quirk_shows(q: Quirk, op: str, f: OpFigures, dom: int | None, env: Environment) -> bool:
    """Whether the driver's declared quirk explains this FUSE op's figures on this image."""
    if q.op != op:
        return False
    if q.request_size is not None:
        only = dom is None and not f.size_hist and f.mean_size == q.request_size
        if dom != q.request_size and not only:
            return False
    return q.image_below is None or (env.image_size is not None and env.image_size < q.image_below)


def _fuse_factors(
    prof: Profile, base: Profile | None, base_name: str, env: Environment, gap: float | None
) -> list[Factor]:
    out = []
    ops = prof.fuse or {}
    total = sum(f.count for f in ops.values())
    base_ops = base.fuse if base is not None else None
    for op, f in ops.items():
        if total and f.count / total < 0.01 and (f.seconds or 0) < 0.01 * (prof.seconds or 1):
            continue  # a handful of GETATTRs beside 262,144 WRITEs says nothing
        same = (base_ops or {}).get(op)
        if same is not None and not any(
            _differs(x, y)
            for x, y in (
                (f.count, same.count),
                (f.mean_size, same.mean_size),
                (f.mean_us, same.mean_us),
            )
            if x is not None and y is not None
        ):
            continue  # as many, as large and as slow as the baseline's: not what separates them
        size, dom = _size_phrase(f.size_hist, f.mean_size)
        text = f"{fmt_count(f.count)} FUSE {op} requests per {prof.per}"
        brief = f"{fmt_count(f.count)} FUSE {op}/{prof.per}"
        if size:
            text += f", {size}"
            brief += f" × {size.replace(' each', '')}"
        for q in prof.quirks:
            if _quirk_shows(q, op, f, dom, env):
                text += f" ({q.says.format(image=size_text(env.image_size or 0))})"
                brief += f" ({q.brief})"
        # Requests in flight together (readahead sends several READs at once): their summed
        # latency outlasts the run, so it is concurrency, not a share of the run's time.
        overlap = (
            f.seconds / prof.seconds
            if f.seconds is not None and prof.seconds and f.seconds > OVERLAPPING * prof.seconds
            else None
        )
        if f.mean_us is not None and f.seconds is not None and overlap is not None:
            text += (
                f"; {fmt_us(f.mean_us)} per request = {fmt_time(f.seconds)} of request time per "
                f"{prof.per} in a traced run of {fmt_time(prof.seconds)}: ≈ {overlap:.1f} in "
                "flight at a time, so no share of the run's time is theirs alone"
            )
            brief += f", {fmt_us(f.mean_us)}, ≈ {overlap:.1f} in flight"
        elif f.mean_us is not None and f.seconds is not None:
            text += f"; {fmt_us(f.mean_us)} per request = {fmt_time(f.seconds)} per {prof.per}"
            text += _share_text(f.seconds, prof)
            brief += f", {fmt_us(f.mean_us)} = {fmt_time(f.seconds)}/{prof.per}"
            if prof.seconds:
                brief += f" ({fmt_pct(f.seconds / prof.seconds)})"
        elif f.p50_us is not None:
            text += f"; {fmt_us(f.p50_us)} median latency"
        bf = base.fuse.get(op) if base is not None and base.fuse is not None else None
        base_seconds = None
        if base is not None and base.fuse is not None:
            base_seconds = bf.seconds if bf is not None else 0.0
            if bf is not None:
                bsize, _ = _size_phrase(bf.size_hist, bf.mean_size)
                text += f" ({base_name}: {fmt_count(bf.count)}" + (
                    f", {bsize.replace(' each', '')})" if bsize else ")"
                )
            elif base.kind == "kernel":
                text += f" ({base_name} is in the kernel: no FUSE requests)"
            else:
                text += f" ({base_name}: none)"
        factor = _time_factor(
            f"fuse {op}",
            f.count,
            f"requests/{prof.per}",
            text,
            brief,
            None if overlap is not None else f.seconds,
            None if overlap is not None else base_seconds,
            prof,
            gap,
            bf.count if bf is not None else (0.0 if base_seconds == 0.0 else None),
        )
        if overlap is not None:
            factor.weight = 6.0  # ranks as a factor that fills the run, which it does
        out.append(factor)
    # The other way round: the baseline spends time in FUSE requests this subject never sends.
    base_total = sum(bf.count for bf in (base_ops or {}).values())
    if prof.fuse is not None and base is not None:
        for op, bf in (base_ops or {}).items():
            if op in ops or bf.count < 0.01 * base_total or bf.seconds is None:
                continue
            why = " (in the kernel)" if prof.kind == "kernel" else ""
            text = (
                f"no FUSE {op} requests{why}; {base_name} sends {fmt_count(bf.count)} per "
                f"{prof.per} = {fmt_time(bf.seconds)} per {prof.per}"
            )
            brief = f"no FUSE {op} ({base_name}: {fmt_time(bf.seconds)}/{prof.per})"
            out.append(
                _time_factor(
                    f"fuse {op}",
                    0.0,
                    f"requests/{prof.per}",
                    text,
                    brief,
                    0.0,
                    bf.seconds,
                    prof,
                    gap,
                    bf.count,
                )
            )
    return out


def _block_factors(
    prof: Profile, base: Profile | None, base_name: str, gap: float | None
) -> list[Factor]:
    out = []
    for d, f in (prof.block or {}).items():
        bf = (base.block or {}).get(d) if base is not None and base.block is not None else None
        pairs = (
            [(f.count, bf.count), (f.mean_size, bf.mean_size), (f.p50_us, bf.p50_us)] if bf else []
        )
        if bf is not None and not any(
            _differs(x, y) for x, y in pairs if x is not None and y is not None
        ):
            continue  # the device sees what it sees for the baseline
        size, _ = _size_phrase(f.size_hist, f.mean_size)
        text = f"{fmt_count(f.count)} device {d} requests per {prof.per}"
        brief = f"dev {d} {fmt_count(f.count)}/{prof.per}"
        if size:
            text += f", {size}"
            brief += f" × {size.replace(' each', '')}"
        if f.p50_us is not None:
            text += f", {fmt_us(f.p50_us)} median latency"
            if f.p99_us is not None:
                text += f" (p99 {fmt_us(f.p99_us)})"
            brief += f" p50 {fmt_us(f.p50_us)}"
        if bf is not None:
            bsize, _ = _size_phrase(bf.size_hist, bf.mean_size)
            text += f" ({base_name}: {fmt_count(bf.count)}" + (
                f", {bsize.replace(' each', '')})" if bsize else ")"
            )
        if f.seconds is not None:
            text += _share_text(f.seconds, prof)
            fac = _time_factor(
                f"block {d}",
                f.count,
                f"requests/{prof.per}",
                text,
                brief,
                f.seconds,
                bf.seconds if bf is not None else None,
                prof,
                gap,
                bf.count if bf else None,
            )
        else:
            fac = Factor(
                f"block {d}",
                f.count,
                f"requests/{prof.per}",
                text,
                brief,
                bf.count if bf else None,
                weight=_ratio_weight(f.mean_size, bf.mean_size if bf else None)
                + _ratio_weight(f.count, bf.count if bf else None),
            )
        out.append(fac)
    return out


def _readahead_factor(prof: Profile, base: Profile | None, base_name: str) -> list[Factor]:
    if not prof.readahead or not prof.readahead[0]:
        return []
    count, windows = prof.readahead
    window = hist_median(windows)
    if window is None:
        return []
    bwin = hist_median(base.readahead[1]) if base is not None and base.readahead else None
    if bwin is not None and not _differs(window, bwin):
        return []
    d = dominant(windows)
    how = "" if d and d[1] >= DOMINANT else "mostly "
    text = (
        f"readahead (prefetch) windows {how}{size_text(window)} ({fmt_count(count)} per {prof.per})"
    )
    if bwin is not None:
        text += f" ({base_name}: {size_text(bwin)})"
    brief = f"readahead {size_text(window)}" + (f" ({base_name} {size_text(bwin)})" if bwin else "")
    return [
        Factor(
            "readahead",
            float(window),
            "bytes",
            text,
            brief,
            float(bwin) if bwin else None,
            weight=_ratio_weight(window, bwin),
        )
    ]


def _writeback_factor(
    prof: Profile, base: Profile | None, base_name: str, gap: float | None
) -> list[Factor]:
    if not prof.writeback:
        return []
    pauses, pause_s, pages = prof.writeback
    if not pauses and not pause_s:
        return []
    text = (
        f"dirty throttling: {fmt_count(pauses)} balance_dirty_pages pauses per {prof.per}, "
        f"{fmt_time(pause_s)} per {prof.per}"
    ) + _share_text(pause_s, prof)
    if pages is not None:
        text += f"; {fmt_count(pages)} pages written back per {prof.per}"
    base_s = None
    if base is not None and base.writeback is not None:
        base_s = base.writeback[1]
        text += f" ({base_name}: " + (
            f"{fmt_time(base_s)} throttled)" if base_s else "not throttled)"
        )
    brief = f"throttled {fmt_time(pause_s)}/{prof.per}"
    return [
        _time_factor(
            "writeback",
            pause_s,
            f"s/{prof.per}",
            text,
            brief,
            pause_s,
            base_s,
            prof,
            gap,
            base_s,
        )
    ]


def _wakeup_factor(
    prof: Profile, base: Profile | None, base_name: str, env: Environment, gap: float | None
) -> list[Factor]:
    costs = wakeup_costs(env)
    if not prof.sched or costs is None or not prof.seconds:
        return []
    same, cross = costs
    if cross < COSTLY_WAKEUP_RATIO * same:
        return []  # wake-ups across CPUs are cheap here: no story to tell
    wakeups, crossed, migrations = prof.sched
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
            f"that is ≈ {fmt_time(extra)} per {prof.per}" + _share_text(extra, prof)
        )
    if migrations:
        text += f"; {fmt_count(migrations)} migrations"
    base_extra = None
    if base is not None and base.sched is not None:
        base_extra = None if bounded else base.sched[1] * (cross - same) / 1e6
        text += f" ({base_name}: {fmt_count(base.sched[1])} crossed)"
    brief = f"{fmt_short(crossed)} cross-CPU wake-ups/{prof.per}"
    if not bounded:
        brief += f" ≈ {fmt_time(extra)}/{prof.per}"
    return [
        _time_factor(
            "wake-ups",
            crossed,
            f"cross-CPU wake-ups/{prof.per}",
            text,
            brief,
            None if bounded else extra,
            base_extra,
            prof,
            gap,
            base.sched[1] if base is not None and base.sched is not None else None,
        )
    ]


def _cpu_factor(prof: Profile, base: Profile | None, base_name: str) -> list[Factor]:
    if not prof.cpu:
        return []
    total = sum(prof.cpu.values())
    btotal = sum(base.cpu.values()) if base is not None and base.cpu else None
    if btotal is not None and not _differs(total, btotal):
        return []

    def parts(cpu: dict[str, float]) -> str:
        order = ("driver", "app", "kernel_threads")
        return ", ".join(
            f"{_PART_WORDS[k]} {fmt_time(cpu[k])}" for k in order if cpu.get(k, 0) >= 0.005
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
            weight=_ratio_weight(total, btotal),
        )
    ]


def _ctx_factor(prof: Profile, base: Profile | None, base_name: str) -> list[Factor]:
    if prof.ctx is None:
        return []
    # A subject's figure is set only against a subject's, a machine's against a machine's.
    same = base is not None and base.ctx_machine == prof.ctx_machine
    bctx = base.ctx if base is not None and same else None
    if bctx is not None and not _differs(prof.ctx, bctx):
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
            weight=_ratio_weight(prof.ctx, bctx),
        )
    ]


def _amp_factor(prof: Profile, base: Profile | None, base_name: str) -> list[Factor]:
    out = []
    for d, v in prof.amplification.items():
        b = base.amplification.get(d) if base is not None else None
        if b is None or not _differs(v, b):
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
                weight=_ratio_weight(v, b),
            )
        )
    return out


def _placement_factors(
    res: Result, siblings: dict[str, Result], order: Sequence[str]
) -> list[Factor]:
    """Other placements of the same subject and workload against this one."""
    out = []
    here = placement_of(res)
    for where in sorted(
        siblings, key=lambda w: list(PLACEMENT_WORDS).index(w) if w in PLACEMENT_WORDS else 9
    ):
        other = siblings[where]
        if where == here or not usable(other) or not usable(res):
            continue
        c = compare(res, other)
        if c.ratio is None or c.ratio <= 0:
            continue
        faster = c.ratio if res.higher_is_better else 1 / c.ratio
        words = PLACEMENT_WORDS.get(where, f"placement {where}")
        said = outcome(c, res.higher_is_better)
        if said == "same":
            how = f"no different ({fmt_ratio(faster)} the speed)"
        elif said in ("open", "none"):
            how = f"not decidedly different ({fmt_ratio(faster)} the speed)"
        elif faster >= 1:
            how = f"{fmt_ratio(faster)} faster"
        else:
            how = f"{fmt_ratio(1 / faster)} slower"
        text = f"{words} ({where}) {how} than {here}"
        if c.interval is None:
            text += " (too few samples to judge)"
        else:
            text += f" ({interval_text(c)} at {c.confidence * 100:.3g} %: {OUTCOME_WORDS[said]})"
        brief = f"{words} {how}"
        out.append(
            Factor(
                f"placement {where}",
                c.ratio,
                f"ratio to {here}",
                text,
                brief,
                1.0,
                weight=-1.0,  # another comparison than the baseline's: said last
            )
        )
    return out


def explain_result(
    res: Result,
    base: Result | None,
    run: Run,
    siblings: dict[str, Result] | None = None,
    index: int = -1,
    profiles: dict[int, Profile] | None = None,
) -> Explanation:
    """The factors separating `res` from `base` (the baseline result of its workload and
    placement; `res` itself or None when it is the baseline), ranked."""
    cache = profiles if profiles is not None else {}

    def prof_of(r: Result) -> Profile:
        if id(r) not in cache:
            cache[id(r)] = profile(r, run)
        return cache[id(r)]

    prof = prof_of(res)
    is_base = base is None or base is res
    bprof = None if is_base or base is None else prof_of(base)
    if bprof is not None and bprof.per != prof.per:
        bprof = None
    name = base.subject if base is not None else ""
    gap = None
    if bprof is not None and prof.seconds and bprof.seconds:
        g = prof.seconds - bprof.seconds
        # A gap within a few per cent is noise: shares of it would be meaningless.
        if abs(g) >= 0.05 * max(prof.seconds, bprof.seconds):
            gap = g
    env = run.environment
    factors = [
        *_fuse_factors(prof, bprof, name, env, gap),
        *_wakeup_factor(prof, bprof, name, env, gap),
        *_writeback_factor(prof, bprof, name, gap),
        *_block_factors(prof, bprof, name, gap),
        *_readahead_factor(prof, bprof, name),
        *_cpu_factor(prof, bprof, name),
        *_ctx_factor(prof, bprof, name),
        *_amp_factor(prof, bprof, name),
        *floor_factors(res, prof, run, prof_of),
    ]
    factors.sort(key=lambda f: -f.weight)
    factors += _placement_factors(res, siblings or {}, measured_subjects(run))
    return Explanation(
        index=index,
        subject=res.subject,
        title=workload_key(res),
        placement=placement_of(res),
        baseline=None if is_base else name,
        is_baseline=is_base,
        per=prof.per,
        seconds=prof.seconds,
        baseline_seconds=bprof.seconds if bprof else None,
        factors=factors,
        unavailable=prof.unavailable,
        traced_speed=traced_speed(res),
    )


def traced_speed(res: Result) -> float | None:
    """The traced run's speed relative to the timed samples' median (1.0: the probes cost
    nothing; 0.8: the traced run went at 80 % of the timed speed)."""
    v = _num(_d(res.trace).get("value"))
    if not v or not res.median:
        return None
    return v / res.median if res.higher_is_better else res.median / v


def explain_run(run: Run) -> list[Explanation]:
    """An explanation per usable result, in run order."""
    order = measured_subjects(run)
    by_key: dict[str, list[tuple[int, Result]]] = {}
    for i, r in enumerate(run.results):
        by_key.setdefault(workload_key(r), []).append((i, r))
    profiles: dict[int, Profile] = {}
    out: list[Explanation] = []
    for items in by_key.values():
        results = [r for _, r in items]
        for i, r in items:
            if not usable(r):
                continue
            same_place = [x for x in results if placement_of(x) == placement_of(r)]
            base = baseline_result(same_place, order)
            siblings = {placement_of(x): x for x in results if x.subject == r.subject}
            out.append(explain_result(r, base, run, siblings, i, profiles))
    out.sort(key=lambda e: e.index)
    return out


def explanations_for(run: Run, results: Iterable[Result]) -> list[Explanation]:
    wanted = {id(r) for r in results}
    return [e for e in explain_run(run) if id(run.results[e.index]) in wanted]


def run_json(run: Run) -> str:
    """The run as results.json has it plus a derived `explanations` section (one record per
    explained result, `index` into `results`): old readers ignore the extra key."""
    doc = json.loads(run.to_json())
    doc["explanations"] = [e.to_dict() for e in explain_run(run)]
    return json.dumps(doc, indent=2, ensure_ascii=False)


# -- the terminal ---------------------------------------------------------------------------------
def brief_lines(e: Explanation, width: int = 100, max_lines: int = 2) -> list[str]:
    """The explanation in at most `max_lines` lines of `width` columns: the ranked factors that
    fit, in rank order; a placement remark is kept in preference to all but the first."""
    head = f"  {e.subject}" + (f" [{e.placement}]" if e.placement != "free" else "") + ": "
    indent = "    "
    ranked = [f.brief for f in e.factors if not f.name.startswith("placement")]
    place = [f.brief for f in e.factors if f.name.startswith("placement")]

    def pack(items: list[str]) -> list[str] | None:
        lines, line = [], head
        for i, item in enumerate(items):
            piece = item + (";" if i < len(items) - 1 else "")
            if len(line) + len(piece) > width and line != indent:
                lines.append(line.rstrip())
                line = indent
            if len(line) + len(piece) > width:
                return None  # one piece alone is wider than a line
            line += piece + " "
        lines.append(line.rstrip())
        return lines if len(lines) <= max_lines else None

    # The first-ranked factor comes first, then the placement remark, then what still fits.
    chosen: list[str] = ranked[:1] if ranked and pack(ranked[:1]) else []
    if pack([*chosen, *place]) is None:
        place = []
    for item in ranked[len(chosen) :]:
        if pack([*chosen, item, *place]) is None:
            break
        chosen.append(item)
    if not chosen and not place:
        return []
    return pack([*chosen, *place]) or []


# -- diff -----------------------------------------------------------------------------------------
def _fmt_figure(v: float, how: str) -> str:
    if how == "bytes":
        return size_text(v)
    if how == "us":
        return fmt_us(v)
    if how == "s":
        return fmt_time(v)
    return fmt_count(v)


def changed_figures(a: Result, run_a: Run, b: Result, run_b: Run) -> list[str]:
    """Probe figures of the same result in two runs that differ by SAME_WITHIN or more:
    'FUSE WRITE requests per GiB 262,144 → 8,192'. A figure only one run measured is said
    as such, never compared with nothing."""
    pa, pb = profile(a, run_a), profile(b, run_b)
    if pa.per != pb.per:
        return []
    fa = {k: (label, v, how) for k, label, v, how in pa.figures()}
    fb = {k: (label, v, how) for k, label, v, how in pb.figures()}
    out = []
    for k, (label, va, how) in fa.items():
        if k in fb:
            vb = fb[k][1]
            if _differs(va, vb):
                out.append(f"{label} {_fmt_figure(va, how)} → {_fmt_figure(vb, how)}")
        elif pb.fuse is not None and k.startswith("fuse."):
            out.append(f"{label} {_fmt_figure(va, how)} → none")
    for k, (label, vb, how) in fb.items():
        if k not in fa and pa.fuse is not None and k.startswith("fuse."):
            out.append(f"{label} none → {_fmt_figure(vb, how)}")
    return out
