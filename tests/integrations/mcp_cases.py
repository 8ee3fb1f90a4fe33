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

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor

from .fake_openai import MODEL, FakeOpenAI
from .scenario import FINAL_ANSWER, PARIS, Guarded, lookup_result, tool_spans_by_run

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
    from otel_repeat_guard.doctor import diagnose

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


if __name__ == "__main__":
    make_server().run("stdio")
