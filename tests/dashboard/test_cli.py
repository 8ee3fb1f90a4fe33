"""The ``otel-repeat-guard`` command: the demo end to end, and clear errors with exit code 2."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.cli.serve import dashboard_command
from otel_repeat_guard.store import (
    SCHEMA_VERSION,
    SQLiteSpanExporter,
    StoreAccessError,
    open_for_reading,
    open_for_writing,
    queries,
)
from otel_repeat_guard.store.queries import Filters

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
    # The terminal counts what the page counts, and says what it leaves out (the excluded calls).
    assert (
        "agents 8/8 done · tool calls 128 (122 tracked, 6 excluded) · repeated 70 · reminders 24 · model calls 144"
        in out
    )
    assert "The dashboard counts the 122 tracked tool calls; the 6 calls of excluded tools are stored" in out

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


@pytest.mark.parametrize("command", ["dashboard", "demo", "ingest"])
def test_a_directory_given_as_the_store_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Not "no store at <dir>: run the demo with --db <dir>", which the demo itself would then refuse."""
    argv = [command, "--db", str(tmp_path)] + (["--seconds", "0"] if command == "demo" else [])
    if command == "ingest":
        (tmp_path / "empty.json").write_text("", encoding="utf-8")
        argv.insert(1, str(tmp_path / "empty.json"))
    err = error_of(capsys, argv)
    assert (
        err
        == f"otel-repeat-guard: error: {tmp_path} is a directory: give the store's file, such as {tmp_path / 'repeat-guard.db'}\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == (["empty.json"] if command == "ingest" else [])
    with pytest.raises(StoreAccessError, match="is a directory"):  # the class SQLite's "unable to open" had
        SQLiteSpanExporter(tmp_path)


@pytest.mark.parametrize("command", ["dashboard", "demo"])
def test_a_device_given_as_the_store_is_named_as_one(capsys: pytest.CaptureFixture[str], command: str) -> None:
    argv = [command, "--db", "/dev/null"] + (["--seconds", "0"] if command == "demo" else [])
    err = error_of(capsys, argv)
    assert (
        err
        == "otel-repeat-guard: error: /dev/null is not a regular file: give the store's file, such as ./repeat-guard.db\n"
    )


def test_ingest_into_a_missing_directory_is_refused_even_with_nothing_to_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to say it ingested 0 records into a store that no command could then open."""
    (tmp_path / "empty.json").write_text("", encoding="utf-8")
    db = tmp_path / "nowhere" / "store.db"
    err = error_of(capsys, ["ingest", str(tmp_path / "empty.json"), "--db", str(db)])
    assert err == f"otel-repeat-guard: error: the directory for the store {db} does not exist\n"


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
        conn.execute("UPDATE repeat_guard_schema SET version = ?", (SCHEMA_VERSION + 1,))
    newer = f"schema version {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION}"
    assert newer in error_of(capsys, ["dashboard", "--db", str(db)])


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


def _tool_calls(db: Path) -> int:
    conn, _ = open_for_reading(db)
    try:
        return int(queries.headline(conn, Filters()).iloc[0]["tool_calls"])
    finally:
        conn.close()


def test_a_second_demo_starts_from_a_fresh_store_unless_appending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `make demo` twice showed 240 calls after a demo that made 126."""
    db = tmp_path / "demo.db"
    argv = ["demo", "--db", str(db), "--seconds", "0", "--agents", "4"]
    assert main(argv) == 0
    assert main(argv) == 0
    assert _tool_calls(db) == 61
    assert main([*argv, "--append"]) == 0
    assert _tool_calls(db) == 122
    out = capsys.readouterr().out
    assert "writing to a fresh store" in out and "adding to store" in out


def test_the_demo_never_empties_a_store_it_did_not_make(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_repeat_guard import RepeatGuardSpanProcessor
    from otel_repeat_guard.store import SQLiteSpanExporter

    db = tmp_path / "production.db"
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(db)))
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": "{}"}
    provider.get_tracer("t").start_span("execute_tool grep", attributes=tool).end()
    provider.shutdown()
    err = error_of(capsys, ["demo", "--db", str(db), "--seconds", "0"])
    assert "holds calls that the demo did not write; pass --append" in err
    assert _tool_calls(db) == 1


