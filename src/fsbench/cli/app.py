"""Command line: parse, call, render. No measurement logic lives here.

Errors become one line on stderr and an exit code from fsbench.errors; never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fsbench import __version__
from fsbench.cli import options
from fsbench.errors import (
    EXIT_FAILED,
    EXIT_INTEGRITY,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    FsbenchError,
    UsageError,
)

err = Console(stderr=True)


def _fail(e: FsbenchError) -> None:
    click.echo(f"fsbench: {e}", err=True)
    sys.exit(e.exit_code)


class _Group(click.Group):
    """Turns fsbench's own errors into one line and an exit code, whichever command raised."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except FsbenchError as e:
            _fail(e)
        except KeyboardInterrupt:
            click.echo("fsbench: interrupted", err=True)
            sys.exit(130)
        return None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fsbench")
def cli() -> None:
    """Which file system, driver and mount options are fastest here, at what CPU cost, and why."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def doctor(as_json: bool) -> None:
    """What formats, drivers and tools exist here; what is missing and how to install it."""
    from fsbench.environment import doctor as run_doctor

    info = run_doctor()
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    con = Console()
    con.print(
        f"kernel {info['kernel']} · root: {_yn(info['root'])} · /dev/fuse: "
        f"{_yn(info['fuse'])} · loop devices: {_yn(info['loop'])}"
    )
    t = Table(title="drivers", title_justify="left")
    for c in ("driver", "format", "kind", "available", "version / why not"):
        t.add_column(c)
    for d in info["drivers"]:
        t.add_row(
            d["name"],
            d["fs"],
            d["kind"],
            _yn(d["available"]),
            d["version"] if d["available"] else f"[dim]{d['reason']}[/]",
        )
    con.print(t)
    for note in info.get("notes", []):
        con.print(f"[yellow]note:[/] {note}")
    w = info.get("wakeup_us") or {}
    if w.get("measured"):
        style = "yellow" if w["costly"] else "green"
        con.print(f"[{style}]wake-ups:[/] {w['verdict']}")
    elif w:
        con.print(f"[dim]wake-ups: not measured ({w['reason']})[/]")
    t = Table(title="formats and tools", title_justify="left")
    for c in ("name", "available", "version / install"):
        t.add_column(c)
    for f in info["formats"]:
        t.add_row(f"mkfs {f['name']}", _yn(f["available"]), f["reason"] or " ".join(f["mkfs"]))
    for tool in info["tools"]:
        t.add_row(tool["name"], _yn(tool["available"]), tool["version"] or tool["install"])
    con.print(t)
    t = Table(title="kernel trace probes", title_justify="left")
    for c in ("probe", "available", "tracepoints / why not", "yields"):
        t.add_column(c)
    for p in info.get("trace_probes", []):
        ok = p["status"] == "ok"
        t.add_row(
            p["name"],
            _yn(ok),
            ", ".join(p["tracepoints"]) if ok else f"[dim]{p['status']}[/]",
            p["yields"],
        )
    con.print(t)
    if info.get("fuse_transports"):
        _print_transports(con, info["fuse_transports"])
    if info.get("kernels"):
        _print_kernels(con, info["kernels"])


def _print_transports(con: Console, rows: list[dict[str, Any]]) -> None:
    """FUSE transports for the daemons fsbench builds (passthrough_hp[:uring|:passthrough],
    fuse2fs-3.18[:uring])."""
    title = "FUSE transports (passthrough_hp[:TRANSPORT], fuse2fs-3.18[:uring])"
    t = Table(title=title, title_justify="left")
    for c in ("transport", "available", "what it is / why not"):
        t.add_column(c)
    for r in rows:
        t.add_row(
            r["name"],
            _yn(r["available"]),
            r["description"] if r["available"] else f"[dim]{r['reason']}[/]",
        )
    con.print(t)


def _print_kernels(con: Console, vms: dict[str, Any]) -> None:
    """The kernels `compare --kernel NAME` can boot, and the drivers each adds."""
    t = Table(
        title=f"kernels for --kernel (VMs here: {vms['virtualization']})", title_justify="left"
    )
    for c in ("name", "cached", "release / source", "adds to this host", "drivers"):
        t.add_column(c)
    for k in vms["kernels"]:
        drivers = ", ".join(k["drivers"]) if k["cached"] else "[dim]fetched on first use[/]"
        adds = ", ".join([*k["adds"], *k.get("features", [])])
        t.add_row(k["name"], _yn(k["cached"]), k["release"] or k["source"], adds, drivers)
    con.print(t)
    if vms["why_emulated"]:
        from fsbench.report.model.vm_notes import SMALL_FLAGS, emulation_caveat

        con.print(
            f"[yellow]note:[/] {emulation_caveat(vms['why_emulated'])}; keep the check small: "
            f"fsbench compare DRIVER ... --kernel NAME {SMALL_FLAGS}",
            soft_wrap=False,
        )


def _yn(v: bool) -> str:
    return "[green]yes[/]" if v else "[red]no[/]"


@cli.command("list")
@click.argument("what", type=click.Choice(["drivers", "workloads", "suites"]))
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_(what: str, as_json: bool) -> None:
    """List drivers, workloads or suites."""
    from fsbench.lab.drivers import availability
    from fsbench.registry import DRIVERS, SUITES, WORKLOADS

    rows: list[dict]
    if what == "drivers":
        rows = [
            {
                "name": d.name,
                "fs": d.fs,
                "kind": d.kind,
                "description": d.description,
                "available": availability(d).available,
                # Documented mount options, each usable as a subject (`ntfs:windows_names`).
                "options": list(d.known_options),
                "capabilities": {
                    "posix_permissions": d.posix_permissions,
                    "symlinks": d.symlinks,
                    "direct_io": d.direct_io,
                },
            }
            for d in DRIVERS.values()
        ]
    elif what == "workloads":
        rows = [
            {
                "id": wid,
                "name": w.name,
                "description": w.description,
                "metric": w.metric,
                "unit": w.unit,
                "cache": w.cache,
            }
            for wid, w in WORKLOADS.items()
        ]
    else:
        rows = [{"name": k, **v} for k, v in SUITES.items()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    t = Table(title=what, title_justify="left")
    hidden = {"capabilities", "metric"} | ({"name"} if what == "workloads" else set())
    keys = [k for k in rows[0] if k not in hidden] if rows else []
    for k in keys:
        t.add_column(k)
    for r in rows:
        t.add_row(*[", ".join(v) if isinstance(v, list) else str(v) for v in (r[k] for k in keys)])
    Console().print(t)


@cli.command()
@click.argument("subjects", nargs=-1)
@options.click_options("compare")
def compare(subjects: tuple[str, ...], **raw: Any) -> None:
    """Compare drivers (SUBJECT = driver[:mount-options]); none given: every available one."""
    from fsbench.schedule.plan import resolve_subjects

    o = options.parse("compare", raw, subjects)
    b = o["backing"]
    if b.kind == "dir":
        if subjects:
            raise UsageError("dir: backing measures the directory itself; give no subjects")
        _run_dir(Path(b.path or "."), o)
        return
    from fsbench.cli.vm_options import plan_fields, wants_vm

    if wants_vm(subjects, o["kernel"]) and o["dry_run"]:
        _dry_run_vm(subjects, o, raw)
        return
    if wants_vm(subjects, o["kernel"]):
        fields = plan_fields(subjects, o, raw)
        if fields is not None:
            _go(o, backing=b, size=o["size"], tune=not o["no_tune"], **fields)
            return
    specs, skipped, explicit = resolve_subjects(list(subjects))
    if o["age"]:
        from fsbench.lab.subject import with_ages

        specs = with_ages(specs, o["age"])
    _go(
        o,
        subjects=specs,
        explicit=explicit,
        unavailable=skipped,
        backing=b,
        size=o["size"],
        read_only=o["read_only"],
        destroy_data=o["destroy_data"],
        tune=not o["no_tune"],
        integrity=not o["no_integrity"],
        age_seed=o["age_seed"],
    )


@cli.command("run")
@options.click_options("run")
def run_cmd(**raw: Any) -> None:
    """Run workloads on an existing directory: no root needed."""
    o = options.parse("run", raw)
    _run_dir(o["target"], o)


def _run_dir(target: Path, o: dict[str, Any]) -> None:
    from fsbench.lab.backing import Backing

    d = target.resolve()
    _go(o, subjects=None, explicit=True, backing=Backing("dir", str(d)), size=0, target_dir=d)


def _go(o: dict[str, Any], **plan_fields: Any) -> None:
    """Run the plan the checked options (fsbench.cli.options) resolve to, with a progress bar, and
    render what it measured."""
    from fsbench.schedule.plan import plan_from_options

    vm_rows = plan_fields.pop("vm_rows", None)
    plan = plan_from_options(o, sys.argv, options.DEFAULT_TIME_BUDGET_S, **plan_fields)
    if o["dry_run"]:
        _print_plan(plan, vm_rows, o["as_json"])
        return
    from fsbench.cli.commands.progress import shown
    from fsbench.pipeline import execute
    from fsbench.report.views.sections import render

    out_dir, as_json = plan.out_dir, o["as_json"]
    with shown(err, plan) as callbacks:
        run, code = execute(plan, **callbacks)
    if as_json:
        from fsbench.report.model.explain import run_json

        click.echo(run_json(run))
    else:
        render(run, Console(), str(out_dir), verbose=o["verbose"])
    if code == EXIT_INTERRUPTED:
        click.echo(
            "fsbench: interrupted; finished samples are kept (run marked incomplete)", err=True
        )
    if code == EXIT_INTEGRITY:
        from fsbench.pipeline import damaged

        click.echo(
            f"fsbench: integrity check failed on {', '.join(damaged(run))}: its volume was "
            "damaged by the run (results stored and shown above, never ranked)",
            err=True,
        )
    sys.exit(code)


def _dry_run_vm(subjects: tuple[str, ...], o: dict[str, Any], raw: dict[str, Any]) -> None:
    """`--dry-run` with guest kernels: the VM stage previewed (nothing fetched or booted)."""
    from fsbench.cli.vm_options import refuse_in_vm
    from fsbench.vm import preview

    host, rows = preview(list(subjects), o["kernel"])
    if rows:
        refuse_in_vm(o)
    _go(o, subjects=host, explicit=True, backing=o["backing"], size=o["size"], vm_rows=rows)


def _print_plan(plan: Any, vm_rows: list[dict] | None, as_json: bool) -> None:
    from fsbench.schedule.dryrun import describe, lines

    desc = describe(plan, vm_rows)
    if as_json:
        click.echo(json.dumps(desc, indent=2))
    else:
        for line in lines(desc):
            click.echo(line)
    if desc["exit_code"]:  # the code the real run would end with: a script can check a plan
        sys.exit(desc["exit_code"])


@cli.command()
@click.argument("run_ref", metavar="RUN", required=False)
@click.option("--list", "list_runs", is_flag=True, help="List the stored runs instead.")
@options.db_option
@click.option("--json", "as_json", is_flag=True, help="Print the run's results.json to stdout.")
@click.option("--verbose", "-v", is_flag=True, help="Every subject's notes under each table.")
def show(
    run_ref: str | None, list_runs: bool, db: Path | None, as_json: bool, verbose: bool
) -> None:
    """Print a stored run again, as `compare` printed it (RUN = run id, unique prefix, or
    output directory).

    """
    from fsbench.cli.commands.report import load_run, out_dir_of
    from fsbench.records.store import Store, default_db_path
    from fsbench.report.views.sections import render

    if not list_runs and not run_ref:
        raise UsageError("give a RUN (id, prefix or output directory) or --list")
    db_path = db or default_db_path()
    is_path = run_ref is not None and Path(run_ref).exists()
    if not db_path.exists() and not is_path and not list_runs:
        # Looking must not create: no store yet means no runs yet.
        raise UsageError(f"no run {run_ref!r}: no runs stored yet ({db_path} does not exist)")
    if list_runs and not db_path.exists():
        runs: list[dict] = []
    else:
        with Store(db_path) as store:
            if list_runs:
                runs = store.list_runs(limit=50)
            else:
                run = load_run(store, run_ref or "")
                out_dir = out_dir_of(store, run_ref or "", run)
    if list_runs:
        if as_json:
            click.echo(json.dumps(runs, indent=2))
            return
        t = Table(title="stored runs", title_justify="left")
        for c in ("run", "started", "status", "subjects", "results", "command"):
            t.add_column(c)
        for r in runs:
            cmd = " ".join(r["command"][1:]) if isinstance(r["command"], list) else ""
            t.add_row(
                r["run_id"],
                r["started"],
                r["status"],
                str(r["n_subjects"]),
                str(r["n_results"]),
                cmd,
            )
        Console().print(t)
        return
    if as_json:
        from fsbench.report.model.explain import run_json

        click.echo(run_json(run))
    else:
        # As the live output ends: where results.json (and report.html) are.
        render(run, Console(), str(out_dir) if out_dir else None, verbose=verbose)


@cli.command()
@click.option(
    "--all",
    "include_running",
    is_flag=True,
    help="Also release runs whose fsbench process still exists.",
)
def cleanup(include_running: bool) -> None:
    """Release what an interrupted or killed run left: mounts, daemons, loops, images, and
    loops over deleted fsbench images that a file system frozen at the kill still pins."""
    from fsbench.lab.state import cleanup_all, failures

    notes, skipped = cleanup_all(include_running)
    for n in notes:
        click.echo(n)
    for s in skipped:
        click.echo(f"run {s} is still running; left alone (use --all to force)", err=True)
    if not notes and not skipped:
        click.echo("nothing to clean up")
    failed = failures(notes)
    if failed:
        click.echo(f"fsbench cleanup: {len(failed)} step(s) failed (above)", err=True)
        raise click.exceptions.Exit(EXIT_FAILED)


from fsbench.cli.commands.verify import hash_tree as _hash  # noqa: E402
from fsbench.cli.commands.verify import verify as _verify  # noqa: E402

cli.add_command(_verify)
cli.add_command(_hash)


from fsbench.cli.commands.report import diff as _diff  # noqa: E402
from fsbench.cli.commands.report import export as _export  # noqa: E402
from fsbench.cli.commands.report import report as _report  # noqa: E402

cli.add_command(_report)
cli.add_command(_diff)
cli.add_command(_export)

from fsbench.cli.commands.tune import tune as _tune  # noqa: E402

cli.add_command(_tune)

from fsbench.cli.commands.judge import judge_command as _judge  # noqa: E402

cli.add_command(_judge)

from fsbench.cli.commands.docs import add_examples  # noqa: E402

add_examples(cli)
options.refuse_repeats(cli)


def main() -> None:
    try:
        # Without standalone mode click returns a command's Exit code instead of exiting.
        code = cli.main(standalone_mode=False, prog_name="fsbench")
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("fsbench: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except FsbenchError as e:
        _fail(e)
    except KeyboardInterrupt:
        click.echo("fsbench: interrupted", err=True)
        sys.exit(130)
