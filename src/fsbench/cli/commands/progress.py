"""What a measuring command shows while it runs. On a terminal: rich's live bar, which goes
away when the run ends. Elsewhere (CI, `2>log`, a pipe), where a live display would show
nothing at all: one plain line per finished sample (subject, workload, its number, its value or
why it failed, the time budget left) and one per lab step, so a log is never silent for
minutes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from fsbench.records.schema import Result
    from fsbench.schedule.plan import Plan


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    return f"~{s // 60}:{s % 60:02d} left"


class LogLines:
    """The run's progress as plain lines on `out`, each flushed as it is written."""

    def __init__(self, out: TextIO, repeat: int | None, budget_s: float | None, started: float):
        self.out = out
        self.repeat = repeat  # samples planned per result (None: adaptive)
        self.budget_s = budget_s
        self.started = started  # time.monotonic() at the command's start: the budget's origin
        self.eta: float | None = None  # the runner's estimate of the measuring left

    def left(self) -> str:
        """The time budget left; without one (fixed rounds), the runner's estimate."""
        if self.budget_s is not None:
            used = time.monotonic() - self.started
            return f"budget {max(0.0, self.budget_s - used):.0f} s left"
        return eta_text(self.eta) or "time left: after the first round"

    def step(self, message: str) -> None:
        # A sample's own steps are said once, when it has finished (result).
        if " · sample " in message or message.endswith(" · warm-up"):
            return
        self._line(message)

    def result(self, res: Result) -> None:
        from fsbench.units import fmt_value

        of = f"/{self.repeat}" if self.repeat else ""
        if res.status == "ok" and res.samples:
            said = f"{fmt_value(res.samples[-1])} {res.unit}"
        else:
            said = f"{res.status}: {res.error}"
        wid = res.workload_id or res.workload
        self._line(f"{res.subject} · {wid} · sample {len(res.samples)}{of}: {said} · {self.left()}")

    def _line(self, text: str) -> None:
        s = round(time.monotonic() - self.started)
        self.out.write(f"fsbench [{s // 60}:{s % 60:02d}] {text}\n")
        self.out.flush()


@contextmanager
def shown(err: Console, plan: Plan) -> Iterator[dict[str, Callable[..., Any]]]:
    """The callbacks of pipeline.execute for this run: the live bar on a terminal, LogLines
    on any other stderr."""
    if not err.is_terminal:
        log = LogLines(err.file, None if plan.adaptive else plan.repeat, plan.time_budget_s,
                       plan.started)  # fmt: skip
        yield {"on_step": log.step, "on_result": log.result,
               "on_eta": lambda s: setattr(log, "eta", s)}  # fmt: skip
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("preparing", total=None, eta="")
        yield {
            "on_step": lambda m: progress.update(task, description=m),
            "on_sample": lambda: progress.advance(task),
            "on_total": lambda total: progress.update(task, total=total),
            "on_eta": lambda s: progress.update(task, eta=eta_text(s)),
        }
