"""Detections by kind in the store: real guard spans with cycle, no-progress, parallel-duplicate and repeat
events; a call with two reminders keeps both; odd event values cost nothing; the schema 4 -> 5 upgrade."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_repeat_guard.store import SCHEMA_VERSION, SQLiteSpanExporter
from otel_repeat_guard.store.schema import ROLLUP_FROM_CALLS
from tests.store.loop_agent import (
    CONFIG,
    LoopAgent,
    cycler,
    every_kind,
    parallel,
    repeat_in_cycle,
    searcher,
    upgraded_from,
)

DETECTIONS = """
    SELECT c.tool_name, d.kind, d.run_length, d.period, d.repetitions, d.cycle_tools, d.reminder_tier,
           d.reminder_threshold
    FROM detections AS d JOIN tool_calls AS c ON c.id = d.call_id
    WHERE COALESCE(c.agent_name, c.agent_key) = ? ORDER BY c.id, d.kind
"""


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_a_cycle_is_stored_on_each_call_completing_a_copy(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = LoopAgent(db, facts=False)  # its model calls record no request: the store charges the nearest
    cycler(agent)
    agent.close()
    tools = json.dumps(["read_file", "edit_file"])
    assert query(db, DETECTIONS, ("cycler",)) == [
        ("edit_file", "cycle", 4, 2, 2, tools, "gentle", 2),
        ("edit_file", "cycle", 6, 2, 3, tools, "detailed", 3),
    ]
    assert query(db, "SELECT COUNT(*), COUNT(reminder_tier) FROM tool_calls") == [
        (6, 0)
    ]  # no repeat, no repeat reminder
    # the model calls that asked for the calls completing a copy are wasted, the others not
    assert query(db, "SELECT wasted_tool FROM model_calls ORDER BY id") == [
        (None,),
        (None,),
        (None,),
        ("edit_file",),
        (None,),
        ("edit_file",),
    ]


def test_no_progress_is_stored_with_its_run_length_and_outcome(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = LoopAgent(db, facts=False)  # its model calls record no request: the store charges the nearest
    searcher(agent)
    agent.close()
    assert query(db, DETECTIONS, ("searcher",)) == [
        ("grep", "no_progress", 2, None, None, None, None, None),
        ("grep", "no_progress", 3, None, None, None, "gentle", 3),
        ("grep", "no_progress", 4, None, None, None, None, None),
    ]
    digests = query(db, "SELECT DISTINCT outcome_digest FROM detections")
    assert len(digests) == 1 and len(str(digests[0][0])) == 32
    assert [w for (w,) in query(db, "SELECT wasted_tool FROM model_calls ORDER BY id")] == [None] + ["grep"] * 3


def test_a_parallel_duplicate_is_stored_and_its_issuer_is_not_wasted(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = LoopAgent(db)
    parallel(agent)
    agent.close()
    assert query(db, DETECTIONS, ("parallel",)) == [
        ("web_search", "parallel_duplicate", None, None, None, None, None, None)
    ]
    assert query(db, "SELECT run_length FROM tool_calls ORDER BY id") == [(1,), (1,)]
    assert query(db, "SELECT wasted_tool FROM model_calls") == [(None,)]  # it also asked for the original


def test_a_call_with_a_repeat_and_a_cycle_reminder_keeps_both_by_kind(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = LoopAgent(db)
    repeat_in_cycle(agent)
    agent.close()
    tools = json.dumps(["ls", "cat", "cat"])
    assert query(db, DETECTIONS, ("mixer",)) == [
        ("cat", "repeat", 2, None, None, None, "gentle", 2),
        ("cat", "cycle", 6, 3, 2, tools, "gentle", 2),
        ("cat", "repeat", 2, None, None, None, "gentle", 2),
        ("cat", "cycle", 9, 3, 3, tools, "detailed", 3),
        ("cat", "repeat", 2, None, None, None, "gentle", 2),
    ]
    # tool_calls keeps the repeat reminder, as before: never the cycle's detailed one that came after it
    assert (
        query(db, "SELECT run_length, reminder_tier, reminder_threshold FROM tool_calls WHERE run_length = 2")
        == [(2, "gentle", 2)] * 3
    )
    assert [(r.kind, r.tier) for r in agent.reminders][-2:] == [("repeat", "gentle"), ("cycle", "detailed")]


def test_every_kind_is_listed_for_the_filter_and_the_rollup_still_equals_its_calls(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    every_kind(db)
    assert query(db, "SELECT value FROM dimensions WHERE kind = 'loop_kind' ORDER BY value") == [
        ("cycle",),
        ("no_progress",),
        ("parallel_duplicate",),
        ("repeat",),
    ]
    assert query(db, "SELECT * FROM call_rollup ORDER BY 1, 2, 3, 4, 5") == query(
        db, f"{ROLLUP_FROM_CALLS} ORDER BY 1, 2, 3, 4, 5"
    )
    # every repeated call has its repeat row, and no other call has one
    assert query(db, "SELECT COUNT(*) FROM tool_calls WHERE run_length >= 2") == query(
        db, "SELECT COUNT(*) FROM detections WHERE kind = 'repeat'"
    )


def _odd_tool(tracer: Any, events: list[tuple[str, dict[str, Any]]]) -> None:
    span = tracer.start_span("execute_tool odd")
    span.set_attributes(
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "odd", "gen_ai.tool.call.arguments": "{}"}
    )
    for name, attributes in events:
        span.add_event(name, attributes)
    span.end()


def test_odd_detection_values_are_stored_as_unknown_and_never_cost_the_span(tmp_path: Path) -> None:
    """Events from another guard version or a hand-made span: wrong types, huge numbers, unknown kinds."""
    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db, config=CONFIG)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("odd")
    _odd_tool(
        tracer,
        [
            (
                "repeat_tool_guard.cycle",
                {
                    "repeat_tool_guard.period": 2**70,
                    "repeat_tool_guard.repetitions": 2**70,
                    "repeat_tool_guard.cycle_tools": "read_file",
                },
            ),
            ("repeat_tool_guard.no_progress", {"repeat_tool_guard.run_length": True}),
            ("repeat_tool_guard.reminder", {"repeat_tool_guard.kind": "cycle", "repeat_tool_guard.tier": 3}),
            ("repeat_tool_guard.reminder", {"repeat_tool_guard.kind": "tantrum", "repeat_tool_guard.tier": "stop"}),
            ("repeat_tool_guard.reminder", {"repeat_tool_guard.kind": 7, "repeat_tool_guard.tier": "gentle"}),
        ],
    )
    _odd_tool(tracer, [("repeat_tool_guard.cycle", {"repeat_tool_guard.cycle_tools": ("a\ud800", "b")})])
    provider.shutdown()
    assert exporter.dropped_spans == 0
    assert query(
        db, "SELECT call_id, kind, run_length, period, repetitions, cycle_tools, reminder_tier FROM detections"
    ) == [
        (1, "cycle", 2**63 - 1, 2**63 - 1, 2**63 - 1, None, None),
        (1, "no_progress", None, None, None, None, None),
        (2, "cycle", None, None, None, '["a\\ud800", "b"]', None),
    ]
    assert query(db, "SELECT reminder_tier FROM tool_calls") == [(None,), (None,)]


def test_a_schema_4_store_is_upgraded_to_5_with_its_repeats(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = LoopAgent(db)
    repeat_in_cycle(agent)
    agent.close()
    expected = query(
        db, "SELECT call_id, run_length, reminder_tier, reminder_threshold FROM detections WHERE kind = 'repeat'"
    )
    assert len(expected) == 3
    # as schema 4 left it: no detections table, no loop kinds
    upgraded_from(db, 4, "DROP TABLE detections", "DELETE FROM dimensions WHERE kind = 'loop_kind'")
    assert query(db, "SELECT version FROM repeat_guard_schema") == [(SCHEMA_VERSION,)]
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(db, "SELECT call_id, run_length, reminder_tier, reminder_threshold FROM detections") == expected
    assert query(db, "SELECT end_ns FROM detections") == query(
        db, "SELECT end_ns FROM tool_calls WHERE run_length >= 2"
    )
    assert query(db, "SELECT value FROM dimensions WHERE kind = 'loop_kind'") == [("repeat",)]
    assert "detections_kind" in {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    # and the upgraded store takes new detections
    agent = LoopAgent(db)
    cycler(agent)
    agent.close()
    assert query(db, "SELECT COUNT(*) FROM detections WHERE kind = 'cycle'") == [(2,)]
