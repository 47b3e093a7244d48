"""`--dry-run`: the plan of a `compare` or `run` as data and as lines, before anything exists.

`describe(plan)` reads the checked plan (fsbench.schedule.plan) and the drivers', formats' and
workloads' records: the subjects, the workloads with their variants, the rounds and the budget,
the images and their sizes, what runs in a VM, and what is skipped and why. It formats, mounts,
attaches, fetches and measures nothing, so it answers in well under the 2 s a script may
wait; `lines(desc)` is what the terminal prints. Any verb with a Plan (compare, run, tune)
can show it.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import psutil

from fsbench.errors import EXIT_ENVIRONMENT, EXIT_USAGE
from fsbench.lab.backing import format_size
from fsbench.lab.drivers import availability
from fsbench.lab.formats import FORMATS
from fsbench.schedule.plan import Plan, vm_hint
from fsbench.workloads.base import NEED_WORDS

SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
# The image directory's name has the run's id, unknown until the run starts.
RUN_DIR = "fsbench-RUN_ID"


def describe(plan: Plan, vm: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The plan as one JSON-ready record (`--dry-run --json` prints it). `vm`: the guest
    kernels' rows from fsbench.vm.preview, when subjects run in VMs."""
    specs = plan.subjects or []
    workloads = [
        {
            "id": str(w.id),
            "name": str(getattr(w, "name", str(w.id))),
            "variant": w.variant,
            "placement": w.placement,
            # A fixed file and a pass length, where the workload has them (KDiskMark's
            # --diskmark-size and --diskmark-runtime, the Iozone cells' file sizes).
            **({"file_size": w.file_size} if getattr(w, "file_size", None) else {}),
            **({"runtime_s": w.runtime_s} if getattr(w, "runtime_s", None) else {}),
        }
        for w in plan.workloads
    ]
    results = len(specs) * len(plan.workloads) if plan.subjects is not None else len(workloads)
    refused = refusals(plan)
    return {
        "dry_run": True,
        "subjects": [
            {
                "id": s.id,
                "driver": s.driver.name,
                "fs": s.driver.fs,
                "kind": s.driver.kind,
                "mount_options": s.options,
                "age": s.age,
            }
            for s in specs
        ],
        "target": str(plan.target_dir) if plan.target_dir is not None else None,
        "workloads": workloads,
        "rounds": {
            "repeat": "auto" if plan.adaptive else plan.repeat,
            "samples_at_least": plan.repeat,
            "samples_at_most": plan.max_repeat if plan.adaptive else plan.repeat,
            "warmup": plan.warmup,
            "min_sample_s": plan.min_sample_s,
            "results_on_host": results,
        },
        "budget_s": plan.time_budget_s,
        "images": images(plan),
        "vm": vm or [],
        "skipped": skipped(plan),
        "refused": [why for why, _ in refused],
        # What the real run would exit with: its first refusal's code (3: this machine, 2:
        # the input), 0 when nothing is refused; `--dry-run` exits with it.
        "exit_code": refused[0][1] if refused else 0,
        "out_dir": str(plan.out_dir),
        "db": str(plan.db),
    }


def images(plan: Plan) -> dict[str, Any]:
    """What the lab would make: one pristine image per format, formatted once, and a copy of
    it per subject (fsbench.lab.Lab.prepare), where the backing puts them."""
    b = plan.backing
    if plan.subjects is None:
        return {"backing": b.describe(), "note": "an existing directory: nothing is formatted "
                "or mounted by fsbench", "per_subject": []}  # fmt: skip
    specs = plan.subjects
    where = {
        "ram": f"/dev/shm/{RUN_DIR} (memory, filled before measuring)",
        "file": f"{b.path}/{RUN_DIR} (written in full, loops with direct I/O, dealt out again "
        "every round)",
        "device": f"{b.path} itself (formatted once per format)"
        if not plan.read_only
        else f"{b.path} read-only, as it is",
    }[b.kind]
    formats = list(dict.fromkeys((s.driver.fs, s.age) for s in specs))
    pristine = [
        {"format": fs, "age": age, "size": plan.size,
         "made_by": "formatted once: " + " ".join(FORMATS[fs].command("LOOP")) if age == "none"
         else f"aged ({age}): from the aged-image cache, made once if absent"}
        for fs, age in formats
    ]  # fmt: skip
    per_subject = [{"subject": s.id, "format": s.driver.fs, "size": plan.size} for s in specs]
    out: dict[str, Any] = {"backing": b.describe(), "where": where, "image_size": plan.size,
                           "pristine": pristine, "per_subject": per_subject}  # fmt: skip
    if b.kind == "ram":
        # As Lab.check counts it: pristine images are freed once copied, one lives at a time.
        out["memory_at_most"] = plan.size * (len(specs) + min(1, len(formats)))
    return out


def skipped(plan: Plan) -> list[dict[str, str]]:
    """Subjects left out (not available here) and workloads a subject's driver cannot run
    (its `needs` against the driver's record; the mount's own probes may find more)."""
    out = [
        {"subject": s.id, "workload": "", "why": s.error or "not available",
         **({"in_vm": s.available_in} if s.available_in else {})}
        for s in plan.unavailable
    ]  # fmt: skip
    for spec in plan.subjects or []:
        d = spec.driver
        caps = {"posix_permissions": d.posix_permissions, "symlinks": d.symlinks,
                "direct_io": d.direct_io}  # fmt: skip
        for w in plan.workloads:
            lacks = [n for n in w.needs if caps.get(n) is False]
            if lacks:
                words = NEED_WORDS.get(lacks[0], lacks[0])
                why = f"needs {words}: {d.fs} has none (driver capability)"
                out.append({"subject": spec.id, "workload": str(w.id), "why": why})
    return out


