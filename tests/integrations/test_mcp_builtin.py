"""MCP 2.x with its built-in OpenTelemetry tracing, driven by a small agent loop over the real openai SDK.

The MCP server's ``OpenTelemetryMiddleware`` (on by default) makes one SERVER span per
request; for ``tools/call`` it is named ``tools/call <tool>`` with
``gen_ai.operation.name = execute_tool`` and ``gen_ai.tool.name``, and error status with
``error.type = tool_error`` when the tool fails. It records neither the arguments nor a tool
call id. The arguments are on the model-call span of
``opentelemetry-instrumentation-openai-v2`` (``gen_ai.output.messages``, parts
``{type: tool_call, id, name, arguments}``), recorded only with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (or ``span_and_event``):
with opentelemetry-util-genai 1.x the old value ``true`` is not a mode and captures nothing.

Transports:

- ``direct``: ``Client(server)``, the in-process modern path. The server span is a child of
  the caller's current span; a call made outside any span has no parent at all.
- ``jsonrpc``: ``Client(server, mode="legacy")``, JSON-RPC over in-memory streams (the shape of
  every real transport, with both ends in this process): a CLIENT span
  ``MCP send tools/call <tool>`` (``mcp.method.name``, ``jsonrpc.request.id``, no gen_ai
  attributes) under the caller's span, and the server span under it (parent taken from the
  request's ``_meta`` traceparent, so ``is_remote`` is true though the span is live here).
- ``stdio``: the server in a subprocess. This process sees only the ``MCP send`` spans and the
  model calls: the calls are known only from the model's requests.

mcp 2.x creates its tracer from the global tracer provider, so the module sets that once,
behind a switchboard.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig

from .fake_openai import FakeOpenAI
from .mcp_cases import (
    AGENT_LOOP,
    check_a_second_prompt_gets_a_fresh_chain,
    check_a_second_prompt_under_the_same_outer_span_gets_a_fresh_chain,
    check_calls_outside_any_span_are_reported_as_without_agent,
    check_one_run_and_the_reminders_reach_the_model,
    check_the_calls_are_reported_as_without_arguments,
    check_the_whole_chain_agrees,
    check_two_concurrent_runs_have_separate_chains,
    check_two_concurrent_runs_under_one_outer_span_have_separate_chains,
    diagnosed,
    make_server,
    run_prompts,
    seen,
)
from .scenario import (
    EXPECTED_RUNS,
    LOOP,
    NO_PROGRESS_CONFIG,
    NO_PROGRESS_SCRIPT,
    SCRIPT,
    Guarded,
    Switchboard,
    assert_no_progress_from_the_model_requests,
    guard_events,
    make_guarded,
    require,
    tool_spans_by_trace,
    with_store,
)

os.environ.setdefault("OPENAI_API_KEY", "offline")
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
require("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MCP_SCOPE = "mcp-python-sdk"
TOOL_SPAN = "tools/call {}"  # the server's span of a call, by tool
ROOT = Path(__file__).resolve().parents[2]
BOARD = Switchboard()
TRANSPORTS = ["direct", "jsonrpc"]


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(BOARD)
    return provider


@pytest.fixture
def capture() -> str:
    """The content-capture mode of the openai-v2 instrumentation (tests override it by parametrizing)."""
    return "span_only"


@contextmanager
def instrumented(guarded: Guarded, provider: TracerProvider) -> Iterator[Guarded]:
    """``guarded`` behind the switchboard, with the model client instrumented, for the block's duration."""
    BOARD.targets = guarded.processors
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield guarded
    finally:
        instrumentor.uninstrument()
        BOARD.targets = []


@pytest.fixture
def g(provider: TracerProvider, capture: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    monkeypatch.setenv(CAPTURE, capture)  # read when instrumenting (its handler) and on every call
    with instrumented(make_guarded(), provider) as guarded:
        yield guarded


@pytest.fixture
def gs(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Guarded]:
    """As ``g`` (content captured on spans), with the store."""
    monkeypatch.setenv(CAPTURE, "span_only")
    with with_store(tmp_path) as stored, instrumented(stored, provider) as guarded:
        yield guarded


@asynccontextmanager
async def _connect(transport: str) -> AsyncIterator[Any]:
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tests.integrations.mcp_cases"],
            cwd=str(ROOT),
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        )
        client = Client(server)
    elif transport == "jsonrpc":
        client = Client(make_server(), mode="legacy")
    else:
        client = Client(make_server())
    async with client:
        yield client


def connect(transport: str) -> partial[AbstractAsyncContextManager[Any]]:
    return partial(_connect, transport)


