"""Values of types the SDK lets through where it declares others: a ``str`` subclass (a ``StrEnum`` member,
markupsafe's ``Markup``) as arguments or agent id, and a float time (``time.time() * 1e9``). Each is read as
what it stands for, on both builds (the compiled one raised ``TypeError`` reading a float as the ``int`` the
SDK declares) and on both paths; before, each cost its call (never compared, lost, or filed under another run)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.core.canonical import arguments_key, canonical_arguments
from otel_repeat_guard.spans.span_events import nanoseconds
from otel_repeat_guard.store import SQLiteSpanExporter


class Text(str):
    """A str subclass, as an application's own text type."""


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}


def _run(
    tool: dict[str, Any], *, fast_path: bool = True, store: Path | None = None, wrap: bool = False, **times: float
) -> list[Reminder]:
    """Three tool spans of ``tool``'s attributes under one agent run: the reminders they got. ``wrap``: the guard
    wraps the store's processor (it hands on copies of the spans)."""
    reminders: list[Reminder] = []
    provider = TracerProvider()
    stored = [] if store is None else [SimpleSpanProcessor(SQLiteSpanExporter(store))]
    guard = RepeatGuardSpanProcessor(
        on_reminder=reminders.append, fast_path=fast_path, downstream=stored if wrap else ()
    )
    provider.add_span_processor(guard)
    for processor in [] if wrap else stored:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("tests.odd_types")
    with tracer.start_as_current_span("invoke_agent a", attributes=AGENT):
        for _ in range(3):
            span = tracer.start_span(
                "execute_tool grep", attributes=tool, **({"start_time": times["start"]} if times else {})
            )
            span.end(**({"end_time": times["end"]} if times else {}))
    provider.shutdown()
    return reminders


def test_a_str_subclass_is_canonical_as_its_text() -> None:
    assert canonical_arguments(Text('{"b": 1, "a": 2}')) == '{"a":2,"b":1}'
    assert arguments_key(Text('{"q": 1}')) == arguments_key('{"q": 1}')


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "general-path"])
@pytest.mark.parametrize(
    "tool",
    [
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "grep",
            "gen_ai.tool.call.arguments": Text('{"q": 1}'),
        },
        {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep", "traceloop.entity.input": Text('{"q": 1}')},
    ],
    ids=["genai", "openllmetry"],
)
def test_arguments_of_a_str_subclass_are_compared_and_the_loop_reminded(fast_path: bool, tool: dict[str, Any]) -> None:
    reminders = _run(tool, fast_path=fast_path)
    assert [(r.tool_name, r.run_length, r.arguments_preview) for r in reminders] == [("grep", 3, '{"q":1}')]


@pytest.mark.parametrize("wrap", [False, True], ids=["beside-the-store", "wrapping-the-store"])
def test_float_times_count_the_call_and_the_store_keeps_whole_nanoseconds(tmp_path: Path, wrap: bool) -> None:
    now = time.time() * 1e9
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": "{}"}
    reminders = _run(tool, store=tmp_path / "store.db", wrap=wrap, start=now, end=now + 1_000_000.5)
    assert [r.run_length for r in reminders] == [3]
    with sqlite3.connect(tmp_path / "store.db") as conn:
        rows = conn.execute("SELECT typeof(start_ns), typeof(end_ns), end_ns - start_ns FROM tool_calls").fetchall()
    assert rows == [("integer", "integer", int(now + 1_000_000.5) - int(now))] * 3


def test_a_time_is_whole_nanoseconds_or_none() -> None:
    assert [nanoseconds(v) for v in (5, None, 5.9, float("nan"), float("inf"), True, "5", 2**70)] == [
        5,
        None,
        5,
        None,
        None,
        None,
        None,
        2**70,
    ]


def test_a_str_subclass_agent_id_keys_the_model_call_as_its_tool_calls(tmp_path: Path) -> None:
    """The run of a model span and of the tool spans it issued come from one reading of ``gen_ai.agent.id``."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.odd_types")
    with tracer.start_as_current_span("root"):
        model = {"gen_ai.operation.name": "chat", "gen_ai.agent.id": Text("ag"), "gen_ai.usage.input_tokens": 10}
        with tracer.start_as_current_span("chat m", attributes=model):
            pass
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.agent.id": Text("ag")}
        with tracer.start_as_current_span("execute_tool grep", attributes={**tool, "gen_ai.tool.call.arguments": "{}"}):
            pass
    runs = {s.name: (s.attributes or {}).get("repeat_tool_guard.run") for s in memory.get_finished_spans()}
    assert runs == {"chat m": "ag", "execute_tool grep": "ag", "root": None}
