"""The SQLite results store: round trips, crash safety, lookup, migrations, concurrency."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from run_parts import subject as make_subject

from fsbench.errors import UsageError
from fsbench.records import store as store_mod
from fsbench.records.notecodes import words
from fsbench.records.schema import CPU, Device, Environment, Result, Run, Sample, Subject
from fsbench.records.store import Store, default_db_path, result_key
from fsbench.report.model.upgrade import upgrade


def _subjects() -> list[Subject]:
    return [
        make_subject("ext4", driver_version="6.8"),
        make_subject("fuse2fs:ro", mount_options="ro", effective_mount_options="ro,relatime"),
    ]


def _sample(value: float, i: int) -> Sample:
    return Sample(
        value=value,
        seconds=1.5 + i,
        bytes=1 << 30,
        ops=1000 + i,
        cache="cold-verified",
        cpu=CPU(app_user_s=0.1 * i, driver_s=0.25, per_gib={"app": 0.5}),
        ctx_switches=40 + i,
        device=Device(read_bytes=4096 * i, write_bytes=8192),
        extra={"lat_p99_us": 120.5 + i, "iops": 2000},
        flags=["noisy"] if i == 2 else [],
    )


def _results() -> list[Result]:
    out = []
    for subject, base in (("ext4", 100.0), ("fuse2fs:ro", 50.0)):
        details = [_sample(base + i, i) for i in range(3)]
        out.append(
            Result(
                subject=subject,
                workload="seq-read",
                params={"size": "1G", "bs": "1M", "direct": False},
                metric="throughput",
                unit="MiB/s",
                samples=[d.value for d in details],
                sample_details=details,
                center=base + 1,
                median=base + 1,
                ci95=(base, base + 2),
                cv=0.01,
                outliers=[2],
                cache="cold-verified",
                cpu=CPU(app_user_s=0.1, per_gib_s=0.3),
                ctx_switches=41.0,
                write_amplification=1.25,
                flags=["x"],
                warnings=["cv high"],
            )
        )
    return out


def _run(run_id: str = "20240501-120000-abcd", started: str = "2024-05-01T12:00:00Z") -> Run:
    return Run(
        run_id=run_id,
        started=started,
        command=["fsbench", "run", "ext4", "fuse2fs:ro"],
        environment=Environment(kernel="6.8.0", cpus=8, tools={"fio": "3.36", "mkfs": None}),
    )


def _write_whole_run(db: Store, run: Run, out_dir: Path | None = None) -> Run:
    """Drive the store the way the runner does: begin, subjects, samples, aggregates, finish."""
    db.begin_run(run, out_dir)
    for subject in _subjects():
        db.save_subject(run.run_id, subject)
    results = _results()
    for result in results:
        partial = result.model_copy(update={"samples": [], "sample_details": [], "median": None})
        for sample in result.sample_details:
            db.save_sample(run.run_id, partial, sample)
        db.save_result(run.run_id, result)
    done = run.model_copy(
        update={
            "status": "complete",
            "finished": "2024-05-01T12:05:00Z",
            "subjects": _subjects(),
            "results": results,
        }
    )
    db.finish_run(done)
    return done


def test_default_db_path_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_db_path() == tmp_path / "data" / "fsbench" / "results.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "fsbench" / "results.db"


def test_default_path_parent_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "deep" / "data"))
    with Store() as db:
        assert db.path == tmp_path / "deep" / "data" / "fsbench" / "results.db"
    assert (tmp_path / "deep" / "data" / "fsbench" / "results.db").is_file()


def test_round_trip(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        done = _write_whole_run(db, _run())
    with Store(tmp_path / "r.db") as db:
        loaded = db.load_run("20240501-120000-abcd")
    assert loaded.model_dump() == done.model_dump()
    assert loaded.status == "complete"
    assert [s.id for s in loaded.subjects] == ["ext4", "fuse2fs:ro"]
    assert [r.subject for r in loaded.results] == ["ext4", "fuse2fs:ro"]
    assert loaded.results[0].samples == [100.0, 101.0, 102.0]
    assert loaded.results[1].samples == [50.0, 51.0, 52.0]
    assert [s.seconds for s in loaded.results[1].sample_details] == [1.5, 2.5, 3.5]
    assert loaded.results[0].ci95 == (100.0, 102.0)
    assert loaded.results[0].sample_details[2].extra == {"lat_p99_us": 122.5, "iops": 2000}


def test_a_schema_3_row_loads_with_its_sentences_as_notes(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        _write_whole_run(db, _run())
    # As a schema 3 writer stored it: flags and warnings, no notes.
    conn = sqlite3.connect(tmp_path / "r.db")
    with conn:
        for rid, text in conn.execute("SELECT id, json FROM results").fetchall():
            doc = json.loads(text)
            del doc["notes"]
            doc["warnings"] = ["CV is 26.8 % of the mean: the machine may be busy; raise --repeat"]
            conn.execute("UPDATE results SET json = ? WHERE id = ?", (json.dumps(doc), rid))
    conn.close()
    with Store(tmp_path / "r.db") as db:
        loaded = db.load_run("20240501-120000-abcd")
    notes = loaded.results[0].notes
    assert [n.code for n in notes] == ["x", "cv-high"]
    assert words(notes[1]) == "CV is 26.8 % of the mean: the machine may be busy"


def test_round_trip_keeps_extra_fields(tmp_path: Path) -> None:
    run = _run().model_copy(update={"status": "complete"})
    run = Run.model_validate({**run.model_dump(), "note": "future field"})
    result = Result.model_validate({**_results()[0].model_dump(), "p50_us": 12})
    run.results.append(result)
    with Store(tmp_path / "r.db") as db:
        db.begin_run(run, None)
        db.finish_run(run)
        loaded = db.load_run(run.run_id)
    assert loaded.model_extra == {"note": "future field"}
    assert loaded.results[0].model_extra == {"p50_us": 12}
    assert loaded.model_dump() == run.model_dump()


def test_finish_run_stores_results_never_sampled(tmp_path: Path) -> None:
    failed = Result(
        subject="ext4",
        workload="fsync",
        metric="ops",
        unit="op/s",
        status="failed",
        error="fio exited 1",
    )
    run = _run().model_copy(update={"status": "complete", "results": [failed, _results()[1]]})
    with Store(tmp_path / "r.db") as db:
        db.begin_run(run, None)
        db.finish_run(run)
        loaded = db.load_run(run.run_id)
    assert [(r.workload, r.status, r.error) for r in loaded.results] == [
        ("fsync", "failed", "fio exited 1"),
        ("seq-read", "ok", None),
    ]
    assert loaded.results[1].samples == [50.0, 51.0, 52.0]
    assert loaded.model_dump() == run.model_dump()


def test_save_result_keeps_samples_and_replaces_aggregate(tmp_path: Path) -> None:
    run = _run()
    base = _results()[0].model_copy(update={"samples": [], "sample_details": [], "median": None})
    with Store(tmp_path / "r.db") as db:
        db.begin_run(run, None)
        db.save_sample(run.run_id, base, _sample(7.0, 0))
        db.save_sample(run.run_id, base, _sample(9.0, 1))
        db.save_result(run.run_id, base.model_copy(update={"median": 8.0, "cv": 0.2}))
        db.save_result(run.run_id, base.model_copy(update={"median": 8.5, "cv": 0.3}))
        loaded = db.load_run(run.run_id)
        (n_results,) = db._conn.execute("SELECT COUNT(*) FROM results").fetchone()
    assert n_results == 1
    assert loaded.results[0].median == 8.5
    assert loaded.results[0].cv == 0.3
    assert loaded.results[0].samples == [7.0, 9.0]
    assert [s.ops for s in loaded.results[0].sample_details] == [1000, 1001]


def test_incremental_samples_survive_close_without_finish(tmp_path: Path) -> None:
    run = _run()
    result = _results()[0].model_copy(update={"samples": [], "sample_details": []})
    with Store(tmp_path / "r.db") as db:
        db.begin_run(run, tmp_path / "out")
        db.save_subject(run.run_id, _subjects()[0])
        db.save_sample(run.run_id, result, _sample(10.0, 0))
        db.save_sample(run.run_id, result, _sample(11.0, 1))
    with Store(tmp_path / "r.db") as db:
        loaded = db.load_run(run.run_id)
        listed = db.list_runs()
    assert loaded.status == "incomplete"
    assert loaded.finished is None
    assert [s.id for s in loaded.subjects] == ["ext4"]
    assert len(loaded.results) == 1
    assert loaded.results[0].samples == [10.0, 11.0]
    assert [s.seconds for s in loaded.results[0].sample_details] == [1.5, 2.5]
    assert listed[0]["status"] == "incomplete"


def test_samples_survive_a_killed_process(tmp_path: Path) -> None:
    # os._exit skips close() and every finalizer: the closest thing to a crash or kill -9.
    script = textwrap.dedent(
        f"""
        import os
        from fsbench.records.schema import Result, Run, Sample
        from fsbench.records.store import Store
        db = Store({str(tmp_path / "r.db")!r})
        db.begin_run(Run(run_id="crash-0001", started="2024-01-01T00:00:00Z"), None)
        r = Result(subject="ext4", workload="w", metric="m", unit="u")
        db.save_sample("crash-0001", r, Sample(value=1.0, seconds=1.0))
        db.save_sample("crash-0001", r, Sample(value=2.0, seconds=1.0))
        os._exit(9)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    with Store(tmp_path / "r.db") as db:
        loaded = db.load_run("crash-0001")
    assert loaded.status == "incomplete"
    assert loaded.results[0].samples == [1.0, 2.0]