def tool_span_names(g: Guarded) -> list[str]:
    return [s.name for spans in tool_spans_by_trace(g).values() for s in spans]


# -- the scenario, plain -------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_run_and_the_reminders_reach_the_model(g: Guarded, transport: str) -> None:
    spans = check_one_run_and_the_reminders_reach_the_model(connect(transport), g, tool_span=TOOL_SPAN, scope=MCP_SCOPE)
    assert not any("gen_ai.tool.call.arguments" in (s.attributes or {}) for s in spans)  # MCP records none


@pytest.mark.parametrize("transport", [*TRANSPORTS, "stdio"])
def test_the_whole_chain_agrees(gs: Guarded, transport: str) -> None:
    """Issue 21, item 5: an agent loop calling an MCP tool nine times with the same arguments. The MCP tool
    spans (or, over stdio, the calls counted from the model's requests) and the model calls are one run;
    each repeat wastes the usage of the model call that asked for it."""
    remote = transport == "stdio"  # no tool span here: the loop has the guard count the requests before each call
    check_the_whole_chain_agrees(connect(transport), gs, due=remote)
    assert tool_span_names(gs) == ([] if remote else ["tools/call lookup"] * len(LOOP))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_frameworks_tool_span_around_the_servers_counts_each_call_once(gs: Guarded, transport: str) -> None:
    """Issue 24, item 4: a framework's ``execute_tool`` span around each call, and the server's own inside it
    (directly, or under the ``MCP send`` span): two tool spans of one call, counted and stored once."""
    check_the_whole_chain_agrees(connect(transport), gs, tool_spans=True)
    spans = gs.exporter.get_finished_spans()
    assert sorted(tool_span_names(gs)) == ["execute_tool lookup"] * len(LOOP) + ["tools/call lookup"] * len(LOOP)
    nested = [s for s in spans if "repeat_tool_guard.nested_in" in (s.attributes or {})]
    assert [s.name for s in nested] == ["tools/call lookup"] * len(LOOP)  # the server's: the framework's count


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
    if transport == "direct":
        assert [s.parent for s in spans] == [None] * 3
    else:  # under a root CLIENT span "MCP send tools/call lookup" of its own
        by_id = {s.context.span_id: s for s in g.exporter.get_finished_spans()}  # type: ignore[union-attr]
        parents = [by_id[s.parent.span_id] for s in spans]  # type: ignore[union-attr]
        assert [(p.name, p.parent) for p in parents] == [("MCP send tools/call lookup", None)] * 3


