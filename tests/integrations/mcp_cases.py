"""The MCP server and the agent loop that the MCP test modules share (mcp 2.x, and mcp 1.x under OpenLLMetry).

MCP has no agent of its own: the host application runs the loop. Here that loop is the
smallest real harness: the ``openai`` SDK (instrumented by the test module) asks FakeOpenAI
for the next step, each tool call it requests is executed through the MCP client session,
and the result goes back as a ``tool`` message. The loop runs in a plain span (no agent
marks), so the guard finds the run as the span that encloses the model calls. Before each
model call the loop adds the reminders due for its run, as one synthetic user message for
that request only (what the framework adapters do), through the public API:
``inbox.drain(guard.current_agent_id())``, or, with ``due=True``, ``inbox.drain(guard.model_call_due())``,
which first counts the calls the last model call asked for that no tool span of this process answered
(a server in a subprocess), so their reminders are due in this very request.

Run as a module (``python -m tests.integrations.mcp_cases``) it serves the same tools over stdio.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, MutableSequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor

from .fake_openai import MODEL, FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    LOOP,
    PARIS,
    SCRIPT,
    SHORT_SCRIPT,
    Guarded,
    assert_interleaved,
    assert_no_event_on_non_tool_spans,
    assert_reminders_reached_model,
    assert_scenario_run,
    assert_separate_runs,
    assert_whole_chain,
    expected_whole_chain,
    guard_events,
    lookup_result,
    run_lengths,
    tool_spans_by_run,
    tool_spans_by_trace,
)

Connect = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens an MCP client session (anything with ``list_tools`` and ``call_tool``) to a fresh :func:`make_server`."""

AGENT_LOOP = "agent loop"
OUTER = "outer request"


def make_server() -> Any:
    """The weather server: ``lookup`` answers, ``broken_lookup`` always fails (an MCP tool error)."""
    try:
        from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x

    server = Server("weather")

    @server.tool()
    def lookup(city: str, units: str) -> str:
        """Look up the weather."""
        return lookup_result(city, units)

    @server.tool()
    def broken_lookup(city: str, units: str) -> str:
        """Look up the weather, badly."""
        raise RuntimeError(f"the weather service for {city} is down")

    return server


async def openai_tools(session: Any) -> list[dict[str, Any]]:
    """The server's tools as chat-completions ``tools`` (what an MCP host hands its model)."""
    listed = (await session.list_tools()).tools
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": getattr(tool, "input_schema", None) or tool.inputSchema,
            },
        }
        for tool in listed
    ]


def result_text(result: Any) -> str:
    """A ``CallToolResult`` as the text of a tool message; a tool error says so (the model sees it, the loop goes on)."""
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    failed = getattr(result, "is_error", None)
    failed = getattr(result, "isError", False) if failed is None else failed
    return f"ERROR: {text}" if failed else text


async def agent_loop(
    session: Any,
    model: Any,
    tools: list[dict[str, Any]],
    messages: MutableSequence[dict[str, Any]],
    *,
    guard: RepeatGuardSpanProcessor,
    inbox: ReminderInbox,
    span_name: str = AGENT_LOOP,
    due: bool = False,
    tool_spans: bool = False,
) -> str:
    """Run one prompt (the last user message in ``messages``) to its final answer; ``messages`` grows. With
    ``tool_spans`` the loop makes a GenAI ``execute_tool`` span around each call, as a framework does."""
    with trace.get_tracer("mcp-agent-harness").start_as_current_span(span_name):
        while True:
            request = list(messages)
            agent_id = guard.model_call_due() if due else guard.current_agent_id()
            reminders = inbox.drain(agent_id) if agent_id else []
            if reminders:
                text = "\n".join(f"<system-reminder>\n{r.text}\n</system-reminder>" for r in reminders)
                request.append({"role": "user", "content": text})
            response = await model.chat.completions.create(model=MODEL, messages=request, tools=tools)
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return str(message.content)
            for call in message.tool_calls:
                name, arguments = call.function.name, call.function.arguments
                with framework_tool_span(name, call.id, arguments) if tool_spans else nullcontext():
                    result = await session.call_tool(name, json.loads(arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result_text(result)})