def test_prefix_lookup(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        db.begin_run(_run("20240501-aaaa"), None)
        db.begin_run(_run("20240502-bbbb"), None)
        assert db.load_run("20240501").run_id == "20240501-aaaa"
        assert db.load_run("20240502-b").run_id == "20240502-bbbb"
        assert db.load_run("20240502-bbbb").run_id == "20240502-bbbb"


def test_ambiguous_prefix_raises(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        db.begin_run(_run("20240501-aaaa"), None)
        db.begin_run(_run("20240502-bbbb"), None)
        with pytest.raises(UsageError) as err:
            db.load_run("2024")
    msg = str(err.value)
    assert msg == (
        "run prefix '2024' is ambiguous: 20240501-aaaa, 20240502-bbbb; "
        "list runs with `fsbench show --list`"
    )
    assert "\n" not in msg


def test_unknown_ref_raises(tmp_path: Path) -> None:
    db_path = tmp_path / "r.db"
    with Store(db_path) as db:
        db.begin_run(_run("20240501-aaaa"), None)
        with pytest.raises(UsageError) as err:
            db.load_run("nope-1234")
        assert str(err.value) == (
            f"no run 'nope-1234' in {db_path}; list runs with `fsbench show --list`"
        )
        with pytest.raises(UsageError, match="at least 4 characters"):
            db.load_run("202")
        with pytest.raises(UsageError, match="empty run reference"):
            db.load_run("")
        # Prefix matching is case-sensitive and literal: no LIKE wildcards.
        with pytest.raises(UsageError, match="no run '2024%'"):
            db.load_run("2024%")
        with pytest.raises(UsageError, match="no run '20240501-AAAA'"):
            db.load_run("20240501-AAAA")
    assert err.value.exit_code == 2


def test_load_by_directory_with_results_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    on_disk = _run("file-run-0001").model_copy(
        update={"status": "complete", "results": _results(), "subjects": _subjects()}
    )
    (out / "results.json").write_text(on_disk.to_json())
    with Store(tmp_path / "r.db") as db:
        # The db has a different record for this directory; results.json is the authority.
        db.begin_run(_run("db-run-0001"), out)
        loaded = db.load_run(str(out))
        by_file = db.load_run(str(out / "results.json"))
    assert loaded.model_dump() == on_disk.model_dump()
    assert by_file.run_id == "file-run-0001"


def test_load_by_directory_without_results_json_uses_out_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with Store(tmp_path / "r.db") as db:
        db.begin_run(_run("db-run-0001"), out)
        db.begin_run(_run("db-run-0002"), tmp_path / "other")
        monkeypatch.chdir(tmp_path)
        loaded = db.load_run("out")  # relative path: matched after resolving
    assert loaded.run_id == "db-run-0001"
    assert loaded.status == "incomplete"


def test_bad_results_json_is_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"run_id": "x"}')
    with Store(tmp_path / "r.db") as db, pytest.raises(UsageError) as err:
        db.load_run(str(out))
    assert str(err.value).startswith(f"{out / 'results.json'} is not an fsbench results file: ")
    (out / "results.json").write_text('{"schema_version": 99, "run_id": "x", "started": "t"}')
    with Store(tmp_path / "r.db") as db, pytest.raises(UsageError, match="schema_version 99"):
        db.load_run(str(out))


def test_begin_run_twice_raises(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        db.begin_run(_run("dup-0001"), None)
        with pytest.raises(UsageError, match="already exists"):
            db.begin_run(_run("dup-0001"), None)


def test_list_runs(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        _write_whole_run(db, _run("old-run-0001", "2024-05-01T12:00:00Z"), tmp_path / "o")
        db.begin_run(_run("new-run-0002", "2024-06-01T12:00:00Z"), None)
        db.begin_run(_run("newest-0003", "2024-07-01T12:00:00Z"), None)
        runs = db.list_runs()
        assert [r["run_id"] for r in db.list_runs(limit=2)] == ["newest-0003", "new-run-0002"]
    assert [r["run_id"] for r in runs] == ["newest-0003", "new-run-0002", "old-run-0001"]
    assert runs[2] == {
        "run_id": "old-run-0001",
        "started": "2024-05-01T12:00:00Z",
        "finished": "2024-05-01T12:05:00Z",
        "status": "complete",
        "n_subjects": 2,
        "n_results": 2,
        "command": ["fsbench", "run", "ext4", "fuse2fs:ro"],
        "out_dir": str((tmp_path / "o").resolve()),
    }
    assert runs[0]["status"] == "incomplete"
    assert runs[0]["n_subjects"] == 0
    assert runs[0]["n_results"] == 0


def test_result_key_is_canonical() -> None:
    a = Result(subject="s", workload="w", params={"b": 1, "a": [1, 2]}, metric="m", unit="u")
    b = Result(subject="s", workload="w", params={"a": [1, 2], "b": 1}, metric="m", unit="x")
    assert result_key(a) == result_key(b) == 's|w|{"a":[1,2],"b":1}|m'


def test_migrations_table(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        applied = db.applied_migrations()
        tables = {
            row[0]
            for row in db._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    assert list(applied) == ["0001_initial"]
    assert applied["0001_initial"].endswith("+00:00")
    assert {"migrations", "runs", "subjects", "results", "samples"} <= tables


def test_reopen_does_not_reapply(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        first = db.applied_migrations()
        db.begin_run(_run(), None)
    with Store(tmp_path / "r.db") as db:
        assert db.applied_migrations() == first
        (count,) = db._conn.execute("SELECT COUNT(*) FROM migrations").fetchone()
        assert count == 1
        assert db.load_run(_run().run_id).run_id == _run().run_id


def test_new_migration_applied_to_old_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "r.db") as db:
        db.begin_run(_run(), None)
    calls: list[str] = []

    def backfill(conn: sqlite3.Connection) -> None:
        calls.append("backfill")
        conn.execute("UPDATE runs SET note = 'from 0003'")

    monkeypatch.setattr(
        store_mod,
        "MIGRATIONS",
        [
            *store_mod.MIGRATIONS,
            ("0002_note", "ALTER TABLE runs ADD COLUMN note TEXT;\n-- trailing comment\n"),
            ("0003_backfill", backfill),
        ],
    )
    with Store(tmp_path / "r.db") as db:
        assert list(db.applied_migrations()) == ["0001_initial", "0002_note", "0003_backfill"]
        (note,) = db._conn.execute("SELECT note FROM runs").fetchone()
        assert note == "from 0003"
    with Store(tmp_path / "r.db") as db:
        assert len(db.applied_migrations()) == 3
    assert calls == ["backfill"]


def test_failed_migration_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "r.db"):
        pass
    broken = "ALTER TABLE runs ADD COLUMN half TEXT;\nCREATE TABLE runs (x);\n"
    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, ("0002_bad", broken)])
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        Store(tmp_path / "r.db")
    conn = sqlite3.connect(tmp_path / "r.db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    names = [row[0] for row in conn.execute("SELECT name FROM migrations")]
    conn.close()
    assert "half" not in columns
    assert names == ["0001_initial"]


def test_wal_mode(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as db:
        assert db.journal_mode() == "wal"
        (timeout_ms,) = db._conn.execute("PRAGMA busy_timeout").fetchone()
        assert timeout_ms == 10_000
    # WAL is persistent: a plain connection sees it too.
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_two_threads_write_concurrently(tmp_path: Path) -> None:
    db_path = tmp_path / "r.db"
    n = 150
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(run_id: str) -> None:
        try:
            with Store(db_path) as db:
                start.wait()
                db.begin_run(_run(run_id), None)
                result = Result(subject="ext4", workload="w", metric="m", unit="u")
                for i in range(n):
                    db.save_sample(run_id, result, Sample(value=float(i), seconds=0.1))
                    if i % 10 == 0:
                        db.list_runs()  # readers interleaved with the other writer
                db.finish_run(_run(run_id).model_copy(update={"status": "complete"}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"thread-{k}",)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Store(db_path) as db:
        for k in range(2):
            run = db.load_run(f"thread-{k}")
            assert run.status == "complete"
            assert run.results[0].samples == [float(i) for i in range(n)]


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    db_path = tmp_path / "r.db"
    Store(db_path).close()  # both writers must race on writes, not only on creation
    script = textwrap.dedent(
        """
        import sys
        from fsbench.records.schema import Result, Run, Sample
        from fsbench.records.store import Store
        run_id = sys.argv[2]
        with Store(sys.argv[1]) as db:
            db.begin_run(Run(run_id=run_id, started="2024-01-01T00:00:00Z"), None)
            r = Result(subject="s", workload="w", metric="m", unit="u")
            for i in range(200):
                db.save_sample(run_id, r, Sample(value=float(i), seconds=0.1))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(db_path), f"proc-{k}"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    for p in procs:
        _, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
    with Store(db_path) as db:
        for k in range(2):
            assert db.load_run(f"proc-{k}").results[0].samples == [float(i) for i in range(200)]


def test_concurrent_first_open_applies_migrations_once(tmp_path: Path) -> None:
    # Processes, not threads: switching a new db to WAL raced only across processes.
    db_path = tmp_path / "fresh" / "r.db"
    script = "import sys; from fsbench.records.store import Store; Store(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(db_path)], stderr=subprocess.PIPE)
        for _ in range(6)
    ]
    for p in procs:
        _, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr.decode()
    with Store(db_path) as db:
        assert list(db.applied_migrations()) == ["0001_initial"]
        assert db.journal_mode() == "wal"


def test_a_run_renders_the_verdicts_it_stored(tmp_path: Path) -> None:
    """Schema 5: the comparisons decided at the end of a run are stored with it and shown as
    decided; a run stored before them (schema 3, the fixture) gets them decided once on load,
    and they survive the store's round trip."""
    from rich.console import Console

    from fsbench.report.model import build
    from fsbench.report.views.sections import render

    fixture = Path(__file__).parent / "fixtures" / "default_compare.json"
    out = tmp_path / "old"
    out.mkdir()
    (out / "results.json").write_text(fixture.read_text())
    with Store(tmp_path / "r.db") as db:
        old = upgrade(db.load_run(str(out)))
    # Migrated on load: at the current schema, and saying what it was (every export names it).
    assert old.schema_version == 5 and old.model_extra == {"migrated_from": 3}
    assert len(old.verdicts) == 16
    xfs = next(v for v in old.verdicts if v["subject"] == "xfs" and "write" in v["title"])
    assert xfs["baseline"] == "ext4" and xfs["verdict"] == "open" and xfs["cell"].endswith("?")
    # Stored as schema 5 and read back: the same records, no second decision.
    with Store(tmp_path / "r.db") as db:
        db.begin_run(old, None)
        db.finish_run(old)
        again = db.load_run(old.run_id)
    assert again.verdicts == old.verdicts and again.model_extra == {"migrated_from": 3}
    # What the run decided is what every output shows, even where a decision now would differ.
    xfs.update(ratio=1.5, ratio_low=1.2, ratio_high=1.9, verdict="better")
    row = next(
        r
        for t in build(old).tables
        for r in t.rows
        if r.subject == "xfs" and t.title == "seq-write/fsync"
    )
    assert row.vs == "1.50× 1.20–1.90 ▲" and row.outcome == "better"
    con = Console(width=100, record=True, color_system=None)
    render(old, con)
    assert "1.50× 1.20–1.90 ▲" in con.export_text()
