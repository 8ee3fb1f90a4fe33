"""mcp 1.x with OpenLLMetry's ``opentelemetry-instrumentation-mcp``, driven by the same agent loop.

OpenLLMetry 0.62 patches ``mcp.shared.session.BaseSession.send_request``, which mcp 2.x no
longer has, so it runs on the newest mcp 1.x (1.30). It makes the tool span on the
*client* side, around the request: ``<tool>.tool`` with ``traceloop.span.kind = tool``,
``traceloop.entity.name = <tool>`` and, with content tracing on (``TRACELOOP_TRACE_CONTENT``
not ``false``, the default), ``traceloop.entity.input = {"tool_name": …, "arguments": {…}}``;
a tool error sets ``error.type = tool_error`` and status ERROR. No tool call id. The tool span
is a child of the caller's current span, whatever the transport; a call made outside any
span has no parent.

The model client is instrumented with ``opentelemetry-instrumentation-openai-v2``
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only``), as in test_mcp_builtin.
OpenLLMetry's MCP instrumentor cannot be undone (its uninstrument leaves ``send_request``
wrapped), so it is instrumented once, with the global provider behind a switchboard.

FastMCP 2.x (the ``fastmcp`` package, on mcp 1.x) in one process: OpenLLMetry also wraps its server's
``ToolManager.call_tool`` (``mcp.server`` > ``<tool>.tool``) and its ``Client`` (an ``mcp.client.session``
span from connecting on). The server's spans sit under the session span, beside the client's ``<tool>.tool``
of the same call, not inside it; the guard counts the call once, on the client's span.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard.core.facts import NESTED

from .mcp_cases import (
    check_a_second_prompt_gets_a_fresh_chain,
    check_a_second_prompt_under_the_same_outer_span_gets_a_fresh_chain,
    check_calls_outside_any_span_are_reported_as_without_agent,
    check_one_run_and_the_reminders_reach_the_model,
    check_the_calls_are_reported_as_without_arguments,
    check_the_whole_chain_agrees,
    check_two_concurrent_runs_have_separate_chains,
    check_two_concurrent_runs_under_one_outer_span_have_separate_chains,
    make_server,
)
from .scenario import (
    LOOP,
    PARIS,
    SCRIPT,
    Guarded,
    Switchboard,
    lookup_result,
    make_guarded,
    require,
    run_lengths,
    tool_spans_by_trace,
    with_store,
)

os.environ.setdefault("OPENAI_API_KEY", "offline")
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
require("opentelemetry.instrumentation.mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.memory import create_connected_server_and_client_session  # noqa: E402
from opentelemetry.instrumentation.mcp import McpInstrumentor  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

CAPTURE = "TRACELOOP_TRACE_CONTENT"
MODEL_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MCP_SCOPE = "opentelemetry.instrumentation.mcp.instrumentation"
TOOL_SPAN = "{}.tool"  # OpenLLMetry's client-side span of a call, by tool
ROOT = Path(__file__).resolve().parents[2]
BOARD = Switchboard()
TRANSPORTS = ["memory"]


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(BOARD)
    McpInstrumentor().instrument(tracer_provider=provider)
    return provider


@pytest.fixture
def content() -> str:
    """``true``: both instrumentations record content; ``false``: neither does (tests override it by parametrizing)."""
    return "true"


@contextmanager
def instrumented(guarded: Guarded, provider: TracerProvider, content: str, mp: pytest.MonkeyPatch) -> Iterator[Guarded]:
    """``guarded`` behind the switchboard, the model client instrumented, content recorded or not, for the block."""
    mp.setenv(CAPTURE, content)  # OpenLLMetry reads it on every call
    mp.setenv(MODEL_CAPTURE, "span_only" if content == "true" else "")  # openai-v2: when instrumenting
    BOARD.targets = guarded.processors
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield guarded
    finally:
        instrumentor.uninstrument()
        BOARD.targets = []


@pytest.fixture
def g(provider: TracerProvider, content: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    with instrumented(make_guarded(), provider, content, monkeypatch) as guarded:
        yield guarded


@pytest.fixture
def gs(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Guarded]:
    """As ``g`` (content recorded), with the store."""
    with with_store(tmp_path) as stored, instrumented(stored, provider, "true", monkeypatch) as guarded:
        yield guarded


@asynccontextmanager
async def _connect(transport: str) -> AsyncIterator[Any]:
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tests.integrations.mcp_cases"],
            cwd=str(ROOT),
            env={"PYTHONPATH": str(ROOT)},
        )
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
    else:
        async with create_connected_server_and_client_session(make_server()) as session:
            yield session


def connect(transport: str) -> partial[AbstractAsyncContextManager[Any]]:
    return partial(_connect, transport)


# -- the scenario, plain -------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["memory", "stdio"])
def test_one_run_and_the_reminders_reach_the_model(g: Guarded, transport: str) -> None:
    spans = check_one_run_and_the_reminders_reach_the_model(connect(transport), g, tool_span=TOOL_SPAN, scope=MCP_SCOPE)
    assert [json.loads(str((s.attributes or {})["traceloop.entity.input"])) for s in spans] == [
        {"tool_name": tool, "arguments": arguments} for tool, arguments in SCRIPT
    ]


@pytest.mark.parametrize("transport", ["memory", "stdio"])
def test_the_whole_chain_agrees(gs: Guarded, transport: str) -> None:
    """Issue 21, item 5: an agent loop calling an MCP tool nine times with the same arguments. OpenLLMetry's
    client-side tool spans and the loop's model calls are one run; each repeat wastes the usage of the
    model call that asked for it."""
    check_the_whole_chain_agrees(connect(transport), gs)
    (spans,) = tool_spans_by_trace(gs).values()
    assert [(s.name, s.instrumentation_scope.name) for s in spans] == [("lookup.tool", MCP_SCOPE)] * len(LOOP)  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_prompt_gets_a_fresh_chain(g: Guarded, transport: str) -> None:
    check_a_second_prompt_gets_a_fresh_chain(connect(transport), g)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_concurrent_runs_have_separate_chains(g: Guarded, transport: str) -> None:
    """Two agent loops at once over one MCP session: each loop span is a trace of its own."""
    check_two_concurrent_runs_have_separate_chains(connect(transport), g)


# -- the scenario, all runs under one outer span -------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_concurrent_runs_under_one_outer_span_have_separate_chains(g: Guarded, transport: str) -> None:
    check_two_concurrent_runs_under_one_outer_span_have_separate_chains(connect(transport), g)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_prompt_under_the_same_outer_span_gets_a_fresh_chain(g: Guarded, transport: str) -> None:
    check_a_second_prompt_under_the_same_outer_span_gets_a_fresh_chain(connect(transport), g)


# -- what the guard cannot compare is reported -----------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_calls_outside_any_span_are_reported_as_without_agent(g: Guarded, transport: str) -> None:
    spans = check_calls_outside_any_span_are_reported_as_without_agent(
        connect(transport), g, tool_span=TOOL_SPAN, scope=MCP_SCOPE
    )
    assert [(s.parent, json.loads(str((s.attributes or {})["traceloop.entity.input"]))) for s in spans] == [
        (None, {"tool_name": "lookup", "arguments": PARIS})
    ] * 3


@pytest.mark.parametrize("content", ["false"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_without_content_tracing_the_calls_are_reported_as_without_arguments(g: Guarded, transport: str) -> None:
    report = check_the_calls_are_reported_as_without_arguments(connect(transport), g, scope=MCP_SCOPE)
    (spans,) = tool_spans_by_trace(g).values()
    assert [s.name for s in spans] == [f"{tool}.tool" for tool, _ in SCRIPT]
    assert not any("traceloop.entity.input" in (s.attributes or {}) for s in spans)
    assert all(CAPTURE in b.fix for b in report.blind_spots)


# -- FastMCP 2.x, client and server in one process -------------------------------------------------


class FastMCPSession:
    """A FastMCP 2.x ``Client`` as the agent loop's session: the MCP protocol's results, a tool error as a result."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def list_tools(self) -> Any:
        return await self.client.list_tools_mcp()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.client.call_tool_mcp(name, arguments)


