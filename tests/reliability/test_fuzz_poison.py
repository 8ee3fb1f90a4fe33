"""Hostile values all the way through: guard -> exporter -> store -> dashboard queries.

Lone surrogates, integers past 64 bits and past Python's conversion limit, nesting thousands
deep and bytes, in arguments, tool names, agent ids and end timestamps. Nothing may raise into
the application, every good span must be stored, and the dashboard's queries must answer.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter, open_for_reading, queries

POISON_TEXT = st.sampled_from(
    [
        "\ud83d",
        '{"q": "\\ud83d"}',
        "gr\ud800ep",
        "[" * 3000 + "]" * 3000,
        '{"n": ' + "9" * 5000 + "}",
        "1e400",
        "\x00",
        "",
    ]
)
POISON = (
    POISON_TEXT
    | st.binary(max_size=20)
    | st.integers(min_value=-(2**100), max_value=2**100)
    | st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=3)
    | st.floats()
)
GOOD_ARGUMENTS = st.sampled_from(['{"q": 1}', '{ "q":1 }', '{"path": "a"}'])


@st.composite
def span_spec(draw: st.DrawFn) -> dict[str, Any]:
    """A tool span that is good (known tool, JSON arguments, sane end) or carries one or more poisons."""
    good = draw(st.booleans())
    spec: dict[str, Any] = {"good": good, "tool": draw(st.sampled_from(["grep", "read"])), "end": None}
    spec["arguments"] = draw(GOOD_ARGUMENTS)
    spec["agent_id"] = None
    if not good:
        for field in draw(st.sets(st.sampled_from(["tool", "arguments", "agent_id", "end"]), min_size=1)):
            if field == "end":
                spec["end"] = draw(st.sampled_from([2**63 + 5, 2**64 - 1, 10**30]))
            else:
                spec[field] = draw(POISON)
    return spec


def _late(tool: str) -> dict[str, Any]:
    """A good call whose span ends past SQLite's 64-bit integers (a harness's wrong unit)."""
    return {"good": False, "tool": tool, "end": 2**63 + 5, "arguments": '{"q": 1}', "agent_id": None}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(span_spec(), min_size=1, max_size=12))
@example([_late("grep")] * 3)  # repeats whose clamped durations once overflowed the roll-up's sum: a span dropped
@example(  # ... and the headline's SUM of them ("integer overflow")
    [
        _late("grep"),
        _late("grep"),
        {"good": True, "tool": "read", "end": None, "arguments": '{"q": 1}', "agent_id": None},
    ]
)
def test_poison_never_raises_and_never_costs_a_good_span(specs: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "store.db"
        exporter = SQLiteSpanExporter(db)
        provider = TracerProvider()
        provider.add_span_processor(RepeatGuardSpanProcessor())
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("fuzz")
        with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for spec in specs:
                span = tracer.start_span(f"execute_tool {spec['tool']!r}"[:60])
                attributes = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": spec["tool"],
                    "gen_ai.tool.call.arguments": spec["arguments"],
                }
                if spec["agent_id"] is not None:
                    attributes["gen_ai.agent.id"] = spec["agent_id"]
                for key, value in attributes.items():
                    span.set_attribute(key, value)  # the SDK drops what it does not accept, as in production
                span.end(end_time=spec["end"])  # nothing raises into the application
        provider.shutdown()

        good = sum(1 for spec in specs if spec["good"])
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT COUNT(*) FROM tool_calls WHERE tool_name IN ('grep', 'read')").fetchone()[0]
            total = conn.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]
        assert stored >= good  # every good span is stored
        assert exporter.dropped_spans == 0  # and, here, every recognisable span too
        assert total == len(specs)  # a tool name the SDK drops falls back to the span name: all are tool calls

        conn, _ = open_for_reading(db)
        try:
            filters = queries.Filters()
            headline = queries.headline(conn, filters)
            assert int(headline.iloc[0]["tool_calls"]) + int(headline.iloc[0]["untracked_calls"]) == total
            queries.hotspots_by_tool(conn, filters)
            queries.hotspots_by_agent(conn, filters)
            queries.run_lengths(conn, filters)
            queries.unguarded_calls(conn, filters)
            queries.filter_options(conn)
        finally:
            conn.close()
