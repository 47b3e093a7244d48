"""A user's own fio job file as a workload: `--workloads fio:PATH[:cache=cold]`.

The file is checked before anything is formatted: fio parses it (`--parse-only`, its own
message when it refuses), and every `filename`/`directory` must stay inside the subject's
mount (fio runs with the mount as its working directory, so relative names land there; an
absolute one, `filename=/dev/sda` the classic case, is refused with its line and section).
Every other option is the file's own.

One result per phase: the sections between two serialization points (`stonewall`,
`wait_for_previous`) run together, as fio runs them, and are one fio process
(`--section=A --section=B`), so the probes around it (daemon and kernel-thread CPU, device
counters, cache state) belong to that phase alone. A phase of one section is that section's
result; sections that run concurrently share one (their sum: fio's aggregate rule, all bytes
over the longest job's runtime), each job's own figures in the sample's `extra["jobs"]`.
Files are laid out untimed before each run (`--create_only=1`), as fio would before its clock.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fsbench.errors import UsageError, WorkloadFailed
from fsbench.workloads.base import IO_EXTRAS, Declared, Measurement, Target, measured_child
from fsbench.workloads.fio import fio_binary, fio_error, fio_measurement
from fsbench.workloads.fiojson import LAT_ARGS, fio_json, latency_figures

PREFIX = "fio:"
# Options that name where fio's data goes: each must stay inside the mount.
PATH_OPTIONS = ("filename", "directory", "filename_format", "opendir")
SERIAL = ("stonewall", "wait_for_previous")
FALSE = ("0", "false", "no", "off")
READS = ("read", "randread")  # rw values that only read (fio's default rw is read)
MAX_INCLUDE_DEPTH = 8
DEFAULT_TIMEOUT_S = 3600.0
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Section:
    """One `[name]` section as written, with where each option came from."""

    name: str
    file: str
    line: int
    options: dict[str, str] = field(default_factory=dict)  # own, ${ENV} expanded
    lines: dict[str, tuple[str, int]] = field(default_factory=dict)  # option -> (file, line)
    effective: dict[str, str] = field(default_factory=dict)  # the globals before it + own
    # Where each effective option was written: (file, line, section).
    origin: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    phase: int = 0

    @property
    def is_global(self) -> bool:
        return self.name == "global"

    def flag(self, key: str) -> bool:
        return key in self.effective and self.effective[key].lower() not in FALSE

    @property
    def reads_only(self) -> bool:
        rw = self.effective.get("rw", self.effective.get("readwrite", "read"))
        return rw.split(":")[0] in READS


@dataclass
class JobFile:
    path: str  # absolute
    text: str
    includes: dict[str, str]  # included files' text by the name the file gave
    env: dict[str, str]  # the ${VAR}s the file uses, as expanded
    sections: list[Section]  # job sections only (the globals are folded into `effective`)

    @property
    def phases(self) -> list[list[Section]]:
        out: list[list[Section]] = []
        for s in self.sections:
            if s.phase == len(out):
                out.append([])
            out[s.phase].append(s)
        return out


def _strip_comment(line: str) -> str:
    # fio ends a value at ';' or '#' (tiobench's example: `numjobs=4 ; 4 threads`).
    return re.split(r"\s[;#]", line, maxsplit=1)[0].strip()


def read_job_file(path: str, env: dict[str, str] | None = None) -> JobFile:
    """The job file's sections and options, with line numbers, includes spliced in and
    `${VAR}` expanded from `env` (fio expands them the same way when it runs)."""
    env = dict(os.environ) if env is None else env
    full = os.path.abspath(path)
    try:
        text = Path(full).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"fio:{path}: cannot read the job file ({_why(e)})") from None
    includes: dict[str, str] = {}
    used: dict[str, str] = {}
    sections: list[Section] = []
    _read_lines(full, text, env, used, includes, sections, 0)
    globals_: dict[str, str] = {}
    origin: dict[str, tuple[str, int, str]] = {}
    jobs: list[Section] = []
    for s in sections:
        own = {k: (*s.lines[k], s.name) for k in s.options}
        if s.is_global:
            globals_.update(s.options)
            origin.update(own)
            continue
        s.effective = {**globals_, **s.options}
        s.origin = {**origin, **own}
        if jobs and any(s.flag(k) for k in SERIAL):
            s.phase = jobs[-1].phase + 1
        elif jobs:
            s.phase = jobs[-1].phase
        waitee = next((j for j in jobs if j.name == s.effective.get("wait_for")), None)
        if waitee is not None:
            # fio resolves wait_for within one process: the waitee's phase runs on to here.
            for j in jobs:
                j.phase = min(j.phase, waitee.phase)
            s.phase = waitee.phase
        jobs.append(s)
    if not jobs:
        raise UsageError(f"fio:{path}: no job section (a [name] other than [global])")
    return JobFile(full, text, includes, used, jobs)


def _why(e: Exception) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def _read_lines(
    file: str,
    text: str,
    env: dict[str, str],
    used: dict[str, str],
    includes: dict[str, str],
    sections: list[Section],
    depth: int,
) -> None:
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("include "):
            name = line.split(None, 1)[1].strip()
            inc = name if os.path.isabs(name) else os.path.join(os.path.dirname(file), name)
            if depth >= MAX_INCLUDE_DEPTH:
                raise UsageError(f"{file}:{n}: includes nested deeper than {MAX_INCLUDE_DEPTH}")
            try:
                inc_text = Path(inc).read_text()
            except (OSError, UnicodeDecodeError) as e:
                raise UsageError(f"{file}:{n}: include {name}: {_why(e)}") from None
            includes[name] = inc_text
            _read_lines(inc, inc_text, env, used, includes, sections, depth + 1)
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append(Section(line[1:-1].strip(), file, n))
            continue
        line = _strip_comment(line)
        if not sections:
            sections.append(Section("global", file, n))  # options before any section
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()

        def expand(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in env:
                return m.group(0)  # fio leaves it too, and then refuses the value
            used[name] = env[name]
            return env[name]

        value = _ENV.sub(expand, value)
        sections[-1].options[key] = value
        sections[-1].lines[key] = (file, n)


def _outside(value: str) -> str | None:
    """The part of a path option that leaves the working directory, or None."""
    # fio separates several names with ':' (a literal ':' is written '\:').
    for part in re.split(r"(?<!\\):", value):
        part = part.replace("\\:", ":")
        if not part:
            continue
        if os.path.isabs(part) or ".." in Path(part).parts:
            return part
    return None


def check_paths(job: JobFile, shown: str) -> None:
    """Refuse a filename/directory pointing outside the mount, naming its line and section."""
    for s in job.sections:
        for key in PATH_OPTIONS:
            value = s.effective.get(key)
            bad = _outside(value) if value else None
            if bad is None:
                continue
            file, line, section = s.origin[key]
            where = os.path.basename(file) if file == job.path else file
            raise UsageError(
                f"fio:{shown}: {key}={value} ({where} line {line}, section [{section}]) points "
                f"outside the subject's mount; fsbench runs every job inside the mount, so give "
                f"a name relative to it (or none)"
            )


def directories(sections: list[Section]) -> list[str]:
    """The relative directories the jobs name: fio refuses a `directory` that does not exist
    yet (it checks while parsing), so fsbench makes them in the mount first."""
    out: list[str] = []
    for s in sections:
        for part in re.split(r"(?<!\\):", s.effective.get("directory", "")):
            part = part.replace("\\:", ":")
            if part and not os.path.isabs(part) and part not in out:
                out.append(part)
    return out


def fio_parse_only(job: JobFile, shown: str) -> None:
    """fio's own verdict on the file, before anything is formatted (exit 2 with its words).
    It parses in a scratch directory laid out like the mount will be (its `directory`s made)."""
    with tempfile.TemporaryDirectory(prefix="fsbench-fio-parse-") as scratch:
        for d in directories(job.sections):
            os.makedirs(os.path.join(scratch, d), exist_ok=True)
        try:
            res = subprocess.run(
                [fio_binary(), "--parse-only", job.path],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=scratch,
                stdin=subprocess.DEVNULL,
            )
        except WorkloadFailed as e:
            raise UsageError(f"fio:{shown}: {e}") from None
    if res.returncode != 0:
        lines = [ln.strip().removeprefix("fio: ") for ln in res.stderr.splitlines()]
        why = "; ".join(ln for ln in lines if ln) or fio_error(res.stdout, res.stderr)
        raise UsageError(f"fio:{shown}: fio refuses the job file: {why}")


def parse_spec(spec: str) -> tuple[str, str]:
    """`fio:PATH[:cache=cold]` -> (path, cache)."""
    body = spec[len(PREFIX) :]
    cache = "none"
    head, sep, tail = body.rpartition(":")
    if sep and "=" in tail:
        key, _, value = tail.partition("=")
        if key != "cache" or value not in ("cold", "none"):
            raise UsageError(f"{spec}: the parameter after the path is cache=cold (or cache=none)")
        body, cache = head, value
    if not body:
        raise UsageError(f"{spec}: give a job file, e.g. fio:jobs.fio")
    return body, cache


def resolve(spec: str, timeout_s: float | None = None) -> list[FioPhase]:
    """The workloads of `fio:PATH[:cache=cold]`, one per phase; checked, nothing run yet."""
    path, cache = parse_spec(spec)
    if not os.path.isfile(path):
        raise UsageError(f"fio:{path}: no such job file")
    job = read_job_file(path)
    check_paths(job, path)  # first: fio's parse makes the job's directories in a scratch dir
    fio_parse_only(job, path)
    stem = Path(path).stem
    defn = Definition(job, cache, timeout_s or DEFAULT_TIMEOUT_S)
    return [FioPhase(f"{PREFIX}{stem}", phase, defn) for phase in job.phases]


@dataclass
class Definition:
    """What results.json keeps of the file: enough to run it again from the record alone."""

    job: JobFile
    cache: str
    timeout_s: float
    reported: dict[str, dict[str, str]] = field(default_factory=dict)  # fio's own, per job

    def record(self, name: str) -> dict[str, Any]:
        return {
            "kind": "fio-file",
            "name": name,
            "path": self.job.path,
            "text": self.job.text,
            "includes": self.job.includes,
            "env": self.job.env,
            "cache": self.cache,
            "timeout_s": self.timeout_s,
            "run_as": "fio --output-format=json --section=NAME... FILE, in the subject's mount",
            "sections": [
                {
                    "name": s.name,
                    "phase": s.phase,
                    "line": s.line,
                    "options": s.options,
                    "effective": s.effective,
                    "reported_by_fio": self.reported.get(s.name),
                }
                for s in self.job.sections
            ],
        }


@dataclass(eq=False)
class FioPhase(Declared):
    """The sections of one phase of a user's job file, run as one fio process."""

    merge_extra: ClassVar[dict[str, Any]] = IO_EXTRAS

    name: str  # fio:STEM
    sections: list[Section]
    definition_of: Definition
    tools: tuple[str, ...] = ("fio",)
    app_comms: tuple[str, ...] = ("fio",)
    space_group: str | None = None  # the file's own sizes decide, not fsbench's budget
    read_only_ok: bool = False
    _laid_out: set[str] = field(default_factory=set, repr=False)  # workdirs laid out

    @property
    def variant(self) -> str:
        return "+".join(s.name for s in self.sections)

    @property
    def description(self) -> str:
        return f"sections {self.variant} of {self.definition_of.job.path} (phase {self.phase})"

    @property
    def phase(self) -> int:
        return self.sections[0].phase

    @property
    def cache(self) -> str:
        # Cold applies to phases that only read: a write has no cache to start from.
        cold = self.definition_of.cache == "cold" and all(s.reads_only for s in self.sections)
        return "cold" if cold else "none"

    @property
    def is_write(self) -> bool:
        return not all(s.reads_only for s in self.sections)

    def definition(self) -> dict[str, Any]:
        return self.definition_of.record(self.name)

    def params(self, target: Target) -> dict[str, Any]:
        asked = self.definition_of.cache
        return {
            "engine": "fio",
            "variant": self.variant,
            "job_file": self.definition_of.job.path,
            "sections": [s.name for s in self.sections],
            "phase": self.phase,
            "options": {s.name: s.effective for s in self.sections},
            "cache": self.cache if asked == self.cache else f"{self.cache} ({asked} asked)",
        }

    def _argv(self, *extra: str) -> list[str]:
        sections = [f"--section={s.name}" for s in self.sections]
        return [fio_binary(), *extra, *sections, self.definition_of.job.path]

    def prepare(self, target: Target) -> None:
        """Untimed: fio lays out the phase's files (what it would do before its clock), once
        per subject: they stay (fio reuses a file of the right size), unless the job unlinks
        them (`unlink`, `unlink_each_loop`), then before every run."""
        for d in directories(self.sections):
            os.makedirs(os.path.join(target.workdir, d), exist_ok=True)
        unlinks = any(s.flag("unlink") or s.flag("unlink_each_loop") for s in self.sections)
        if target.workdir in self._laid_out and not unlinks:
            return
        res = measured_child(
            self._argv("--create_only=1"), cwd=target.workdir, timeout=self.definition_of.timeout_s
        )
        if res.returncode != 0:
            raise WorkloadFailed(f"laying out {self.id}: {fio_error(res.stdout, res.stderr)}")
        self._laid_out.add(target.workdir)

    def run(self, target: Target) -> Measurement:
        res = measured_child(
            # fio's own option on the command line reaches every job of the file (fiojson.py).
            self._argv("--output-format=json", *LAT_ARGS),
            cwd=target.workdir,
            timeout=self.definition_of.timeout_s,
        )
        if res.returncode != 0:
            raise WorkloadFailed(fio_error(res.stdout, res.stderr))
        try:
            doc = fio_json(res.stdout)
        except ValueError as e:
            raise WorkloadFailed(f"could not read fio's JSON output ({e})") from e
        self._remember_options(doc)
        out = phase_figures(doc, serial=any("wait_for" in s.effective for s in self.sections))
        return fio_measurement(out, res)

    def _remember_options(self, doc: dict[str, Any]) -> None:
        """fio's own account of each job's options (the globals and the job's), once."""
        reported = self.definition_of.reported
        for job in doc.get("jobs", []):
            name = job.get("jobname")
            if name and name not in reported:
                reported[name] = {**doc.get("global options", {}), **job.get("job options", {})}