def test_demo_dashboard_without_the_extra_fails_before_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the whole demo ran first, then the dashboard failed."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a))
    db = tmp_path / "demo.db"
    err = error_of(capsys, ["demo", "--db", str(db), "--seconds", "0", "--dashboard"])
    assert "the dashboard needs its extra (streamlit missing): pip install 'otel-repeat-guard[dashboard]'" in err
    assert not db.exists()


def test_usage_errors_say_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `--agents x` printed "invalid _positive_int value"."""
    for argv, message in (
        (["demo", "--agents", "x"], "argument --agents: must be a whole number of at least 1, got 'x'"),
        (["demo", "--seconds", "soon"], "argument --seconds: must be a number of seconds >= 0, got 'soon'"),
        (["dashboard", "--port", "http"], "argument --port: must be a TCP port (1-65535), got 'http'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "_positive_int" not in err and "invalid" not in err


def test_every_command_has_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "otel-repeat-guard claude-code-hook" in listing  # built without the parser, so named in its epilog
    assert "{demo,dashboard,ingest,doctor,rollup,claude-code-hook}" in listing
    assert "claude-code-hook    Claude Code's command hook" in listing  # listed too, with what it does
    for command in ("demo", "dashboard", "ingest", "doctor"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert len(text.split("\n\n")[1]) > 60, command  # a paragraph after the usage line
        assert command in listing
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    demo = capsys.readouterr().out
    for option in ("--otlp", "--port", "--host", "--trace-url", "--append", "--dashboard"):
        assert option in demo


def test_the_dashboard_hides_the_deploy_button(tmp_path: Path) -> None:
    db = tmp_path / "ok.db"
    open_for_writing(db).close()
    command = dashboard_command(db, "127.0.0.1", 8501, None)
    assert command[command.index("--client.toolbarMode") + 1] == "viewer"


def test_the_dashboards_server_keeps_its_start_up_imports_out_of_the_collectors_way() -> None:
    """Streamlit collects garbage after every run of a page: what the server imports before it answers (pandas,
    pyarrow...) is frozen, so that collection no longer walks it for every visitor."""
    script = (
        "import gc, sys\n"
        "from otel_repeat_guard.dashboard import launch\n"
        "before = gc.get_freeze_count()\n"
        "launch.warm()\n"
        "print(before, gc.get_freeze_count(), 'pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, frozen, pandas = done.stdout.split()
    assert (int(before), pandas) == (0, "True")
    assert int(frozen) > 50_000  # pandas and pyarrow alone make more


def test_ingest_replay_of_a_stored_file_says_nothing_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `ingest --replay` on an already-ingested file printed "replayed 1 traces" and changed nothing."""
    from tests.ingest.otlp import otlp_json_line, record_workload, write_lines

    spans, _ = record_workload(guard=False)
    source = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(spans)])
    db = tmp_path / "store.db"
    assert main(["ingest", str(source), "--db", str(db), "--replay", "--quiet"]) == 0
    first = capsys.readouterr().out
    assert "nothing changed" not in first
    assert main(["ingest", str(source), "--db", str(db), "--replay", "--quiet"]) == 0
    again = capsys.readouterr().out
    assert "0 new" in again and "nothing changed: every span was in the store already" in again


def test_a_refused_exporter_setting_leaves_the_last_demos_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "demo.db"
    assert main(["demo", "--db", str(db), "--seconds", "0", "--agents", "1"]) == 0
    before = _tool_calls(db)
    capsys.readouterr()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "nonesuch")
    err = error_of(capsys, ["demo", "--db", str(db), "--seconds", "0", "--otlp"])
    assert "nonesuch" in err
    assert before > 0 and _tool_calls(db) == before  # it used to print "writing to a fresh store", then refuse


def test_the_commands_it_suggests_can_be_pasted_into_a_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "my store.db"
    assert main(["demo", "--db", str(db), "--seconds", "0", "--agents", "1"]) == 0
    assert f"see the hotspots with: otel-repeat-guard dashboard --db '{db}'" in capsys.readouterr().out
    missing = tmp_path / "no store.db"
    assert f"run `otel-repeat-guard demo --db '{missing}'` to create one" in error_of(
        capsys, ["dashboard", "--db", str(missing)]
    )
