"""One call, two tool spans (an MCP client's and its server's, in one process): counted once, stored once.
The shapes are those of the real instrumentations: the integration tests run them (test_mcp_openllmetry)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, format_span_id

from otel_repeat_guard.core.facts import NESTED, RUN
from otel_repeat_guard.store import SQLiteSpanExporter

from .conftest import Harness, make_harness

GREP = {"pattern": "TODO", "path": "src"}


def _genai_over_mcp_server(h: Harness, i: int, arguments: dict[str, Any] = GREP) -> None:
    """A framework's ``execute_tool`` span with the call id and arguments, around the span MCP's server middleware
    makes for ``tools/call`` (the tool's name only)."""
    client = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "grep",
        "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.tool.call.arguments": json.dumps(arguments),
    }
    with h.tracer.start_as_current_span("execute_tool grep", attributes=client):
        server = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"}
        with h.tracer.start_as_current_span("tools/call grep", kind=SpanKind.SERVER, attributes=server):
            pass


def _openllmetry_both_sides(h: Harness, arguments: dict[str, Any] = GREP) -> None:
    """OpenLLMetry's client span around the request, and its FastMCP server spans inside it."""
    entity = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "grep",
        "traceloop.entity.input": json.dumps({"tool_name": "grep", "arguments": arguments}),
    }
    with h.tracer.start_as_current_span("grep.tool") as client:
        client.set_attributes(entity)  # right after the start, before the request is sent
        with (
            h.tracer.start_as_current_span("mcp.server", attributes={"traceloop.span.kind": "server"}),
            h.tracer.start_as_current_span("grep.tool", attributes=entity),
        ):
            pass


def _stored(h: Harness, db: Path) -> list[tuple[str, int]]:
    exporter = SQLiteSpanExporter(db)
    exporter.write(h.exporter.get_finished_spans())
    exporter.shutdown()
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT span_id, run_length FROM tool_calls ORDER BY start_ns").fetchall()


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_framework_tool_span_around_the_mcp_servers_counts_the_call_once(fast_path: bool, tmp_path: Path) -> None:
    h = make_harness(record_facts=True, fast_path=fast_path)
    with h.agent_run("coder"):
        for i in range(3):
            _genai_over_mcp_server(h, i)
    outer = [s for s in h.exporter.get_finished_spans() if s.name == "execute_tool grep"]
    inner = [s for s in h.exporter.get_finished_spans() if s.name == "tools/call grep"]
    assert [r.run_length for r in h.reminders] == [3]
    assert [e.attributes["repeat_tool_guard.run_length"] for s in outer for e in s.events] == [2, 3, 3]  # type: ignore[index]
    assert [(s.attributes or {})[NESTED] for s in inner] == [format_span_id(s.context.span_id) for s in outer]  # type: ignore[union-attr]
    assert all(not s.events for s in inner) and {(s.attributes or {})[RUN] for s in inner + outer} == {
        (outer[0].attributes or {})[RUN]
    }
    assert _stored(h, tmp_path / "store.db") == [
        (format_span_id(s.context.span_id), n) for s, n in zip(outer, (1, 2, 3), strict=True)
    ]  # type: ignore[union-attr]


def test_openllmetrys_client_and_server_tool_spans_of_one_call_count_once() -> None:
    h = make_harness(record_facts=True)
    with h.agent_run("coder"):
        for _ in range(3):
            _openllmetry_both_sides(h)
    assert [r.run_length for r in h.reminders] == [3]
    spans = h.exporter.get_finished_spans()
    names = {s.context.span_id: s.name for s in spans}  # type: ignore[union-attr]
    nested = [names[s.parent.span_id] for s in spans if NESTED in (s.attributes or {})]  # type: ignore[union-attr]
    assert nested == ["mcp.server"] * 3  # the server's spans are the nested ones, the clients' are counted