def _direction(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "bytes": int(part.get("io_bytes", 0)),
        "ios": int(part.get("total_ios", 0)),
        "iops": float(part.get("iops", 0.0)),
        **latency_figures(part),
    }


def phase_figures(doc: dict[str, Any], serial: bool = False) -> dict[str, Any]:
    """A phase's bytes, I/Os and seconds from fio's JSON: every job's and direction's bytes
    over the longest job's runtime (fio's aggregate rule); each job's own figures in `jobs`.
    `serial`: the reporting groups ran one after another (a wait_for chain), so the phase's
    time is the sum of each group's longest runtime (fio's JSON has no start times).
    Latency percentiles belong to the result only when fio reported one job (one section, or
    a reporting group): percentiles of separate jobs cannot be merged without histograms."""
    jobs = doc.get("jobs") or []
    if not jobs:
        raise WorkloadFailed("fio's JSON output has no jobs")
    per_job = []
    for job in jobs:
        if job.get("error"):
            raise WorkloadFailed(
                f"fio job {job.get('jobname')} error {job['error']}: {os.strerror(job['error'])}"
            )
        dirs = {d: _direction(job[d]) for d in ("read", "write", "trim") if d in job}
        dirs = {d: v for d, v in dirs.items() if v["ios"] or v["bytes"]}
        runtime_ms = float(job.get("job_runtime") or 0) or max(
            (float(job[d].get("runtime", 0)) for d in dirs), default=0.0
        )
        per_job.append(
            {
                "job": job.get("jobname"),
                "group": job.get("groupid"),
                "seconds": runtime_ms / 1000.0,
                "usr_cpu": job.get("usr_cpu"),
                "sys_cpu": job.get("sys_cpu"),
                **dirs,
            }
        )
    total = sum(v["bytes"] for j in per_job for d, v in j.items() if d in ("read", "write", "trim"))
    ios = sum(v["ios"] for j in per_job for d, v in j.items() if d in ("read", "write", "trim"))
    groups: dict[Any, float] = {}
    for j in per_job:
        groups[j["group"]] = max(groups.get(j["group"], 0.0), j["seconds"])
    seconds = sum(groups.values()) if serial else max(j["seconds"] for j in per_job)
    if seconds <= 0:
        # fio counts whole milliseconds: no rate can be given for "0 ms" of work.
        raise WorkloadFailed(
            f"fio reported {total} B in 0 ms: too little work to time; make the job larger"
        )
    out: dict[str, Any] = {
        "bytes": total,
        "ios": ios,
        "seconds": seconds,
        "iops": ios / seconds,
        "jobs": per_job,
        "fio_version": doc.get("fio version"),
    }
    if len(per_job) == 1:
        dirs = {d: v for d, v in per_job[0].items() if d in ("read", "write", "trim")}
        if dirs:
            main = max(dirs.values(), key=lambda v: v["ios"])
            out |= {k: main[k] for k in ("lat_us", "lat_mean_us", "lat_basis") if k in main}
    return out