def framework_tool_span(name: str, call_id: str, arguments: str) -> AbstractContextManager[Any]:
    """The tool span a framework makes around the call it hands an MCP session (pydantic-ai's, the Agents SDK's)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": arguments,
    }
    return trace.get_tracer("mcp-agent-framework").start_as_current_span(f"execute_tool {name}", attributes=attributes)


async def run_prompts(
    connect: Connect,
    fake: FakeOpenAI,
    g: Guarded,
    *,
    runs: int = 1,
    prompts: int = 1,
    outer: bool = False,
    due: bool = False,
    tool_spans: bool = False,
) -> None:
    """``runs`` concurrent conversations over one MCP session, each answering ``prompts`` prompts in turn,
    each prompt in an agent loop of its own; with ``outer``, all of them under one span named OUTER.
    ``due`` and ``tool_spans`` go to :func:`agent_loop`."""
    import openai

    model = openai.AsyncOpenAI(base_url=fake.base_url, api_key="offline")
    async with connect() as session:
        tools = await openai_tools(session)

        async def conversation() -> None:
            messages: list[dict[str, Any]] = []
            for i in range(prompts):
                messages.append({"role": "user", "content": "Weather in Paris?" if i == 0 else "And again?"})
                answer = await agent_loop(
                    session, model, tools, messages, guard=g.guard, inbox=g.inbox, due=due, tool_spans=tool_spans
                )
                assert answer == FINAL_ANSWER

        async def conversations() -> None:
            await asyncio.gather(*(conversation() for _ in range(runs)))

        if not outer:
            await conversations()
            return
        with trace.get_tracer("mcp-agent-harness").start_as_current_span(OUTER):
            await conversations()


async def calls_outside_any_span(connect: Connect, calls: int) -> None:
    """``calls`` identical ``lookup`` calls straight through the session, with no span around them."""
    async with connect() as session:
        for _ in range(calls):
            await session.call_tool("lookup", dict(PARIS))


def assert_interleaved_under_outer(g: Guarded) -> None:
    """The tool spans of the runs under OUTER (its children) ended in a mixed order."""
    by_run = tool_spans_by_run(g, outer=OUTER)
    run_of = {s.context.span_id: run for run, spans in by_run.items() for s in spans}  # type: ignore[union-attr]
    order = [run_of[s.context.span_id] for s in g.exporter.get_finished_spans() if s.context.span_id in run_of]  # type: ignore[union-attr]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


def diagnosed(g: Guarded) -> Any:
    """The doctor's report on everything exported."""
    from otel_repeat_guard.cli.doctor import diagnose

    return diagnose(list(g.exporter.get_finished_spans()))


def blind_spots(report: Any) -> list[tuple[str, str, str, int]]:
    return sorted((b.scope, b.tool, b.reason, b.calls) for b in report.blind_spots)


