"""`fsbench tune SUBJECT`: the changes the explanation points at, measured and ranked.

Thin: the options are compare's (fsbench.cli.options, at their defaults unless given here), the
work is fsbench.tune.session's, the words fsbench.report.views.tune's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from fsbench.cli import options
from fsbench.cli.options import db_option

DEFAULT_BUDGET_S = 540.0  # within 10 minutes with the last run's report and checks


def _options(workloads: str | None, db: Path | None, size: str | None) -> dict[str, Any]:
    """compare's options at their defaults, with the few tune takes, checked as compare's."""
    return options.parse("compare", {"workloads": workloads, "db": db, "size": size})


@click.command("tune")
@click.argument("subject")
@click.option("--against", default="fastest", show_default=True, metavar="SUBJECT|fastest",
              help="The reference the gap is measured to; fastest: the fastest kernel driver "
              "of the subject's format and ext4.")  # fmt: skip
@click.option("--workloads", metavar="W1,W2,...",
              help="Comma-separated workloads (default: the default suite's).")  # fmt: skip
@click.option("--time-budget", "budget", default=str(DEFAULT_BUDGET_S), show_default=True,
              metavar="S", help="Seconds for the whole tune: candidates that do not fit are "
              "listed as skipped.")  # fmt: skip
@click.option(
    "--allow-unsafe",
    is_flag=True,
    help="Also measure changes that trade durability or change semantics (labelled).",
)
@click.option(
    "--size",
    default=None,
    metavar="SIZE",
    help="The untuned image size (default 1G); a remedy that needs more gets more.",
)
@db_option
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for the tune's results.json, report.html and each step's run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the tune record as JSON.")
@click.option("--dry-run", is_flag=True, help="Print the first step's plan and every remedy for "
              "the driver with what would become of it; nothing is made or measured.")  # fmt: skip
def tune(
    subject: str,
    against: str,
    workloads: str | None,
    budget: str,
    allow_unsafe: bool,
    size: str | None,
    db: Path | None,
    out: Path | None,
    as_json: bool,
    dry_run: bool,
) -> None:
    """Measure the changes that would close SUBJECT's gap to a faster driver, and rank them."""
    from fsbench.lab.subject import parse_subject
    from fsbench.report.views.tune import terminal
    from fsbench.schedule.plan import check_out_dir, default_out_dir, new_run_id
    from fsbench.tune.session import Request, Tuner

    budget_s = options.positive(float, 10**6)("--time-budget", budget)
    parse_subject(subject)  # refused before anything is made
    if against != "fastest":
        parse_subject(against)
    o = _options(workloads, db, size)
    out_dir = out if out is not None else default_out_dir("tune-" + new_run_id())
    check_out_dir(out_dir)
    if not o["workloads"] and not o["suite"]:
        o["suite"] = "default"
    req = Request(subject, against, o, sys.argv, budget_s, allow_unsafe, out_dir)
    if dry_run:
        _dry_run(Tuner(req, lambda _m: None), as_json)
        return
    err = Console(stderr=True)
    with err.status("tune: starting", spinner="dots") as status:

        def step(msg: str) -> None:
            if err.is_terminal:
                status.update(msg)
            else:
                click.echo(msg, err=True)

        tuner = Tuner(req, step)
        run, record, code = tuner.run()
    if as_json:
        click.echo(json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        con = Console()
        for part in terminal(run):
            con.print(part)
        con.print(f"[dim]stored as run {run.run_id}; {out_dir / 'report.html'}[/]")
    sys.exit(code)


def _dry_run(tuner: Any, as_json: bool) -> None:
    from fsbench.schedule.dryrun import lines

    p = tuner.preview()
    if as_json:
        click.echo(json.dumps(p, indent=2, ensure_ascii=False))
        return
    click.echo(f"tune {tuner.spec.id} against {tuner.req.against}: budget {p['budget_s']:g} s; "
               "step 1 (explain):")  # fmt: skip
    for line in lines(p["explain"]):
        click.echo(f"  {line}")
    click.echo("remedies for this driver (step 2 measures those the explanation points at):")
    for r in p["remedies"]:
        click.echo(f"  {r['name']} ({r['kind']} {r['change']}, {r['safety']}): {r['would']}")
