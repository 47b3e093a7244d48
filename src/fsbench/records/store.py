"""The SQLite results store: every run, every sample, kept as soon as it is measured.

results.json in a run's output directory is the portable record; this database mirrors
it across runs so `fsbench show` and comparisons can find any past run by id. Samples are
committed one at a time, so a crashed or interrupted run keeps everything it measured.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from fsbench.errors import UsageError
from fsbench.records.schema import SCHEMA_VERSION, Result, Run, Sample, Subject

# Two fsbench runs may share one database; a writer holds the lock for milliseconds,
# so waiting this long means something is stuck rather than merely busy.
BUSY_TIMEOUT_S = 10.0

# Shortest run-id prefix accepted, so a typo of two characters doesn't pick a run at random.
MIN_PREFIX = 4

_LIST_HINT = "list runs with `fsbench show --list`"

# A migration is SQL (one or more statements) or a function given the connection, for
# changes SQL alone can't express. Names are recorded once applied; never rename or reorder
# an entry that has shipped, only append.
MigrationStep = str | Callable[[sqlite3.Connection], None]

_INITIAL = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL,
    command TEXT NOT NULL,          -- JSON list
    environment TEXT NOT NULL,      -- JSON object
    schema_version INTEGER NOT NULL,
    out_dir TEXT,                   -- absolute path, or NULL when nothing was written
    extra TEXT NOT NULL DEFAULT '{}' -- JSON: fields newer writers added to Run
);
CREATE INDEX runs_started ON runs(started);
CREATE INDEX runs_out_dir ON runs(out_dir);

CREATE TABLE subjects (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    workload TEXT NOT NULL,
    params TEXT NOT NULL,           -- canonical JSON
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    status TEXT NOT NULL,
    median REAL,
    key TEXT NOT NULL,
    json TEXT NOT NULL,             -- the Result without samples / sample_details
    UNIQUE (run_id, key)
);

CREATE TABLE samples (
    result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    value REAL NOT NULL,
    json TEXT,                      -- the Sample; NULL when only the value was known
    PRIMARY KEY (result_id, idx)
);
"""

MIGRATIONS: list[tuple[str, MigrationStep]] = [
    ("0001_initial", _INITIAL),
]