@pytest.mark.parametrize("capture", ["", "true"], ids=["capture-unset", "capture-true-is-not-a-mode"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_without_content_capture_the_calls_are_reported_as_without_arguments(g: Guarded, transport: str) -> None:
    report = check_the_calls_are_reported_as_without_arguments(connect(transport), g, scope=MCP_SCOPE)
    chats = [s for s in g.exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == len(SCRIPT) + 1
    assert not any("gen_ai.output.messages" in (s.attributes or {}) for s in chats)
    # the fix must name a mode that records content on spans: with util-genai 1.x "true" records nothing
    assert all(f"{CAPTURE}=span_only" in b.fix for b in report.blind_spots), report.blind_spots[0].fix


# -- a server in a subprocess: the calls are known from the model's requests only ---------------------


def test_stdio_server_calls_are_counted_from_the_model_requests(g: Guarded) -> None:
    with FakeOpenAI() as fake:
        asyncio.run(run_prompts(connect("stdio"), fake, g))
    spans = g.exporter.get_finished_spans()
    assert tool_spans_by_trace(g) == {}  # the execute_tool spans are made in the server's process
    assert [s.name for s in spans if s.name.startswith("MCP send tools/call")] == [
        f"MCP send tools/call {tool}" for tool, _ in SCRIPT
    ]
    chats = [s for s in spans if s.name.startswith("chat ")]
    requested = [json.loads(str(c.attributes["gen_ai.output.messages"]))[0]["parts"][0] for c in chats[:-1]]  # type: ignore[index]
    assert [(p["name"], p["arguments"]) for p in requested] == [(tool, dict(args)) for tool, args in SCRIPT]
    # call k (1-based) is counted when the loop asks the model again: its events go on chat span k+1
    events = guard_events(g)
    assert [e["repeat_tool_guard.run_length"] for _, e in events] == [n for n in EXPECTED_RUNS if n > 1]
    placed = [(chats.index(span), e["gen_ai.tool.call.id"], e["gen_ai.tool.name"]) for span, e in events]  # type: ignore[arg-type]
    repeated = [k for k, n in enumerate(EXPECTED_RUNS) if n > 1]
    assert placed == [(k + 1, requested[k]["id"], SCRIPT[k][0]) for k in repeated]
    # the failure happened in the server's process: nothing in this one says so
    assert [e["repeat_tool_guard.error"] for _, e in events] == [False] * 6
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert {r.agent_name for r in g.reminders} == {AGENT_LOOP}
    assert g.unguarded() == {}
    report = diagnosed(g)
    assert (report.blind_spots, report.exit_code) == ([], 0)


def test_over_stdio_no_progress_takes_each_outcome_from_the_next_model_request(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 24, item 5: no span of this process records what the server answered, but the loop sends it
    back to the model as a ``tool`` message, which openai-v2 records as a ``tool_call_response`` part."""
    monkeypatch.setenv(CAPTURE, "span_only")
    with (
        with_store(tmp_path, config=NO_PROGRESS_CONFIG) as stored,
        instrumented(stored, provider) as g,
        FakeOpenAI(NO_PROGRESS_SCRIPT) as fake,
    ):
        asyncio.run(run_prompts(connect("stdio"), fake, g))
    chats = [s for s in g.exporter.get_finished_spans() if s.name.startswith("chat ")]
    responses = [
        part
        for message in json.loads(str(chats[-1].attributes["gen_ai.input.messages"]))  # type: ignore[index]
        for part in message["parts"]
        if part["type"] == "tool_call_response"
    ]
    assert len(responses) == len(NO_PROGRESS_SCRIPT) and "broken_lookup" in str(responses[0]["response"])
    assert_no_progress_from_the_model_requests(g, [[text for _, text in seen(body)] for body in fake.requests])


# -- progress: results from the next model request (issue 39, item 1) -----------------------------------------
# The server's span records no result, but the loop sends each result back as a ``tool`` message, which
# openai-v2 records on the next chat span (a ``tool_call_response`` part): the result the poll's calls compare.

POLL_REMINDERS = [("job_status", 3, "gentle"), ("job_status", 5, "detailed"), ("job_status", 8, "detailed")]
MOVING = "running, {}% done"


def job_server(states: Callable[[int], str]) -> Any:
    """A server whose one tool, ``job_status``, answers ``states(n)`` to its n-th call."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("jobs")
    calls = itertools.count()

    @server.tool()
    def job_status(job: str) -> str:
        """The state of a job."""
        return f"job {job}: {states(next(calls))}"

    return server


@asynccontextmanager
async def _jobs(states: Callable[[int], str]) -> AsyncIterator[Any]:
    async with Client(job_server(states)) as client:
        yield client


def poll_jobs(
    provider: TracerProvider, config: GuardConfig, states: Callable[[int], str], calls: int
) -> tuple[Guarded, list[dict[str, Any]]]:
    """``calls`` calls of ``job_status`` (the model asks for the same job each time), then the final answer."""
    script = (("job_status", {"job": "42"}),) * calls
    with instrumented(make_guarded(config=config), provider) as g, FakeOpenAI(script) as fake:
        asyncio.run(run_prompts(partial(_jobs, states), fake, g))
    assert len(fake.requests) == calls + 1
    return g, fake.requests


def reminded(g: Guarded) -> list[tuple[str, int, str]]:
    return [(r.tool_name, r.run_length, r.tier) for r in g.reminders]


@pytest.mark.parametrize(("progress", "expected"), [("results", []), ("none", POLL_REMINDERS)])
def test_a_poll_whose_result_moves_in_each_next_request_reminds_only_without_progress_results(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, progress: str, expected: list[Any]
) -> None:
    monkeypatch.setenv(CAPTURE, "span_only")
    g, _ = poll_jobs(provider, GuardConfig(progress=progress), lambda n: MOVING.format(n * 10), 10)
    assert tool_span_names(g) == ["tools/call job_status"] * 10
    assert all("gen_ai.tool.call.result" not in (s.attributes or {}) for s in g.exporter.get_finished_spans())
    assert reminded(g) == expected
    assert g.unguarded() == {}  # every call's result came with the next request: no no_result blind spot


def test_once_the_tool_message_stops_moving_the_poll_reminds_at_3_5_and_8(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "span_only")
    states = lambda n: MOVING.format(n * 30) if n < 3 else "done"  # noqa: E731
    g, requests = poll_jobs(provider, GuardConfig(progress="results"), states, 11)
    assert reminded(g) == POLL_REMINDERS
    assert g.unguarded() == {}
    texts = [" ".join(text for _, text in seen(body)) for body in requests]
    first = next(i for i, text in enumerate(texts) if "identical arguments 3 times" in text)
    assert first == 6  # the request after the third "done" (calls 4 to 6): the reminder reached the model
