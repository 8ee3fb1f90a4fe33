"""The exporter's ``call_rollup`` always equals the roll-up computed from the stored calls.

The dashboard sums the roll-up instead of the calls, so any drift would be a wrong number
on the page. The cases here are the ones where the exporter must fix up groups it already
wrote: calls whose agent becomes known only when their agent-run span is exported.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_exporter import Harness

from otel_repeat_guard.store import SCHEMA_VERSION, SchemaError, open_for_reading, open_for_writing
from otel_repeat_guard.store.schema import ROLLUP_FROM_CALLS

Row = tuple[object, ...]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def rollups(db: Path) -> tuple[list[Row], list[Row]]:
    """The kept roll-up and the one computed from the calls, both sorted."""
    conn, _ = open_for_reading(db)
    try:
        kept = conn.execute("SELECT * FROM call_rollup ORDER BY 1, 2, 3, 4, 5").fetchall()
        computed = conn.execute(f"{ROLLUP_FROM_CALLS} ORDER BY 1, 2, 3, 4, 5").fetchall()
    finally:
        conn.close()
    return kept, computed


def assert_rollup_matches_calls(db: Path) -> list[Row]:
    kept, computed = rollups(db)
    assert kept == computed
    return kept


def test_first_calls_move_to_their_agent_when_the_run_span_arrives(db: Path) -> None:
    harness = Harness(db)
    run = harness.agent("planner")
    for _ in range(4):
        harness.call(run, "search", {"q": "x"})
    harness.call(run, "todo_write", {"items": []})
    run.end()
    harness.close()
    kept = assert_rollup_matches_calls(db)
    assert {row[2] for row in kept} == {"planner"}  # no provisional label left behind
    (search,) = [row for row in kept if row[3] == "search"]
    # calls, repeated, gentle, detailed, longest run, repeated time (3 x 250 ms)
    assert search[5:] == (4, 3, 1, 0, 4, 750_000_000)


def test_a_group_that_keeps_calls_recounts_its_longest_run(db: Path) -> None:
    # Spans without the guard's facts (record_facts=False, an older guard): the store labels them itself.
    # The agent id is on the tool spans, the readable name only on the run span: calls under
    # the run are labelled by id until the run span arrives, then by name. The root-level call
    # keeps the id label, so that group loses its longest run (4) and keeps a run of 1.
    harness = Harness(db, facts=False)
    harness.call(None, "fetch", {"url": "a"}, **{"gen_ai.agent.id": "agent-9"})
    run = harness.agent("crawler")
    for _ in range(3):
        harness.call(run, "fetch", {"url": "a"}, **{"gen_ai.agent.id": "agent-9"})
    run.end()
    harness.close()
    kept = assert_rollup_matches_calls(db)
    by_agent = {row[2]: row[5:] for row in kept}
    assert by_agent["agent-9"] == (1, 0, 0, 0, 1, 0)
    assert by_agent["crawler"] == (3, 3, 1, 0, 4, 750_000_000)


def test_run_span_exported_before_its_calls(db: Path) -> None:
    harness = Harness(db)
    run = harness.agent("early")
    run.end()
    harness.provider.force_flush()
    for _ in range(3):
        harness.call(run, "lookup", {"id": 1})
    harness.close()
    kept = assert_rollup_matches_calls(db)
    assert [row[2] for row in kept] == ["early"]


def test_many_agents_across_batches(db: Path) -> None:
    harness = Harness(db)  # batches of 7 spans: runs and their calls land in different batches
    runs = [harness.agent(f"worker-{i % 3}") for i in range(6)]
    for step in range(5):
        for index, run in enumerate(runs):
            harness.call(run, "tool", {"step": step // (1 + index % 3)}, denied=index == 2)
    for run in reversed(runs):
        run.end()
    harness.call(None, "orphan", {"a": 1})
    harness.close()
    kept = assert_rollup_matches_calls(db)
    assert sum(int(row[5]) for row in kept) == 31  # type: ignore[call-overload]


def _drop_model_tables(conn: sqlite3.Connection) -> None:
    """What schema 4 added: a store of an older schema has none of it."""
    for table in ("model_call_outputs", "model_calls", "model_rollup", "store_info"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP INDEX agent_runs_key")
    conn.execute("DROP INDEX call_rollup_agent")


def _downgrade_to_version_1(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        _drop_model_tables(conn)
        conn.execute("DROP TABLE call_rollup")
        conn.execute("DROP INDEX tool_calls_repeats_by_time")
        conn.execute("CREATE INDEX tool_calls_repeats ON tool_calls(end_ns, reminder_tier) WHERE run_length >= 2")
        conn.execute("UPDATE repeat_guard_schema SET version = 1")
        conn.execute("PRAGMA user_version = 1")


def test_a_version_1_store_is_upgraded_by_the_exporter_and_refused_by_readers(db: Path) -> None:
    harness = Harness(db)
    run = harness.agent("old")
    for _ in range(5):
        harness.call(run, "grep", {"p": "x"})
    run.end()
    harness.close()
    expected = assert_rollup_matches_calls(db)
    _downgrade_to_version_1(db)

    with pytest.raises(SchemaError, match=rf"schema version 1, older than the {SCHEMA_VERSION} .* upgraded in place"):
        open_for_reading(db)
    open_for_writing(db).close()

    assert assert_rollup_matches_calls(db) == expected
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version FROM repeat_guard_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "tool_calls_repeats" not in indexes
    assert "tool_calls_repeats_by_time" in indexes


def test_a_version_2_store_with_rows_two_ingests_duplicated_is_upgraded_to_one_row_per_span(db: Path) -> None:
    harness = Harness(db)
    run = harness.agent("old")
    for _ in range(5):
        harness.call(run, "grep", {"p": "x"})
    run.end()
    harness.close()
    expected = assert_rollup_matches_calls(db)
    with sqlite3.connect(db) as conn:  # schema 2, as two racing ingests left it: every row twice
        _drop_model_tables(conn)
        conn.execute("DROP INDEX tool_calls_span_unique")
        conn.execute("ALTER TABLE tool_calls DROP COLUMN unguarded_reason")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tool_calls)") if row[1] != "id"]
        listed = ", ".join(columns)
        conn.execute(f"INSERT INTO tool_calls ({listed}) SELECT {listed} FROM tool_calls")
        conn.execute("DELETE FROM call_rollup")
        conn.execute(f"INSERT INTO call_rollup {ROLLUP_FROM_CALLS}")
        conn.execute("UPDATE repeat_guard_schema SET version = 2")
        conn.execute("PRAGMA user_version = 2")
        assert conn.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 10

    open_for_writing(db).close()

    assert assert_rollup_matches_calls(db) == expected
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 5
        assert "unguarded_reason" in {row[1] for row in conn.execute("PRAGMA table_info(tool_calls)")}
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(f"INSERT INTO tool_calls ({listed}) SELECT {listed} FROM tool_calls LIMIT 1")