def default_db_path() -> Path:
    """$XDG_DATA_HOME/fsbench/results.db, XDG_DATA_HOME defaulting to ~/.local/share."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    # The XDG spec says a relative value is invalid and must be ignored.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "fsbench" / "results.db"


def canonical_json(value: Any) -> str:
    """JSON that is byte-identical for equal values, so it can serve as a key."""
    return json.dumps(
        to_jsonable_python(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def result_key(result: Result) -> str:
    """The stable identity of a result within a run."""
    return f"{result.subject}|{result.workload}|{canonical_json(result.params)}|{result.metric}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _statements(sql: str) -> Iterator[str]:
    """Split a script into statements; executescript() would commit mid-migration."""
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending
            pending = ""
    if pending.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in pending.splitlines()
    ):
        raise ValueError(f"migration SQL has an unterminated statement: {pending.strip()[:60]!r}")


def _result_json(result: Result) -> str:
    # Samples live in their own table, one row each, so they're never duplicated here.
    return result.model_dump_json(exclude={"samples", "sample_details"})


class Store:
    """One connection to the results database. Not shared between threads."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path: Path = Path(path) if path is not None else default_db_path()
        if self.path.is_dir():  # e.g. --db '' (the current directory)
            raise UsageError(f"--db {str(path)!r}: a directory, not a results database")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN ourselves, so every transaction is explicit.
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._enable_wal()
            # NORMAL in WAL survives a process crash; skipping the fsync per commit keeps
            # the store from disturbing the disks being benchmarked.
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as e:
            self._conn.close()
            if "not a database" in str(e) or "malformed" in str(e):
                raise UsageError(
                    f"--db {self.path}: not an fsbench results database ({e})"
                ) from None
            raise
        except BaseException:
            self._conn.close()
            raise

    def _enable_wal(self) -> None:
        # WAL lets `fsbench show` read while a run writes, and writers queue briefly.
        # It persists in the file, so only the first open of a new db has to switch; that
        # switch needs an exclusive lock and SQLite answers "locked" at once instead of
        # using the busy timeout when two processes create the db together: retry here.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.005
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if mode != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        # writes can fail at once with SQLITE_BUSY when another writer got in between,
        # without waiting for the busy timeout.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        # One snapshot for several SELECTs, so a concurrent writer can't tear a run in half.
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            self._conn.execute("COMMIT")

    # -- migrations --------------------------------------------------------------------

    def _migrate(self) -> None:
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations"
            " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        applied = self.applied_migrations()
        for name, step in MIGRATIONS:
            if name in applied:
                continue
            with self._write() as conn:
                # Another process may have applied it while we waited for the lock.
                if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                    continue
                if isinstance(step, str):
                    for statement in _statements(step):
                        conn.execute(statement)
                else:
                    step(conn)
                conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, _now())
                )
        # Names we don't know came from a newer fsbench; its changes are additive by rule,
        # so we read on rather than refuse.

    def applied_migrations(self) -> dict[str, str]:
        """Migration name -> when it was applied (UTC ISO), in the order applied."""
        rows = self._conn.execute(
            "SELECT name, applied_at FROM migrations ORDER BY rowid"
        ).fetchall()
        return {row["name"]: row["applied_at"] for row in rows}

    def journal_mode(self) -> str:
        return str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])

    # -- writing -----------------------------------------------------------------------

    def begin_run(self, run: Run, out_dir: Path | None = None) -> None:
        """Record a run as started (status 'running') before anything is measured."""
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO runs (run_id, started, finished, status, command, environment,"
                    " schema_version, out_dir, extra) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
                    (
                        run.run_id,
                        run.started,
                        run.finished,
                        json.dumps(run.command),
                        run.environment.model_dump_json(),
                        run.schema_version,
                        str(Path(out_dir).resolve()) if out_dir is not None else None,
                        canonical_json(_run_extra(run)),
                    ),
                )
                for subject in run.subjects:
                    self._upsert_subject(conn, run.run_id, subject)
        except sqlite3.IntegrityError as exc:
            raise UsageError(f"run {run.run_id!r} already exists in {self.path}") from exc

    def save_subject(self, run_id: str, subject: Subject) -> None:
        with self._write() as conn:
            self._upsert_subject(conn, run_id, subject)

    def save_sample(self, run_id: str, result: Result, sample: Sample) -> None:
        """Store one sample the moment it is measured, with its result's current fields."""
        with self._write() as conn:
            result_id = self._upsert_result(conn, run_id, result)
            (idx,) = conn.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM samples WHERE result_id = ?",
                (result_id,),
            ).fetchone()
            conn.execute(
                "INSERT INTO samples (result_id, idx, value, json) VALUES (?, ?, ?, ?)",
                (result_id, idx, sample.value, sample.model_dump_json()),
            )

    def save_result(self, run_id: str, result: Result) -> None:
        """Store a result's aggregate (median, ci95, ...); samples already saved stay."""
        with self._write() as conn:
            self._save_result(conn, run_id, result)

    def finish_run(self, run: Run) -> None:
        """Record the end of a run: status, finish time, environment, subjects and results."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET finished = ?, status = ?, environment = ?, command = ?,"
                " extra = ? WHERE run_id = ?",
                (
                    run.finished,
                    run.status,
                    run.environment.model_dump_json(),
                    json.dumps(run.command),
                    canonical_json(_run_extra(run)),
                    run.run_id,
                ),
            )
            if cur.rowcount == 0:
                raise UsageError(f"run {run.run_id!r} was never begun in {self.path}")
            for subject in run.subjects:
                self._upsert_subject(conn, run.run_id, subject)
            # Results too, so the db matches results.json even for results whose samples
            # were never saved one by one (a failed workload, an imported run).
            for result in run.results:
                self._save_result(conn, run.run_id, result)

    def _upsert_subject(self, conn: sqlite3.Connection, run_id: str, subject: Subject) -> None:
        conn.execute(
            "INSERT INTO subjects (run_id, id, json) VALUES (?, ?, ?)"
            " ON CONFLICT (run_id, id) DO UPDATE SET json = excluded.json",
            (run_id, subject.id, subject.model_dump_json()),
        )

    def _upsert_result(self, conn: sqlite3.Connection, run_id: str, result: Result) -> int:
        key = result_key(result)
        # DO UPDATE (not REPLACE) keeps the row id, so samples stay attached and results
        # keep the order in which they were first measured.
        conn.execute(
            "INSERT INTO results (run_id, subject, workload, params, metric, unit, status,"
            " median, key, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (run_id, key) DO UPDATE SET unit = excluded.unit,"
            " status = excluded.status, median = excluded.median, json = excluded.json",
            (
                run_id,
                result.subject,
                result.workload,
                canonical_json(result.params),
                result.metric,
                result.unit,
                result.status,
                result.median,
                key,
                _result_json(result),
            ),
        )
        row = conn.execute(
            "SELECT id FROM results WHERE run_id = ? AND key = ?", (run_id, key)
        ).fetchone()
        return int(row["id"])

    def _save_result(self, conn: sqlite3.Connection, run_id: str, result: Result) -> None:
        result_id = self._upsert_result(conn, run_id, result)
        (stored,) = conn.execute(
            "SELECT COUNT(*) FROM samples WHERE result_id = ?", (result_id,)
        ).fetchone()
        # Append samples the result carries beyond those saved one by one, so a caller
        # that never used save_sample still loses nothing.
        values, details = result.samples, result.sample_details
        if result.set_aside:
            # A round set aside (fsbench.schedule.stalled) left the rows saved one by one:
            # the samples are the kept ones, the set-aside ones live in the result's JSON.
            conn.execute("DELETE FROM samples WHERE result_id = ?", (result_id,))
            stored = 0
        for idx in range(stored, max(len(values), len(details))):
            detail = details[idx] if idx < len(details) else None
            value = values[idx] if idx < len(values) else details[idx].value
            conn.execute(
                "INSERT INTO samples (result_id, idx, value, json) VALUES (?, ?, ?, ?)",
                (result_id, idx, value, detail.model_dump_json() if detail else None),
            )

    # -- reading -----------------------------------------------------------------------

    def load_run(self, ref: str) -> Run:
        """A run by id, unique id prefix (>= 4 chars), or output directory, as it was written
        (an older run's centres and verdicts: fsbench.report.model.upgrade)."""
        if not ref.strip():
            # Path("") is ".", which would silently load whatever the cwd holds.
            raise UsageError(f"empty run reference; {_LIST_HINT}")
        try:
            path = Path(ref).expanduser()
        except RuntimeError:  # ~name of no such user: a reference like any other
            path = Path(ref)
        if path.is_dir() or (path.is_file() and path.suffix == ".json"):
            results_json = path / "results.json" if path.is_dir() else path
            if results_json.is_file():
                # The directory's own record wins: it is what the user has in hand.
                return _mark_unfinished(_read_results_json(results_json))
            row = self._conn.execute(
                "SELECT run_id FROM runs WHERE out_dir = ? ORDER BY started DESC",
                (str(path.resolve()),),
            ).fetchone()
            if row is not None:
                return self._load_from_db(row["run_id"])
        return self._load_from_db(self._resolve_id(ref))

    def _resolve_id(self, ref: str) -> str:
        if self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (ref,)).fetchone():
            return ref
        if len(ref) < MIN_PREFIX:
            raise UsageError(
                f"no run {ref!r} in {self.path} (a prefix needs at least {MIN_PREFIX}"
                f" characters); {_LIST_HINT}"
            )
        # substr, not LIKE: run ids may contain '_' or '%', and LIKE ignores case.
        rows = self._conn.execute(
            "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? ORDER BY run_id LIMIT 6",
            (len(ref), ref),
        ).fetchall()
        if not rows:
            raise UsageError(f"no run {ref!r} in {self.path}; {_LIST_HINT}")
        if len(rows) > 1:
            shown = ", ".join(row["run_id"] for row in rows[:5])
            more = ", ..." if len(rows) > 5 else ""
            raise UsageError(f"run prefix {ref!r} is ambiguous: {shown}{more}; {_LIST_HINT}")
        return str(rows[0]["run_id"])

    def _load_from_db(self, run_id: str) -> Run:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise UsageError(f"no run {run_id!r} in {self.path}; {_LIST_HINT}")
            subjects = [
                Subject.model_validate_json(r["json"])
                for r in conn.execute(
                    "SELECT json FROM subjects WHERE run_id = ? ORDER BY rowid", (run_id,)
                )
            ]
            samples: dict[int, list[sqlite3.Row]] = {}
            for s in conn.execute(
                "SELECT s.result_id, s.value, s.json FROM samples s"
                " JOIN results r ON r.id = s.result_id WHERE r.run_id = ?"
                " ORDER BY s.result_id, s.idx",
                (run_id,),
            ):
                samples.setdefault(s["result_id"], []).append(s)
            results = []
            for r in conn.execute(
                "SELECT id, json FROM results WHERE run_id = ? ORDER BY id", (run_id,)
            ):
                fields = json.loads(r["json"])
                mine = samples.get(r["id"], [])
                fields["samples"] = [s["value"] for s in mine]
                fields["sample_details"] = [json.loads(s["json"]) for s in mine if s["json"]]
                results.append(Result.model_validate(fields))
        run = Run.model_validate(
            {
                **json.loads(row["extra"]),
                "schema_version": row["schema_version"],
                "run_id": row["run_id"],
                "started": row["started"],
                "finished": row["finished"],
                "status": row["status"],
                "command": json.loads(row["command"]),
                "environment": json.loads(row["environment"]),
                "subjects": subjects,
                "results": results,
            }
        )
        return _mark_unfinished(run)

    def list_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest runs first, with enough to pick one: id, when, status, size, command."""
        rows = self._conn.execute(
            "SELECT run_id, started, finished, status, command, out_dir,"
            " (SELECT COUNT(*) FROM subjects s WHERE s.run_id = runs.run_id) AS n_subjects,"
            " (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.run_id) AS n_results"
            " FROM runs ORDER BY started DESC, run_id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            {
                "run_id": row["run_id"],
                "started": row["started"],
                "finished": row["finished"],
                "status": "incomplete" if row["status"] == "running" else row["status"],
                "n_subjects": row["n_subjects"],
                "n_results": row["n_results"],
                "command": json.loads(row["command"]),
                "out_dir": row["out_dir"],
            }
            for row in rows
        ]


def _mark_unfinished(run: Run) -> Run:
    # A reader can't tell a live run from a crashed one; either way the record is partial.
    if run.status == "running":
        return run.model_copy(update={"status": "incomplete"})
    return run


def _read_results_json(path: Path) -> Run:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise UsageError(
            f"{path} has schema_version {version}; this fsbench reads up to {SCHEMA_VERSION}"
        )
    try:
        return Run.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"{path} is not an fsbench results file: {where}: {first['msg']}") from exc


def _run_extra(run: Run) -> dict[str, Any]:
    """Run fields without a column of their own: kept in `extra` (loaded back the same)."""
    extra = dict(run.model_extra or {})
    if run.schedule is not None:
        extra["schedule"] = run.schedule.model_dump()
    if run.definitions:
        extra["definitions"] = run.definitions
    if run.verdicts:
        extra["verdicts"] = run.verdicts
    return extra
