"""Multi-client runs (fio client/server mode): total and per-client rate against the number of
clients, and a table of what each client got. Reads finished `Run` records only."""

from __future__ import annotations

from dataclasses import dataclass

from fsbench.report.model import Result, Run
from fsbench.report.plots.figure import PAGE_WIDTH_IN, Plot, centre, headed, new_figure, styled


def _series_key(r: Result) -> tuple[str, str]:
    p = r.params
    title = f"{r.workload}/{p['variant']}" if p.get("variant") else r.workload
    if p.get("numjobs") not in (None, 1):
        title += f"-j{p['numjobs']}"
    return r.subject, title


def sweeps(run: Run) -> dict[tuple[str, str], dict[int, Result]]:
    """Multi-client results by (subject, workload), then by number of clients."""
    out: dict[tuple[str, str], dict[int, Result]] = {}
    for r in run.results:
        n = r.params.get("clients")
        if isinstance(n, int) and r.status == "ok" and r.median is not None:
            out.setdefault(_series_key(r), {})[n] = r
    return out


@styled
def scaling_plots(run: Run) -> list[Plot]:
    """One plot per workload measured at two or more client counts."""
    plots = []
    for (subject, title), by_n in sweeps(run).items():
        if len(by_n) < 2:
            continue
        ns = sorted(by_n)
        unit = by_n[ns[0]].unit
        fig = new_figure(PAGE_WIDTH_IN, 3.6)
        ax = fig.subplots(1, 1)
        # At the centre its interval (ci95) is about, the one every table prints.
        totals = [centre(by_n[n]) or 0.0 for n in ns]
        lo = [t - (by_n[n].ci95 or (t, t))[0] for n, t in zip(ns, totals, strict=True)]
        hi = [(by_n[n].ci95 or (t, t))[1] - t for n, t in zip(ns, totals, strict=True)]
        ax.errorbar(
            ns, totals, yerr=[lo, hi], marker="o", capsize=3, label="total", color="#1f77b4"
        )
        per_mean = []
        for n in ns:
            figs = by_n[n].clients or []
            rates = [c.mib_s for c in figs]
            per_mean.append(sum(rates) / len(rates) if rates else 0.0)
            ax.scatter([n] * len(rates), rates, color="#ff7f0e", s=12, alpha=0.7)
        ax.plot(ns, per_mean, marker="s", color="#ff7f0e", label="per client (mean; dots: each)")
        ideal = [totals[0] / ns[0] * n for n in ns]
        ax.plot(ns, ideal, ls=":", color="#7f7f7f", label="linear from the first count")
        ax.set_xticks(ns)
        ax.set_xlabel("clients")
        ax.set_ylabel(f"{unit} (median)")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside right upper")
        plots.append(
            headed(
                fig,
                "clients-scaling-" + "".join(ch if ch.isalnum() else "-" for ch in title),
                f"{title}: scaling with clients",
                f"{title} on {subject}: scaling with clients",
                "Total: fio's 'All clients' figure (every client's bytes over the longest "
                "runtime); per client: each client's own bytes over its runtime. Where the "
                "total leaves the dotted line, the shared file system stops scaling.",
            )
        )
    return plots


@dataclass
class ClientRow:
    result: str
    client: str
    mib_s: float
    iops: float
    p99_us: float | None
    usr_cpu: float
    sys_cpu: float


def client_rows(run: Run) -> list[ClientRow]:
    """Per client of every multi-client result: medians over its samples."""
    rows = []
    for (subject, title), by_n in sweeps(run).items():
        for n in sorted(by_n):
            for c in by_n[n].clients or []:
                rows.append(
                    ClientRow(
                        f"{title}-c{n} · {subject}",
                        c.client,
                        c.mib_s,
                        c.iops,
                        c.lat_us.get("p99"),
                        c.usr_cpu,
                        c.sys_cpu,
                    )
                )
    return rows