def test_a_tool_span_inside_another_call_of_the_same_tool_counts_on_its_own() -> None:
    h = make_harness(record_facts=True)
    with h.agent_run("coder"):
        for _ in range(3):
            with h.tracer.start_as_current_span("grep.tool") as outer:
                outer.set_attributes({"traceloop.span.kind": "tool", "traceloop.entity.name": "grep"})
                outer.set_attribute("traceloop.entity.input", json.dumps({"tool_name": "grep", "arguments": GREP}))
                inner = {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep"}
                inner["traceloop.entity.input"] = json.dumps({"tool_name": "grep", "arguments": {"pattern": "x"}})
                with h.tracer.start_as_current_span("grep.tool", attributes=inner):
                    pass
    # grep(x), grep(TODO), grep(x), ...: six calls, each differing from the one before
    assert not h.reminders
    assert not any(NESTED in (s.attributes or {}) for s in h.exporter.get_finished_spans())


def test_a_tool_that_runs_an_agent_is_not_the_same_call_as_that_agents_tools() -> None:
    h = make_harness(record_facts=True)
    with h.agent_run("lead"):
        client = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"}
        with h.tracer.start_as_current_span("execute_tool grep", attributes=client), h.agent_run("helper"):
            for _ in range(3):  # the helper's own calls, in its own run, under a tool span of the same name
                h.call("grep", GREP)
    assert [r.run_length for r in h.reminders] == [3]
    assert not any(NESTED in (s.attributes or {}) for s in h.exporter.get_finished_spans())


def _fastmcp_beside(
    h: Harness, server_arguments: dict[str, Any] = GREP, request_ids: tuple[str, str] = ("", "")
) -> None:
    """OpenLLMetry with FastMCP 2.x in one process (the shape tests/integrations/test_mcp_openllmetry records):
    the client's ``grep.tool`` and, beside it under the client's session span, the server's ``mcp.server`` >
    ``grep.tool`` (with ``server_arguments``), which ends while the client's is open. ``request_ids``: the
    ``mcp.request.id`` of each side ("": none)."""

    def entity(arguments: dict[str, Any], request_id: str) -> dict[str, Any]:
        attributes = {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep"}
        attributes["traceloop.entity.input"] = json.dumps({"tool_name": "grep", "arguments": arguments})
        return {**attributes, "mcp.request.id": request_id} if request_id else attributes

    server = {"traceloop.span.kind": "server", "traceloop.workflow.name": "weather.mcp"}
    with h.tracer.start_as_current_span("mcp.client.session", attributes={"traceloop.span.kind": "session"}):
        client = h.tracer.start_span("grep.tool", attributes=entity(GREP, request_ids[0]))
        with (
            h.tracer.start_as_current_span("mcp.server", attributes=server),
            h.tracer.start_as_current_span("grep.tool", attributes=entity(server_arguments, request_ids[1])),
        ):
            pass
        client.end()


@pytest.mark.parametrize("fast_path", [True, False])
def test_fastmcps_server_tool_span_beside_its_clients_counts_the_call_once(fast_path: bool, tmp_path: Path) -> None:
    h = make_harness(record_facts=True, fast_path=fast_path)
    with h.agent_run("coder"):
        for _ in range(3):
            _fastmcp_beside(h)
    spans = h.exporter.get_finished_spans()
    names = {s.context.span_id: s.name for s in spans}  # type: ignore[union-attr]
    clients = [s for s in spans if s.name == "grep.tool" and names[s.parent.span_id] == "mcp.client.session"]  # type: ignore[union-attr]
    servers = [s for s in spans if s.name == "grep.tool" and names[s.parent.span_id] == "mcp.server"]  # type: ignore[union-attr]
    assert [r.run_length for r in h.reminders] == [3]
    assert [(s.attributes or {})[NESTED] for s in servers] == [format_span_id(s.context.span_id) for s in clients]  # type: ignore[union-attr]
    assert all(NESTED not in (s.attributes or {}) for s in clients) and all(not s.events for s in servers)
    assert _stored(h, tmp_path / "store.db") == [
        (format_span_id(s.context.span_id), n)
        for s, n in zip(clients, (1, 2, 3), strict=True)  # type: ignore[union-attr]
    ]


def test_a_server_span_beside_a_client_span_of_other_arguments_or_request_id_counts_on_its_own() -> None:
    h = make_harness(record_facts=True)
    with h.agent_run("coder"):
        _fastmcp_beside(h, request_ids=("1", "2"))  # the same tool and arguments, two requests
        _fastmcp_beside(h, server_arguments={"pattern": "x"})
    assert not any(NESTED in (s.attributes or {}) for s in h.exporter.get_finished_spans())


def test_one_mcp_request_id_on_both_sides_is_one_call_whatever_the_arguments_say() -> None:
    h = make_harness(record_facts=True)
    with h.agent_run("coder"):
        _fastmcp_beside(h, server_arguments={"pattern": "TODO", "path": "src", "limit": 50}, request_ids=("7", "7"))
    spans = h.exporter.get_finished_spans()
    client = next(s for s in spans if s.name == "grep.tool" and NESTED not in (s.attributes or {}))
    assert [(s.attributes or {})[NESTED] for s in spans if NESTED in (s.attributes or {})] == [
        format_span_id(client.context.span_id)  # type: ignore[union-attr]
    ]


def test_two_identical_calls_at_once_with_no_server_span_between_stay_two_calls() -> None:
    h = make_harness(record_facts=True)
    entity = {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep"}
    entity["traceloop.entity.input"] = json.dumps({"tool_name": "grep", "arguments": GREP})
    with h.agent_run("coder"):
        first = h.tracer.start_span("grep.tool", attributes=entity)
        h.tracer.start_span("grep.tool", attributes=entity).end()  # ends while the first is open
        first.end()
    assert [r.run_length for r in h.reminders] == []  # two calls: a run of 2, below the first threshold
    assert not any(NESTED in (s.attributes or {}) for s in h.exporter.get_finished_spans())
    assert [
        e.attributes["repeat_tool_guard.run_length"] for s in h.exporter.get_finished_spans() for e in s.events
    ] == [2]  # type: ignore[index]