def refusals(plan: Plan) -> list[tuple[str, int]]:
    """What the real run would refuse before creating anything, as far as can be known
    without side effects (fsbench.lab.Lab.check also builds or fetches what it lacks), in the
    order Lab.check meets it, each with the exit code the run would end with."""
    specs = plan.subjects or []
    out: list[tuple[str, int]] = []
    if specs and os.geteuid() != 0:
        out.append(("formatting and mounting need root", EXIT_ENVIRONMENT))
    for spec in specs:
        av = availability(spec.driver)
        if not av.available:  # with the kernel that has it, as the run's refusal names it
            why = f"driver {spec.driver.name} is not available: {av.reason}{vm_hint(specs)}"
            out.append((why, EXIT_ENVIRONMENT))
    for fs in dict.fromkeys(s.driver.fs for s in specs):
        fmt = FORMATS[fs]
        if shutil.which(fmt.tool, path=SBIN) is None:
            out.append((f"{fmt.tool} is missing (apt-get install {fmt.package})", EXIT_ENVIRONMENT))
        if plan.backing.kind != "device" and plan.size < fmt.min_size:
            out.append((f"--size {format_size(plan.size)} is too small for {fs}: at least "
                        f"{format_size(fmt.min_size)}", EXIT_USAGE))  # fmt: skip
    need = images(plan).get("memory_at_most")
    avail = psutil.virtual_memory().available
    if need and need > 0.7 * avail:
        out.append((f"the RAM images need {format_size(need)}; {format_size(avail)} is free",
                    EXIT_ENVIRONMENT))  # fmt: skip
    return out


def lines(desc: dict[str, Any]) -> list[str]:
    """The plan in words, one fact a line (what `--dry-run` prints)."""
    out = ["plan (dry run: nothing is formatted, mounted, fetched or measured)"]
    subs = desc["subjects"]
    if desc["target"]:
        out.append(f"target: {desc['target']} (an existing directory)")
    else:
        named = ", ".join(_subject_text(s) for s in subs) or "none"
        out.append(f"subjects on this kernel ({len(subs)}): {named}")
    wl = desc["workloads"]
    out.append(f"workloads ({len(wl)}): " + ", ".join(w["id"] for w in wl))
    dm = [w for w in wl if w["name"] == "diskmark"]
    if dm:
        size = dm[0].get("file_size")
        file = format_size(size) if size else "the subject's share of the image"
        out.append(f"  KDiskMark tests: test file {file}, passes of at most "
                   f"{dm[0].get('runtime_s')} s")  # fmt: skip
    r = desc["rounds"]
    reps = (f"auto: {r['samples_at_least']} to {r['samples_at_most']} samples a result"
            if r["repeat"] == "auto" else f"{r['repeat']} samples a result")  # fmt: skip
    out.append(f"rounds: {reps}, subjects interleaved; warm-up {r['warmup']}, a sample "
               f"≥ {r['min_sample_s']:g} s; {r['results_on_host']} results")  # fmt: skip
    b = desc["budget_s"]
    out.append(f"budget: {b:g} s from the command's start for extra rounds" if b is not None
               else "budget: none (a fixed number of rounds)")  # fmt: skip
    out.extend(_image_lines(desc["images"]))
    for g in desc["vm"]:
        state = f"cached, {g['release']}" if g["cached"] else "fetched on first use (~100 MB)"
        extra = f" (+ {', '.join(g['anchors'])} as the anchor)" if g["anchors"] else ""
        out.append(f"in a VM, kernel {g['kernel']} ({state}): "
                   f"{', '.join(g['subjects']) or 'nothing'}{extra}")  # fmt: skip
        out.append(f"  {g['how']}")
        out.extend(f"  skipped there: {s['subject']}: {s['why']}" for s in g["skipped"])
    for s in desc["skipped"]:
        what = f"{s['subject']} · {s['workload']}" if s["workload"] else s["subject"]
        vm = f" (in a VM: --kernel {s['in_vm']})" if s.get("in_vm") else ""
        out.append(f"skipped: {what}: {s['why']}{vm}")
    out.extend(f"would be refused: {why}" for why in desc["refused"])
    out.append(f"results: {desc['out_dir']}/results.json · store: {desc['db']}")
    return out


def _subject_text(s: dict[str, Any]) -> str:
    aged = "" if s["age"] == "none" else f", aged {s['age']}"
    return f"{s['id']} ({s['kind']}, {s['fs']}{aged})"


def _image_lines(im: dict[str, Any]) -> list[str]:
    if not im["per_subject"]:
        return [f"images: none ({im['note']})"] if im.get("note") else []
    size = format_size(im["image_size"])
    out = [f"images: {len(im['per_subject'])} of {size} on {im['where']}"]
    for p in im["pristine"]:
        out.append(f"  {p['format']}: {p['made_by']}; copied per subject")
    if "memory_at_most" in im:
        out.append(f"  memory at most {format_size(im['memory_at_most'])}")
    return out