def make_fastmcp_server() -> Any:
    """:func:`make_server`'s weather tools on a FastMCP 2.x server."""
    from fastmcp import FastMCP

    server = FastMCP("weather")

    @server.tool()
    def lookup(city: str, units: str) -> str:
        """Look up the weather."""
        return lookup_result(city, units)

    @server.tool()
    def broken_lookup(city: str, units: str) -> str:
        """Look up the weather, badly."""
        raise RuntimeError(f"the weather service for {city} is down")

    return server


@asynccontextmanager
async def connect_fastmcp() -> AsyncIterator[Any]:
    """A FastMCP 2.x client connected to its server in this process (FastMCP's in-memory transport)."""
    from fastmcp import Client

    async with Client(make_fastmcp_server()) as client:
        yield FastMCPSession(client)


def test_fastmcp_2_in_one_process_counts_each_call_once_in_the_guard_and_the_store(gs: Guarded) -> None:
    """Issue 42, item 5: nine identical calls through FastMCP 2.x make eighteen tool spans (the client's and
    the server's); the guard counts nine calls in one run (its reminders at 3, 5 and 8, the store's rows and
    wasted tokens those of nine calls), on the client's spans; each server span names its client span."""
    import fastmcp

    assert fastmcp.__version__.startswith("2.")
    check_the_whole_chain_agrees(connect_fastmcp, gs)
    (spans,) = tool_spans_by_trace(gs).values()
    names = {s.context.span_id: s.name for s in gs.exporter.get_finished_spans()}  # type: ignore[union-attr]
    client = [s for s in spans if names[s.parent.span_id] != "mcp.server"]  # type: ignore[union-attr]
    server = [s for s in spans if names[s.parent.span_id] == "mcp.server"]  # type: ignore[union-attr]
    assert [s.name for s in client] == [s.name for s in server] == ["lookup.tool"] * len(LOOP)
    assert {names[s.parent.span_id] for s in client} == {"agent loop"}  # type: ignore[union-attr]
    assert run_lengths(client) == list(range(1, len(LOOP) + 1))
    assert [(s.attributes or {}).get(NESTED) for s in server] == [f"{s.context.span_id:016x}" for s in client]  # type: ignore[union-attr]
    assert all(not s.events for s in server)
