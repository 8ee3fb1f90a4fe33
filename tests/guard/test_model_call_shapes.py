"""Model-call spans in the shapes that hide what they are: a framework's span around its client's, marked a
model call only at its end (Haystack), and a model span that records how it finished but not what it said
(google-adk's legacy schema). The facts the guard writes say one run, one issuer, one stored model call."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id

from otel_repeat_guard.core.facts import ISSUER, RUN, WASTED, WRAPPER

from .conftest import Harness, make_harness

PARIS = json.dumps({"city": "Paris", "units": "metric"})


def _harness() -> tuple[Harness, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return make_harness(record_facts=True, meter_provider=MeterProvider(metric_readers=[reader])), reader


def _spans(h: Harness, name: str) -> list[ReadableSpan]:
    return [s for s in h.exporter.get_finished_spans() if s.name == name]


def _wasted_tokens(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    return {
        str(p.attributes["gen_ai.token.type"]): int(p.value)
        for r in (data.resource_metrics if data else ())
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.wasted_tokens"
        for p in m.data.data_points
    }


def _generator_request(h: Harness, i: int, *, client_content: bool = True, own_content: bool = False) -> None:
    """One Haystack request: ``OpenAIChatGenerator.run`` with the request's messages from its start and its kind
    only at its end, the OpenAI client's ``ChatCompletion`` inside it; the model asks for ``lookup``."""
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    request = {prefix + "id": f"call_{i}", prefix + "function.name": "lookup", prefix + "function.arguments": PARIS}
    with h.tracer.start_as_current_span("OpenAIChatGenerator.run") as generator:
        generator.set_attribute("llm.input_messages.0.message.role", "user")
        with h.tracer.start_as_current_span("ChatCompletion", attributes={"openinference.span.kind": "LLM"}) as client:
            client.set_attribute("llm.token_count.prompt", 1000 * (i + 1))
            if client_content:
                client.set_attributes(request)
        generator.set_attribute("openinference.span.kind", "LLM")
        generator.set_attribute("llm.token_count.prompt", 1000 * (i + 1))
        if own_content:
            generator.set_attributes(request)


def _tool(h: Harness, i: int) -> None:
    with h.tracer.start_as_current_span("execute_tool lookup") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.call.arguments": PARIS,
            }
        )


def test_a_client_model_call_inside_a_generator_span_not_yet_marked_belongs_to_the_agents_run() -> None:
    h, reader = _harness()
    with h.tracer.start_as_current_span("Agent.run"):  # a CHAIN span: no agent-run mark
        for i in range(3):
            _generator_request(h, i)
            _tool(h, i)
    generators, clients = _spans(h, "OpenAIChatGenerator.run"), _spans(h, "ChatCompletion")
    (run,) = {(s.attributes or {})[RUN] for s in generators + clients}
    assert str(run).startswith("Agent.run#")
    assert [(s.attributes or {}).get(WRAPPER) for s in generators + clients] == [True] * 3 + [None] * 3
    issuers = [(s.attributes or {}).get(ISSUER) for s in _spans(h, "execute_tool lookup")]
    assert issuers == [format_span_id(s.context.span_id) for s in clients]  # type: ignore[union-attr]
    assert h.run_lengths() == [1, 2, 3]
    assert _wasted_tokens(reader) == {"input": 2000 + 3000}


def test_a_generator_span_whose_own_request_is_the_step_is_not_marked_as_wrapping() -> None:
    """The client's span recorded no request (its content hidden): the generator's is the issuer, and stays stored."""
    h, _ = _harness()
    with h.tracer.start_as_current_span("Agent.run"):
        for i in range(2):
            _generator_request(h, i, client_content=False, own_content=True)
            _tool(h, i)
    generators = _spans(h, "OpenAIChatGenerator.run")
    assert [(s.attributes or {}).get(WRAPPER) for s in generators] == [None, None]
    issuers = [(s.attributes or {}).get(ISSUER) for s in _spans(h, "execute_tool lookup")]
    assert issuers == [format_span_id(s.context.span_id) for s in generators]  # type: ignore[union-attr]


def test_a_model_span_that_says_how_it_finished_but_not_what_it_said_issues_the_tool_calls_after_it() -> None:
    """google-adk's legacy schema: ``generate_content`` with usage and Gemini's ``STOP``, the request recorded
    only on ADK's own ``call_llm`` span around it (no model mark), the tool span a sibling of ``call_llm``."""
    h, reader = _harness()
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
    with h.tracer.start_as_current_span("invoke_agent weather", attributes=attributes):
        for i in range(3):
            with h.tracer.start_as_current_span("call_llm"):
                start = {"gen_ai.operation.name": "generate_content"}
                with h.tracer.start_as_current_span("generate_content scripted", attributes=start) as model:
                    model.set_attribute("gen_ai.response.finish_reasons", ("stop",))
                    model.set_attribute("gen_ai.usage.input_tokens", 1000 * (i + 1))
                    model.set_attribute("gen_ai.usage.output_tokens", 11 + i)
            _tool(h, i)
    models = _spans(h, "generate_content scripted")
    tools = _spans(h, "execute_tool lookup")
    assert [(s.attributes or {}).get(ISSUER) for s in tools] == [format_span_id(s.context.span_id) for s in models]  # type: ignore[union-attr]
    assert [(s.attributes or {}).get(WASTED) for s in tools] == [None, True, True]
    assert _wasted_tokens(reader) == {"input": 2000 + 3000, "output": 12 + 13}


def test_a_model_span_with_no_word_of_its_answer_is_still_never_kept() -> None:
    """No output, no finish reason, no events: nothing says it could have asked for tools (the hot path's chat span)."""
    h, _ = _harness()
    with h.agent_run("a"):
        with h.tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass
        _tool(h, 0)
    (tool,) = _spans(h, "execute_tool lookup")
    assert ISSUER not in (tool.attributes or {})
    assert not h.guard._guard.steps.steps  # nothing was kept
