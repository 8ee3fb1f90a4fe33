"""The ``otel-repeat-guard`` command: the demo end to end, and clear errors with exit code 2."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_repeat_guard.cli import dashboard_command, main
from otel_repeat_guard.dashboard import queries
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.store import SCHEMA_VERSION, open_for_reading, open_for_writing

CLI = shutil.which("otel-repeat-guard") or str(Path(sys.executable).with_name("otel-repeat-guard"))


def test_demo_produces_every_kind_of_loop(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    started = time.monotonic()
    done = subprocess.run(
        [CLI, "demo", "--db", str(db), "--seconds", "3"], capture_output=True, text=True, timeout=60, check=False
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 3 + 10  # bounded by --seconds, plus start-up
    out = done.stdout
    # Each delivered reminder is printed as it happens, and the live counts end complete.
    assert "reminder (gentle) to coder: run_tests called 3x with identical arguments" in out
    assert "reminder (detailed) to operator: shell called 5x" in out
    assert out.count("reminder (") == 24  # 8 agents: twice the 12 of the four personas
    assert "agents 8/8 done · tool calls 126 · repeated 70 · reminders 24" in out

    conn, _ = open_for_reading(db)
    try:
        lengths = queries.run_lengths(conn, Filters())
        assert set(lengths.loc[lengths["run_length"] >= 2, "run_length"]) == {2, 3, 4, 5, 6, 8, 12}  # many lengths
        denied = conn.execute("SELECT count(*) FROM tool_calls WHERE error AND run_length >= 2").fetchone()[0]
        assert denied == 2 * 5  # a denied call hammered, by both operators
        interleaved = queries.hotspot_runs(conn, Filters(agents=("coder",)), "grep").iloc[0]
        chain = queries.chain(conn, str(interleaved["agent_key"]), int(interleaved["end_id"]), 4)
        assert "todo_write" in set(chain["tool"])  # the excluded tool inside a loop
        variants = conn.execute("SELECT max(run_length) FROM tool_calls WHERE tool_name = 'run_tests'").fetchone()[0]
        assert variants == 8  # key-order variants counted as one argument object
        reset = queries.hotspot_runs(conn, Filters(agents=("researcher",)), "web_search")
        assert list(reset["run_length"]) == [2, 2]  # the second prompt reset the chain
        services = queries.filter_options(conn)
        assert len(services[services["kind"] == "service"]) == 3
    finally:
        conn.close()


def test_demo_without_arguments_stores_digests_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "digests.db"
    assert main(["demo", "--db", str(db), "--seconds", "0", "--agents", "1", "--no-arguments"]) == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM tool_call_arguments").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM tool_calls WHERE arguments_digest IS NULL").fetchone()[0] == 0
    assert "see the hotspots with: otel-repeat-guard dashboard --db" in capsys.readouterr().out


def error_of(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_dashboard_on_a_missing_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = error_of(capsys, ["dashboard", "--db", str(tmp_path / "nope.db")])
    assert f"otel-repeat-guard: error: no store at {tmp_path / 'nope.db'}" in err
    assert "otel-repeat-guard demo --db" in err
    assert not (tmp_path / "nope.db").exists()


def test_dashboard_on_a_foreign_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    assert "database of another program (tables: accounts)" in error_of(capsys, ["dashboard", "--db", str(db)])
    # The demo refuses to write into it too, and leaves it alone.
    assert "another program" in error_of(capsys, ["demo", "--db", str(db), "--seconds", "0"])
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["accounts"]


def test_dashboard_on_a_newer_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "newer.db"
    open_for_writing(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE repeat_guard_schema SET version = 7")
    assert f"schema version 7, newer than the {SCHEMA_VERSION}" in error_of(capsys, ["dashboard", "--db", str(db)])


def test_bad_trace_url_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ok.db"
    open_for_writing(db).close()
    err = error_of(capsys, ["dashboard", "--db", str(db), "--trace-url", "http://jaeger/trace"])
    assert "--trace-url: the trace URL template must contain {trace_id}" in err


def test_dashboard_binds_to_localhost_and_runs_the_packaged_app(tmp_path: Path) -> None:
    db = tmp_path / "ok.db"
    open_for_writing(db).close()
    command = dashboard_command(db, "127.0.0.1", 8501, None)
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    app = Path(command[command.index("run") + 1])
    assert app.parts[-3:] == ("otel_repeat_guard", "dashboard", "app.py") and app.is_file()


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["demo", "--agents", "0"], ["demo", "--seconds", "-1"], ["dashboard", "--port", "70000"], []):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err