def seen(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A chat-completions request body as (role, text) pairs, for ``assert_reminders_reached_model``."""
    out = []
    for message in body.get("messages") or []:
        role = message.get("role")
        content = message.get("content")
        out.append((role, content if isinstance(content, str) else json.dumps(message)))
    return out


# -- the test bodies both MCP modules share -------------------------------------------------------
# ``tool_span`` is the name of a tool's span as a format string (``"tools/call {}"``), ``scope`` the
# instrumentation scope of the tool spans; a body returns what the module goes on to check.


def check_one_run_and_the_reminders_reach_the_model(
    connect: Connect, g: Guarded, *, tool_span: str, scope: str
) -> list[ReadableSpan]:
    """One prompt's tool spans are one run, its reminders reach the model, nothing is unguarded; returns the spans."""
    with FakeOpenAI() as fake:
        asyncio.run(run_prompts(connect, fake, g))
    (spans,) = tool_spans_by_trace(g).values()
    assert [s.name for s in spans] == [tool_span.format(tool) for tool, _ in SCRIPT]
    assert {s.instrumentation_scope.name for s in spans} == {scope}  # type: ignore[union-attr]
    assert_separate_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {AGENT_LOOP}
    assert_reminders_reached_model([seen(body) for body in fake.requests])
    assert g.unguarded() == {}
    report = diagnosed(g)
    assert (report.blind_spots, report.exit_code) == ([], 0)
    return spans


def check_the_whole_chain_agrees(connect: Connect, gs: Guarded, *, due: bool = False, tool_spans: bool = False) -> None:
    """Nine identical ``lookup`` calls: the reminders reach the model, and the whole chain (store, metrics) agrees."""
    with FakeOpenAI(LOOP) as fake:
        asyncio.run(run_prompts(connect, fake, gs, due=due, tool_spans=tool_spans))
    assert_reminders_reached_model([seen(body) for body in fake.requests], loop=True)
    assert [(r.tool_name, r.run_length, r.tier) for r in gs.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
        ("lookup", 8, "detailed"),
    ]
    assert_whole_chain(gs, expected_whole_chain())


def check_a_second_prompt_gets_a_fresh_chain(connect: Connect, g: Guarded) -> None:
    """Two prompts in one conversation, each in an agent loop (a trace) of its own: each starts its chain afresh."""
    with FakeOpenAI(SHORT_SCRIPT) as fake:
        asyncio.run(run_prompts(connect, fake, g, prompts=2))
    assert [run_lengths(spans) for spans in tool_spans_by_trace(g).values()] == [[1, 2], [1, 2]]


def check_two_concurrent_runs_have_separate_chains(connect: Connect, g: Guarded) -> None:
    """Two agent loops at once over one MCP session are two separate runs, their calls interleaved."""
    with FakeOpenAI() as fake:
        asyncio.run(run_prompts(connect, fake, g, runs=2))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


def check_two_concurrent_runs_under_one_outer_span_have_separate_chains(connect: Connect, g: Guarded) -> None:
    """Two agent loops at once in one trace, under OUTER: two separate runs, their calls interleaved."""
    with FakeOpenAI() as fake:
        asyncio.run(run_prompts(connect, fake, g, runs=2, outer=True))
    assert len(tool_spans_by_trace(g)) == 1  # one trace: the local root would merge the runs
    by_run = tool_spans_by_run(g, outer=OUTER)
    assert len(by_run) == 2
    ids = [assert_scenario_run(g, spans) for spans in by_run.values()]
    assert len(set(ids)) == 2
    assert_no_event_on_non_tool_spans(g)
    assert_interleaved_under_outer(g)
    assert g.unguarded() == {}


def check_a_second_prompt_under_the_same_outer_span_gets_a_fresh_chain(connect: Connect, g: Guarded) -> None:
    """Two prompts in one conversation under OUTER, each in an agent loop of its own: each starts its chain afresh."""
    with FakeOpenAI(SHORT_SCRIPT) as fake:
        asyncio.run(run_prompts(connect, fake, g, prompts=2, outer=True))
    assert [run_lengths(spans) for spans in tool_spans_by_run(g, outer=OUTER).values()] == [[1, 2], [1, 2]]


def check_calls_outside_any_span_are_reported_as_without_agent(
    connect: Connect, g: Guarded, *, tool_span: str, scope: str
) -> list[ReadableSpan]:
    """Three ``lookup`` calls outside any span: no event, no reminder, reported as without agent; returns their spans."""
    asyncio.run(calls_outside_any_span(connect, 3))
    spans = [s for s in g.exporter.get_finished_spans() if s.name == tool_span.format("lookup")]
    assert len(spans) == 3
    assert guard_events(g) == [] and g.reminders == []
    assert g.unguarded() == {("no_agent", "lookup"): 3}
    report = diagnosed(g)
    assert blind_spots(report) == [(scope, "lookup", "no_agent", 3)]
    assert "gen_ai.agent.id" in report.blind_spots[0].fix  # "wrap your agent loop in a span or set gen_ai.agent.id"
    assert report.exit_code == 1
    return spans


def check_the_calls_are_reported_as_without_arguments(connect: Connect, g: Guarded, *, scope: str) -> Any:
    """One prompt with no arguments recorded: no event, no reminder, each tool reported; returns the doctor's report."""
    with FakeOpenAI() as fake:
        asyncio.run(run_prompts(connect, fake, g))
    assert guard_events(g) == [] and g.reminders == []
    assert g.unguarded() == {("no_arguments", "lookup"): 6, ("no_arguments", "broken_lookup"): 2}
    report = diagnosed(g)
    assert blind_spots(report) == [
        (scope, "broken_lookup", "no_arguments", 2),
        (scope, "lookup", "no_arguments", 6),
    ]
    assert report.exit_code == 1
    return report


if __name__ == "__main__":
    make_server().run("stdio")
