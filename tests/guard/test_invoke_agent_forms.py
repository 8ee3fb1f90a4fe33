"""The GenAI conventions' two forms of the ``invoke_agent`` span (``gen_ai.invoke_agent.client``: span kind CLIENT,
a remote agent, with ``gen_ai.provider.name``; ``gen_ai.invoke_agent.internal``: span kind INTERNAL, an in-process
agent, without it) are each read as a run: the tool calls under it are counted in that run, under one key."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.core.facts import RUN, RUN_NAME
from otel_repeat_guard.decide.recorder import REPEAT_EVENT

CLIENT_FORM = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.provider.name": "aws.bedrock",
    "gen_ai.agent.id": "agent-remote-7",
    "gen_ai.agent.name": "booking",
    "server.address": "bedrock-agent-runtime.us-east-1.amazonaws.com",
}
INTERNAL_FORM = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booking"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "find_flight", "gen_ai.tool.call.arguments": "{}"}


def _run(kind: SpanKind, attributes: dict[str, Any], outer: dict[str, Any] | None = None) -> list[ReadableSpan]:
    """An ``invoke_agent`` span of ``kind`` (inside an internal run carrying ``outer`` when given) holding a model
    call and two identical tool calls; the spans as exported."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.guard.invoke_agent_forms")

    def agent() -> None:
        with tracer.start_as_current_span("invoke_agent booking", kind=kind, attributes=attributes):
            with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
                pass
            for _ in range(2):
                with tracer.start_as_current_span("execute_tool find_flight", attributes=TOOL):
                    pass

    if outer is None:
        agent()
    else:
        with tracer.start_as_current_span("invoke_agent planner", attributes=outer):
            agent()
    provider.shutdown()
    return list(memory.get_finished_spans())


def _counted(spans: list[ReadableSpan]) -> tuple[set[str], list[str], str]:
    """The tool spans' run keys, their run lengths, and the key the ``invoke_agent booking`` span stands for."""
    tools = [span for span in spans if span.name.startswith("execute_tool")]
    keys = {str((span.attributes or {})[RUN]) for span in tools}
    lengths = [
        str((event.attributes or {})["repeat_tool_guard.run_length"])
        for span in tools
        for event in span.events
        if event.name == REPEAT_EVENT
    ]
    agent = next(span for span in spans if span.name == "invoke_agent booking")
    return keys, lengths, f"#{agent.context.span_id:016x}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kind", "attributes", "key_name"),
    [(SpanKind.CLIENT, CLIENT_FORM, "agent-remote-7"), (SpanKind.INTERNAL, INTERNAL_FORM, "booking")],
    ids=["client_form", "internal_form"],
)
def test_each_form_of_the_invoke_agent_span_is_a_run_holding_its_tool_calls(
    kind: SpanKind, attributes: dict[str, Any], key_name: str
) -> None:
    spans = _run(kind, attributes)
    keys, lengths, suffix = _counted(spans)
    assert keys == {key_name + suffix}  # one run key: the invoke_agent span's
    assert lengths == ["2"]  # the second call repeats the first in that run
    names = {str((span.attributes or {})[RUN_NAME]) for span in spans if span.name.startswith("execute_tool")}
    assert names == {"booking"}


def test_a_remote_agents_client_span_inside_a_local_run_is_its_own_run() -> None:
    """The calls under a client-form ``invoke_agent`` inside an internal-form one belong to the inner run."""
    spans = _run(
        SpanKind.CLIENT, CLIENT_FORM, outer={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    )
    keys, lengths, suffix = _counted(spans)
    assert keys == {"agent-remote-7" + suffix} and lengths == ["2"]
