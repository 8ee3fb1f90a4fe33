"""The run resolver on its own: which span stands for a span's run, with real SDK spans."""

from __future__ import annotations

import gc
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, set_span_in_context, use_span

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS
from otel_repeat_guard.spans.run import Run
from otel_repeat_guard.spans.runs import RunResolver
from otel_repeat_guard.spans.span_events import start_of


class Feed(SpanProcessor):
    """Hands every span to the resolver as the guard does; model calls are spans named ``chat``."""

    def __init__(self) -> None:
        self.ended: list[Run] = []
        self.resolver = RunResolver(
            DEFAULT_CONVENTIONS, 1_000, self.ended.append, is_model_call=lambda name, _: name == "chat"
        )

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        span_id, _, _, kept = start_of(span)
        self.resolver.live[span_id] = kept  # as the processor's on_start
        if span.name == "chat":
            self.resolver.mark_model_call(span.parent)

    def on_end(self, span: ReadableSpan) -> None:
        self.resolver.ended(span.context.span_id)  # type: ignore[union-attr]


def _setup() -> tuple[Feed, Any]:
    feed = Feed()
    provider = TracerProvider()
    provider.add_span_processor(feed)
    return feed, provider.get_tracer("runs")


def _resolve_here(feed: Feed, tracer: Any) -> Run | None:
    with tracer.start_as_current_span("probe") as probe:
        return feed.resolver.resolve(probe.parent)


def test_an_agent_run_ancestor_wins_and_is_keyed_with_its_span() -> None:
    feed, tracer = _setup()
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "obj-1", "gen_ai.agent.name": "helper"}
    with tracer.start_as_current_span("invoke_agent helper", attributes=attributes) as agent:
        with tracer.start_as_current_span("chat"):
            pass
        with tracer.start_as_current_span("step"):
            run = _resolve_here(feed, tracer)
        assert run == Run(f"obj-1#{agent.get_span_context().span_id:016x}", "helper", run.span_id, "obj-1")  # type: ignore[union-attr]
        assert feed.resolver.runs_of_agent("obj-1") == [run.key]  # type: ignore[union-attr]
    assert feed.ended == [run] and feed.resolver.runs_of_agent("obj-1") == []


def test_the_nearest_span_enclosing_a_model_call_stands_for_the_run() -> None:
    feed, tracer = _setup()
    with tracer.start_as_current_span("outer"), tracer.start_as_current_span("run a") as a:
        with tracer.start_as_current_span("step"), tracer.start_as_current_span("chat"):
            pass
        with tracer.start_as_current_span("call_tool"):
            run = _resolve_here(feed, tracer)
    assert run is not None and (run.name, run.how, run.span_id) == (
        "run a",
        "enclosing_span",
        a.get_span_context().span_id,
    )


def test_a_model_call_nested_in_a_model_call_marks_around_both() -> None:
    feed, tracer = _setup()
    with tracer.start_as_current_span("agent loop"):
        with tracer.start_as_current_span("chat"), tracer.start_as_current_span("chat"):
            pass
        run = _resolve_here(feed, tracer)
    assert run is not None and run.name == "agent loop"


def test_without_marks_the_local_root_but_never_an_rpc_client_span() -> None:
    feed, tracer = _setup()
    with tracer.start_as_current_span("root"), tracer.start_as_current_span("child"):
        run = _resolve_here(feed, tracer)
    assert run is not None and (run.name, run.how) == ("root", "local_root")
    with tracer.start_as_current_span("MCP send tools/call lookup", kind=SpanKind.CLIENT):
        assert _resolve_here(feed, tracer) is None


def test_no_live_parent_means_no_run() -> None:
    feed, tracer = _setup()
    orphan = tracer.start_span("gone")
    orphan.end()
    with use_span(orphan):
        assert _resolve_here(feed, tracer) is None
    assert feed.resolver.resolve(None) is None


def test_a_langgraph_node_is_a_step_of_the_graphs_run_not_a_run() -> None:
    """OpenInference sets a LangGraph node's attributes only at its end; its model call names the node."""
    feed, tracer = _setup()
    with (
        tracer.start_as_current_span("LangGraph") as graph,
        tracer.start_as_current_span("agent"),
        tracer.start_as_current_span("RunnableSequence"),
        tracer.start_as_current_span("chat") as chat,
    ):
        nearest = feed.resolver.resolve(chat.parent)
        run = feed.resolver.resolve(chat.parent, step="agent")
    assert run is not None and (run.name, run.span_id) == ("LangGraph", graph.get_span_context().span_id)
    assert nearest is not None and nearest.name == "RunnableSequence"  # without the node's name


def test_the_node_a_model_call_ran_in_is_read_from_openinference_metadata() -> None:
    from otel_repeat_guard.conventions.openinference import langgraph_node

    assert langgraph_node({"metadata": '{"langgraph_step": 3, "langgraph_node": "model"}'}) == "model"
    for attributes in ({}, {"metadata": "{}"}, {"metadata": '"langgraph_node"'}, {"metadata": 5}):
        assert langgraph_node(attributes) is None


def test_a_span_named_as_a_conventions_step_is_a_step_of_the_run_above_it() -> None:
    """LlamaIndex's workflow agents: ``run_agent_step`` holds the model calls and ends before the tools it asked
    for run in a ``call_tool`` step beside it; the step's name is all that says so while it is open."""
    feed, tracer = _setup()
    with tracer.start_as_current_span("FunctionAgent.run") as workflow:
        with tracer.start_as_current_span("MyAgent.run_agent_step"), tracer.start_as_current_span("chat") as chat:
            model = feed.resolver.resolve(chat.parent)
        with tracer.start_as_current_span("BaseWorkflowAgent.call_tool"):
            tool = _resolve_here(feed, tracer)
    assert model is not None and (model.name, model.how, model.span_id) == (
        "FunctionAgent.run",
        "enclosing_span",
        workflow.get_span_context().span_id,
    )
    assert tool == model
    assert feed.ended == [model]  # the step's end ends no run


def test_what_a_step_span_encloses_is_never_the_run() -> None:
    feed, tracer = _setup()
    with (
        tracer.start_as_current_span("FunctionAgent.run"),
        tracer.start_as_current_span("BaseWorkflowAgent.run_agent_step"),
        tracer.start_as_current_span("inside the step"),
        tracer.start_as_current_span("chat") as chat,
    ):
        run = feed.resolver.resolve(chat.parent)
    assert run is not None and run.name == "FunctionAgent.run"


def test_a_span_renamed_while_open_is_read_by_its_new_name() -> None:
    feed, tracer = _setup()
    with tracer.start_as_current_span("task") as outer:
        outer.update_name("invoke_agent helper")  # as pydantic-ai and OpenInference's Agents SDK tracer do
        outer.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})
        run = _resolve_here(feed, tracer)
    assert run is not None and (run.name, run.how) == ("helper", "agent_span")


def test_an_agent_span_the_application_dropped_unended_still_holds_its_run() -> None:
    feed, tracer = _setup()
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}
    agent = tracer.start_span("invoke_agent helper", attributes=attributes)
    agent_id = agent.get_span_context().span_id
    tool = tracer.start_span("execute_tool grep", context=set_span_in_context(agent))
    del agent  # never ended, no longer referenced by anybody: the resolver keeps only what it needs
    gc.collect()
    run = feed.resolver.resolve(tool.get_span_context())
    assert run is not None and (run.name, run.span_id) == ("helper", agent_id)
