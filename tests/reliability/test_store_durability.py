"""Store durability: concurrent writer processes, a writer killed mid-batch, and unusable files.

Everything is real: writer processes run the guard and a BatchSpanProcessor over the
SQLiteSpanExporter into one file, the killed writer gets a real SIGKILL while its
transaction is open, and the read-only directory is enforced by the kernel (as an
unprivileged user when the tests run as root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from streamlit.testing.v1 import AppTest

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.cli import main as cli
from otel_repeat_guard.cli import serve
from otel_repeat_guard.dashboard.sections.headline import HEADLINE_CLASS
from otel_repeat_guard.store import DB_ENV, SQLiteSpanExporter, open_for_writing
from otel_repeat_guard.store.schema import SCHEMA_VERSION
from tests.ingest.otlp import otlp_json_line, record_workload, write_lines

WRITER = Path(__file__).with_name("store_writer.py")
APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"
RUN = 4  # the writers' runs of identical calls


def start_writer(db: Path, name: str, calls: int, start_at: float, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(db), name, str(calls), str(start_at), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(writer: subprocess.Popen[str], timeout: float = 150) -> str:
    out, err = writer.communicate(timeout=timeout)
    assert writer.returncode == 0, err
    return out


def per_service(conn: sqlite3.Connection, sql: str) -> dict[str, dict[object, int]]:
    found: dict[str, dict[object, int]] = {}
    for service, key, count in conn.execute(sql):
        found.setdefault(service, {})[key] = count
    return found


def test_four_processes_write_exactly_200000_rows(tmp_path: Path) -> None:
    db, names, calls = tmp_path / "shared.db", ["w0", "w1", "w2", "w3"], 50_000
    start_at = time.time() + 3  # all four start together, after their imports
    writers = [start_writer(db, name, calls, start_at) for name in names]  # they create the schema together too
    outputs = [finish(w) for w in writers]
    assert [out.splitlines()[-1] for out in outputs] == [f"done {calls}"] * 4  # each exporter committed all

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT count(*) FROM tool_calls").fetchone() == (200_000,)
        assert conn.execute("SELECT count(DISTINCT trace_id || span_id) FROM tool_calls").fetchone() == (200_000,)
        assert conn.execute("SELECT count(*) FROM tool_call_arguments").fetchone() == (200_000,)
        runs = per_service(conn, "SELECT service_name, run_length, count(*) FROM tool_calls GROUP BY 1, 2")
        assert runs == {name: {k: calls // RUN for k in range(1, RUN + 1)} for name in names}
        tiers = per_service(conn, "SELECT service_name, reminder_tier, count(*) FROM tool_calls GROUP BY 1, 2")
        assert tiers == {name: {None: calls - calls // RUN, "gentle": calls // RUN} for name in names}
        # Each writer's rows, in insertion order, are its spans in the order they ended.
        for name in names:
            lengths = [
                r
                for (r,) in conn.execute(
                    "SELECT run_length FROM tool_calls WHERE service_name = ? ORDER BY id", (name,)
                )
            ]
            assert lengths == [i % RUN + 1 for i in range(calls)]
        switches = conn.execute(
            "SELECT count(*) FROM tool_calls a JOIN tool_calls b ON b.id = a.id + 1 WHERE a.service_name != b.service_name"
        ).fetchone()[0]
    assert switches > 12, f"only {switches} switches between writers: they did not overlap"


def test_writer_killed_mid_batch_loses_only_its_open_batch(tmp_path: Path) -> None:
    db, calls = tmp_path / "shared.db", 20_000
    open_for_writing(db).close()
    start_at = time.time() + 2.5
    others = [start_writer(db, name, calls, start_at) for name in ("w0", "w1", "w2")]
    # A head start: the victim commits its first batch and stalls in its second while the others
    # are still writing (or waiting for its lock), however the machine schedules them.
    victim = start_writer(db, "victim", calls, start_at - 2.0, "--stall-after", "2000")
    assert victim.stdout is not None
    committed = None
    for line in victim.stdout:  # "committed N" after each batch, then "stalled N" inside the first batch after 2,000
        if line.startswith("stalled "):
            committed = int(line.split()[1])
            break
    assert committed is not None and committed >= 2000, "the victim never stalled"
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size > 0  # committed batches, plus the open one's pages spilled by its tiny cache
    assert all(w.poll() is None for w in others), "the other writers finished before the kill: no overlap"
    print(f"SIGKILL after {committed} committed rows, inside the next batch (WAL {wal.stat().st_size} bytes)")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL

    for writer in others:  # they were waiting for the victim's lock; SQLite hands it on
        assert finish(writer).splitlines()[-1] == f"done {calls}"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        counts = dict(conn.execute("SELECT service_name, count(*) FROM tool_calls GROUP BY 1").fetchall())
        assert counts == {"w0": calls, "w1": calls, "w2": calls, "victim": committed}
        # The victim's rows are exactly its first `committed` spans: whole batches, nothing of the open one.
        lengths = [
            r for (r,) in conn.execute("SELECT run_length FROM tool_calls WHERE service_name = 'victim' ORDER BY id")
        ]
        assert lengths == [i % RUN + 1 for i in range(committed)]
        previews = conn.execute(
            "SELECT a.preview FROM tool_calls c JOIN tool_call_arguments a ON a.call_id = c.id "
            "WHERE c.service_name = 'victim' ORDER BY c.id"
        ).fetchall()
        assert previews == [(f'{{"n":{i // RUN}}}',) for i in range(committed)]
        assert conn.execute(
            "SELECT count(*) FROM tool_calls t LEFT JOIN tool_call_arguments a ON a.call_id = t.id WHERE a.call_id IS NULL"
        ).fetchone() == (0,)


# -- damaged and unusable files: exit 2 with one line from the CLI, a message from the dashboard ------------


def seeded_store(path: Path, spans: int = 3000) -> Path:
    """A store large enough to have many pages: the writer pipeline's rows."""
    exporter = SQLiteSpanExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "seed"}))
    provider.add_span_processor(RepeatGuardSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("seed")
    for i in range(spans):
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "poll",
            "gen_ai.agent.id": "seed",
            "gen_ai.tool.call.arguments": json.dumps({"n": i // RUN, "pad": "x" * 40}),
        }
        tracer.start_span("execute_tool poll", attributes=attributes).end()
    provider.shutdown()
    return path


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as out:
        out.seek(offset)
        out.write(data)


def corrupt_header(db: Path) -> None:
    overwrite(db, 0, b"this is not the SQLite header.." * 4)


def corrupt_table_page(db: Path) -> None:
    """Garbage over the root page of ``tool_calls`` (not the schema page): every query of it fails."""
    with sqlite3.connect(db) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tool_calls'").fetchone()
    assert root > 1
    overwrite(db, (root - 1) * 4096 + 8, b"\xa5" * 3000)


def truncate_half(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2 // 4096 * 4096)


def truncate_in_header(db: Path) -> None:
    os.truncate(db, 60)


def schema_version(value: object) -> Callable[[Path], None]:
    def change(db: Path) -> None:
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("UPDATE repeat_guard_schema SET version = ?", (value,))
        conn.close()  # the last connection checkpoints the WAL into the file

    return change


DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # name: (damage, the CLI's message, the dashboard's message)
    "corrupt-header": (
        corrupt_header,
        "is corrupt, truncated or not a SQLite database (file is not a database)",
        "is corrupt, truncated or not a SQLite database (file is not a database)",
    ),
    "corrupt-table-page": (
        corrupt_table_page,
        "is corrupt (*** in database main *** ",
        "is corrupt, truncated or not a SQLite database (database disk image is malformed)",
    ),
    "truncated": (
        truncate_half,
        "is corrupt, truncated or not a SQLite database (database disk image is malformed)",
        "is corrupt, truncated or not a SQLite database (database disk image is malformed)",
    ),
    "truncated-in-header": (
        truncate_in_header,
        "is corrupt, truncated or not a SQLite database",
        "is corrupt, truncated or not a SQLite database",
    ),
    "newer-schema": (
        schema_version(99),
        f"uses store schema version 99, newer than the {SCHEMA_VERSION}",
        f"newer than the {SCHEMA_VERSION}",
    ),
    "older-schema": (
        schema_version(0),
        f"uses store schema version 0, older than the {SCHEMA_VERSION}",
        f"older than the {SCHEMA_VERSION}",
    ),
    "non-numeric-schema": (schema_version("one"), "has a store schema version 'one' that is not a number", "'one'"),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_store(tmp_path_factory.mktemp("pristine") / "store.db")


@pytest.fixture
def no_streamlit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard command must fail before it starts a server."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the dashboard started on an unusable store")

    monkeypatch.setattr(serve.subprocess, "Popen", refuse)


@pytest.mark.usefixtures("no_streamlit")
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_cli_refuses_a_damaged_store_with_one_line(
    damage: str, pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    shutil.copy(pristine, db)
    change, message, _ = DAMAGE[damage]
    change(db)
    before = db.read_bytes()
    traces = write_lines(tmp_path / "t.jsonl", [otlp_json_line(record_workload(guard=True)[0])])
    for argv in (
        ["dashboard", "--db", str(db)],
        ["demo", "--db", str(db), "--seconds", "0", "--agents", "1"],
        ["ingest", str(traces), "--db", str(db), "--quiet"],
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"otel-repeat-guard: error: {db} "), err
        assert message in err, err
    assert db.read_bytes() == before  # refused, never "repaired" or written to
    assert not db.with_name("store.db-wal").exists() or not db.with_name("store.db-wal").stat().st_size


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_dashboard_shows_a_message_for_a_damaged_store(
    damage: str, pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store.db"
    shutil.copy(pristine, db)
    change, _, message = DAMAGE[damage]
    change(db)
    monkeypatch.setenv(DB_ENV, str(db))
    app = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not app.exception, [e.message for e in app.exception]
    assert [e.value for e in app.error] == [app.error[0].value]
    assert app.error[0].value.startswith(f"Cannot read the store: {db} ")
    assert message in app.error[0].value
    assert not [e for e in app.get("html") if HEADLINE_CLASS in e.value]  # no half-drawn page


# -- a read-only directory, enforced by the kernel --------------------------------------------------------

AS_READ_ONLY = """
import json, os, sys
from streamlit.testing.v1 import AppTest
from otel_repeat_guard.cli import main as cli, serve
from otel_repeat_guard.dashboard.sections.headline import read_headline
serve.subprocess.Popen = None  # the dashboard command must not get as far as starting a server
codes = {command: cli.main(argv) for command, argv in json.loads(sys.argv[2]).items()}
os.environ["OTEL_REPEAT_GUARD_DB"] = sys.argv[3]
app = AppTest.from_file(sys.argv[1], default_timeout=60).run()
print(json.dumps({
    "codes": codes,
    "errors": [e.value for e in app.error],
    "exceptions": [e.message for e in app.exception],
    "metrics": {f.label: f.value for e in app.get("html") for f in read_headline(e.value)},
}))
"""
# As root, permissions do not stop writes: the directory is bind-mounted read-only in a private mount namespace.
READ_ONLY_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def read_only_prefix(store_dir: Path) -> list[str]:
    if os.geteuid() != 0:
        return []  # mode 0555 is enough
    probe = (
        subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False) if shutil.which("unshare") else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root without mount namespaces: nothing can make a directory read-only for root")
    return ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(store_dir)]


def run_read_only(store_dir: Path, db: Path, argv: dict[str, list[str]]) -> tuple[dict[str, object], str]:
    """Run CLI commands, then the dashboard under AppTest, in a process that cannot write ``store_dir``."""
    store_dir.chmod(0o555)
    try:
        done = subprocess.run(
            [*read_only_prefix(store_dir), sys.executable, "-c", AS_READ_ONLY, str(APP), json.dumps(argv), str(db)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        store_dir.chmod(0o755)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_read_only_directory(tmp_path: Path, pristine: Path) -> None:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    db = store_dir / "store.db"
    shutil.copy(pristine, db)
    traces = write_lines(tmp_path / "t.jsonl", [otlp_json_line(record_workload(guard=True)[0])])
    before = db.read_bytes()
    argv = {
        "demo-existing": ["demo", "--db", str(db), "--seconds", "0", "--agents", "1"],
        "demo-new": ["demo", "--db", str(store_dir / "new.db"), "--seconds", "0", "--agents", "1"],
        "ingest": ["ingest", str(traces), "--db", str(db), "--quiet"],
    }
    result, stderr = run_read_only(store_dir, db, argv)
    assert result["codes"] == {"demo-existing": 2, "demo-new": 2, "ingest": 2}
    errors = [line for line in stderr.splitlines() if line.startswith("otel-repeat-guard: error:")]
    assert len(errors) == 3, stderr
    for line, name in zip(errors, ("store.db", "new.db", "store.db"), strict=True):
        assert line.startswith(f"otel-repeat-guard: error: cannot write the store {store_dir / name}: ")
        assert f"its directory {store_dir} is not writable, and SQLite must create {name}-wal and {name}-shm" in line
    # With no -wal file nothing uncommitted can exist, so the dashboard reads the store as it is.
    assert result["errors"] == [] and result["exceptions"] == []
    assert result["metrics"]["Tool calls"] == "3,000"  # type: ignore[index]
    assert db.read_bytes() == before and sorted(p.name for p in store_dir.iterdir()) == ["store.db"]

    # A writer that crashed left a -wal file: reading it needs a -shm file SQLite cannot create here.
    store_dir.joinpath("store.db-wal").write_bytes(b"")
    result, stderr = run_read_only(store_dir, db, {"dashboard": ["dashboard", "--db", str(db)]})
    assert result["codes"] == {"dashboard": 2}
    message = f"cannot read the store {db}: its directory {store_dir} is not writable, and SQLite must create store.db-shm there"
    assert f"otel-repeat-guard: error: {message}" in stderr
    assert result["exceptions"] == [] and result["metrics"] == {}
    assert [e.startswith(f"Cannot read the store: {message}") for e in result["errors"]] == [True]  # type: ignore[union-attr]
