"""Every vocabulary the default conventions read, as the real instrumentations emit it
(attribute sets copied from recorded framework output), through a real TracerProvider."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.trace import Span, Status, StatusCode

from otel_repeat_guard import AgentRun, AttributeConvention, GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, MISSING, ToolCall, find_agent_run, find_tool_call
from otel_repeat_guard.conventions.genai import GenAIConvention

from .conftest import Harness, make_harness

PARIS = {"city": "Paris", "units": "metric"}


def tool(
    h: Harness, name: str, attributes: Mapping[str, Any], events: tuple[tuple[str, dict[str, Any]], ...] = ()
) -> None:
    """A tool span with nothing at start and everything set before it ends, as most instrumentors do."""
    with h.tracer.start_as_current_span(name) as span:
        for event_name, event_attributes in events:
            span.add_event(event_name, event_attributes)
        span.set_attributes(dict(attributes))


@contextmanager
def span(h: Harness, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    with h.tracer.start_as_current_span(name, attributes=attributes) as s:
        yield s


def lengths(h: Harness) -> list[int]:
    out = []
    for s in h.exporter.get_finished_spans():
        if find_tool_call(DEFAULT_CONVENTIONS, s.name, s.attributes or {}, s.events) is None:
            assert not s.events or all(not e.name.startswith("repeat_tool_guard") for e in s.events)
            continue
        repeat = [e for e in s.events if e.name == "repeat_tool_guard.repeat"]
        out.append(int(repeat[0].attributes["repeat_tool_guard.run_length"]) if repeat else 1)  # type: ignore[index]
    return out


def errors(h: Harness) -> list[bool]:
    return [
        bool(e.attributes["repeat_tool_guard.error"])  # type: ignore[index]
        for s in h.exporter.get_finished_spans()
        for e in s.events
        if e.name == "repeat_tool_guard.repeat"
    ]


# -- tool spans, names and arguments ---------------------------------------------------------


def test_openinference_tool_spans_read_tool_name_and_raw_input_value(harness: Harness) -> None:
    """openai-agents records the model's argument string verbatim; tool.parameters is the schema."""
    schema = json.dumps({"properties": {"city": {"type": "string"}}, "type": "object"})
    with span(harness, "weather_agent") as agent:
        for raw in ('{"city": "Paris", "units": "metric"}', '{ "units":"metric",\n "city":"Paris" }'):
            tool(
                harness,
                "lookup",
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": "lookup",
                    "input.value": raw,
                    "input.mime_type": "application/json",
                    "tool.parameters": schema,
                },
            )
        agent.set_attribute("openinference.span.kind", "AGENT")  # openai-agents: only at the agent span's end
        tool(harness, "lookup", {"openinference.span.kind": "TOOL", "input.value": json.dumps(PARIS)})  # name from span
    assert lengths(harness) == [1, 2, 3]


def test_openinference_redacted_inputs_are_unknown(harness: Harness) -> None:
    with span(harness, "LangGraph"):
        for _ in range(4):
            tool(
                harness,
                "lookup",
                {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": "__REDACTED__"},
            )
    assert lengths(harness) == [1, 1, 1, 1]
    assert harness.reminders == []


def test_openllmetry_wrapper_is_unwrapped(harness: Harness) -> None:
    def wrapper(step: int, inputs: Any) -> str:
        return json.dumps(
            {
                "input_str": repr(inputs),
                "tags": ["seq:step:1"],
                "metadata": {"langgraph_step": step, "langgraph_node": "tools"},
                "inputs": inputs,
                "kwargs": {},
            }
        )

    with span(harness, "invoke_agent weather_agent"), span(harness, "weather_agent.workflow"):
        for step, inputs in ((5, PARIS), (9, {"units": "metric", "city": "Paris"}), (13, PARIS)):
            w = wrapper(step, inputs)
            tool(
                harness,
                "execute_tool lookup",
                {
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": "lookup",
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": w,
                    "traceloop.entity.input": w,
                },
            )
        tool(
            harness,
            "execute_tool lookup",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "lookup",
                "traceloop.entity.input": wrapper(17, PARIS),
            },
        )  # only the entity input
    assert lengths(harness) == [1, 2, 3, 4]
    assert harness.reminders[0].agent_name == "weather_agent"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"input_str": "{}", "metadata": {}, "inputs": {"a": 1}}', {"a": 1}),
        ('{"input_str": "{\'a\': 1}", "metadata": {}, "inputs": null}', "{'a': 1}"),
        ('{"input_str": 7, "metadata": {}}', MISSING),
        ('{"tags": ["x"], "inputs": {"a": 1}}', '{"tags": ["x"], "inputs": {"a": 1}}'),  # real arguments, not a wrapper
        ("not json", "not json"),
        ({"input_str": "x", "inputs": [1]}, [1]),
        ('{"\\u0069nput_str": "{}", "metadata": {}, "inputs": {"a": 1}}', {"a": 1}),  # the key with a letter escaped
        ('{"path": "a\\nb", "inputs": {"a": 1}}', '{"path": "a\\nb", "inputs": {"a": 1}}'),  # a backslash, no wrapper
    ],
)
def test_unwrap_langchain_inputs(value: Any, expected: Any) -> None:
    from otel_repeat_guard.conventions import unwrap_langchain_inputs

    assert unwrap_langchain_inputs(value) == expected


def test_openllmetry_content_off_means_unknown_arguments(harness: Harness) -> None:
    with span(harness, "invoke_agent a"):
        for _ in range(3):
            tool(
                harness,
                "execute_tool lookup",
                {
                    "traceloop.span.kind": "tool",
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.task.status": "success",
                },
            )
    assert lengths(harness) == [1, 1, 1]


def test_pydantic_ai_format_2_running_tool(harness: Harness) -> None:
    with span(harness, "agent run", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"}):
        for _ in range(3):
            tool(
                harness,
                "running tool",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "tool_arguments": json.dumps(PARIS),
                    "gen_ai.agent.name": "weather_agent",
                },
            )
    assert lengths(harness) == [1, 2, 3]
    assert harness.reminders[0].agent_name == "weather_agent"


def test_strands_default_schema_reads_the_tool_message_event(harness: Harness) -> None:
    event = ("gen_ai.tool.message", {"role": "tool", "content": json.dumps(PARIS), "id": "tooluse_1"})
    with span(harness, "invoke_agent weather_agent"), span(harness, "execute_event_loop_cycle"):
        for _ in range(3):
            tool(
                harness,
                "execute_tool lookup",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.status": "success",
                },
                events=(("gen_ai.choice", {"message": "x"}), event),
            )
        tool(
            harness,
            "execute_tool lookup",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
            events=(("gen_ai.tool.message", {"role": "tool"}),),
        )  # no content: unknown
    assert lengths(harness) == [1, 2, 3, 1]


def test_adk_legacy_schema_arguments(harness: Harness) -> None:
    with span(harness, "invocation"), span(harness, "invoke_agent weather_agent"):
        for _ in range(3):
            tool(
                harness,
                "execute_tool lookup",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.agent.name": "weather_agent",
                    "gcp.vertex.agent.tool_call_args": json.dumps(PARIS),
                },
            )
    assert lengths(harness) == [1, 2, 3]
    assert harness.reminders[0].agent_name == "weather_agent"


@pytest.mark.parametrize(
    ("attributes", "events", "status"),
    [
        ({"error.type": "ValueError"}, (), None),
        ({"gen_ai.tool.status": "error"}, (), None),
        ({"gen_ai.task.status": "failure"}, (), None),
        ({}, (("exception", {"exception.type": "ValueError"}),), None),
        ({}, (), StatusCode.ERROR),
    ],
)
def test_failure_signals_flag_the_repeat(
    attributes: dict[str, Any], events: tuple[Any, ...], status: StatusCode | None
) -> None:
    h = make_harness()
    with span(h, "invoke_agent a"):
        for failing in (False, True):
            with h.tracer.start_as_current_span("execute_tool rm") as s:
                for name, attrs in events if failing else ():
                    s.add_event(name, attrs)
                s.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "rm",
                        "gen_ai.tool.call.arguments": "{}",
                        **(attributes if failing else {}),
                    }
                )
                if failing and status is not None:
                    s.set_status(Status(status))
    assert errors(h) == [True]


# -- agent resolution --------------------------------------------------------------------------


def test_openinference_agent_named_by_span_until_its_end(harness: Harness) -> None:
    """openai-agents: Agent workflow (AGENT) > Agent workflow > weather_agent (AGENT) > turn > tool."""
    kind = "openinference.span.kind"
    with (
        span(harness, "Agent workflow", {kind: "AGENT"}),
        span(harness, "Agent workflow", {kind: "CHAIN"}),
        span(harness, "weather_agent", {kind: "AGENT"}) as agent,
    ):
        for _ in range(3):
            with span(harness, "turn", {kind: "CHAIN"}):
                tool(harness, "lookup", {kind: "TOOL", "tool.name": "lookup", "input.value": json.dumps(PARIS)})
        agent.set_attributes({"agent.name": "weather_agent", "graph.node.id": "weather_agent"})
        agent_id = harness.reminders[0].agent_id
    assert harness.reminders[0].agent_name == "weather_agent"
    assert agent_id == f"weather_agent#{agent.get_span_context().span_id:016x}"


def test_traceloop_agent_and_workflow_spans_are_agent_runs() -> None:
    assert (
        find_agent_run(
            DEFAULT_CONVENTIONS, "x.workflow", {"traceloop.span.kind": "workflow", "traceloop.entity.name": "x"}
        ).agent_name
        == "x"
    )  # type: ignore[union-attr]
    run = find_agent_run(DEFAULT_CONVENTIONS, "a", {"traceloop.span.kind": "agent", "gen_ai.agent.id": "id-1"})
    assert run is not None and run.agent_id == "id-1" and run.agent_name == "a"
    assert find_agent_run(DEFAULT_CONVENTIONS, "t", {"traceloop.span.kind": "task"}) is None


def test_a_key_once_resolved_does_not_change_when_attributes_arrive_late(harness: Harness) -> None:
    with span(harness, "X.workflow") as workflow:
        harness.call("grep", {"q": "X"})  # X.workflow is the local root here
        workflow.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "late-id"})
        harness.call("grep", {"q": "X"})
        harness.call("grep", {"q": "X"})
    assert harness.run_lengths() == [1, 2, 3]
    assert harness.reminders[0].agent_id.startswith("X.workflow#")


def test_a_subagent_gets_its_own_chain(harness: Harness) -> None:
    with harness.agent_run("parent"):
        harness.call("grep", {"q": "X"})
        with span(harness, "execute_tool delegate"), harness.agent_run("child"):
            for _ in range(3):
                harness.call("grep", {"q": "X"})
        harness.call("grep", {"q": "X"})
    assert harness.run_lengths() == [1, 1, 2, 3, 1, 2]  # the delegate span carries no tool attributes
    assert [r.agent_name for r in harness.reminders] == ["child"]


def test_current_agent_id_matches_the_key_tool_spans_get(harness: Harness) -> None:
    assert harness.guard.current_agent_id() is None
    with harness.agent_run("a"):
        with span(harness, "chat model"):
            before = harness.guard.current_agent_id()
        for _ in range(3):
            harness.call("grep", {"q": "X"})
        with span(harness, "chat model"):
            after = harness.guard.current_agent_id()
    assert before == after == harness.reminders[0].agent_id
    with span(harness, "LangGraph"), span(harness, "pre_model_hook"):  # no agent span: the local root
        assert harness.guard.current_agent_id() is not None
        assert harness.guard.current_agent_id().startswith("LangGraph#")  # type: ignore[union-attr]


def test_current_agent_id_never_raises(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def tool_call(self, *args: Any) -> None:
            return None

        def agent_run(self, *args: Any) -> None:
            raise RuntimeError("boom")

    h = make_harness(conventions=[Broken()])
    with span(h, "root"), span(h, "child"):
        assert h.guard.current_agent_id() is None
    assert "failed to resolve" in caplog.text


# -- the public extension point ------------------------------------------------------------------


def test_a_user_defined_convention_through_the_public_extension_point() -> None:
    """Acceptance 4: spans named ``tool:<name>``, arguments in ``my.args``, agent in ``my.agent``."""
    mine = AttributeConvention(tool_span="tool:", arguments=("my.args",), agent=("my.agent",))
    h = make_harness(GuardConfig(thresholds=(3,)), conventions=[mine, *DEFAULT_CONVENTIONS])
    for agent in ("alice", "bob", "alice", "alice", "bob"):
        with h.tracer.start_as_current_span("tool:search") as s:
            s.set_attributes({"my.args": json.dumps({"q": "otel"}), "my.agent": agent})
    (reminder,) = h.reminders
    assert (reminder.agent_id, reminder.agent_name, reminder.tool_name, reminder.run_length) == (
        "alice",
        "alice",
        "search",
        3,
    )
    assert h.guard.run_length("bob") == 2


def test_attribute_convention_with_attribute_matchers_and_agent_spans() -> None:
    mine = AttributeConvention(
        tool_span={"my.kind": "tool"},
        tool_name=("my.tool",),
        arguments=("my.args",),
        error=("my.denied",),
        agent_span=lambda name, attributes: name.startswith("agent:"),
        agent_span_name=("my.agent.name",),
    )
    h = make_harness(GuardConfig(thresholds=(2,)), conventions=[mine])
    with h.tracer.start_as_current_span("agent:planner"):
        for denied in (False, True):
            with h.tracer.start_as_current_span("whatever") as s:
                s.set_attributes({"my.kind": "tool", "my.tool": "rm", "my.args": "{}", "my.denied": denied})
        with h.tracer.start_as_current_span("untyped") as s:
            s.set_attributes({"my.kind": "tool", "my.args": "{}"})  # tool named after the span
    assert [(r.tool_name, r.agent_name) for r in h.reminders] == [("rm", "agent:planner")]
    assert errors(h) == [True]
    assert mine.agent_run("agent:x", {"my.agent.name": "named"}) == find_agent_run(
        [mine], "agent:x", {"my.agent.name": "named"}
    )
    assert mine.agent_run("other", {}) is None
    assert AttributeConvention(tool_span="t:").agent_run("agent:x", {}) is None
    assert AttributeConvention(tool_span="t:", agent_span="agent:").agent_run("agent:x", {}) == AgentRun(None, "x")
    assert AttributeConvention(tool_span="t:").tool_call("t:", {}, ()) is None  # a prefix and no name: not a call


@pytest.mark.parametrize("answer", [None, 0, "", 1, "yes", [1]], ids=repr)
def test_a_predicate_is_read_for_its_truth_whatever_it_returns(answer: object) -> None:
    """A predicate answering None or a count (``attributes.get(...)``) is asked for its truth, as Python asks an
    ``if``: the compiled build, too, never rejects the answer (it rejected any non-bool, span after span)."""
    mine = AttributeConvention(
        tool_span=lambda name, attributes: answer if attributes.get("my.kind") == "tool" else None,
        arguments=("my.args",),
        agent_span=lambda name, attributes: answer if name == "agent:planner" else None,
    )
    h = make_harness(GuardConfig(thresholds=(3,)), conventions=[mine, *DEFAULT_CONVENTIONS])
    with h.tracer.start_as_current_span("agent:planner"):
        for _ in range(3):
            with h.tracer.start_as_current_span("mine", attributes={"my.kind": "tool", "my.args": "{}"}):
                pass
    with h.tracer.start_as_current_span("invoke_agent coder", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(3):  # a GenAI tool span, which the predicate answers None for: the next convention's
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"}
            with h.tracer.start_as_current_span("execute_tool grep", attributes=attributes) as span:
                span.set_attribute("gen_ai.tool.call.arguments", "{}")
    expected = [("mine", "agent:planner")] if answer else []
    assert [(r.tool_name, r.agent_name) for r in h.reminders] == [*expected, ("grep", "coder")]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tool_span": ""}, "tool_span"),
        ({"tool_span": {}}, "tool_span"),
        ({"tool_span": 3}, "tool_span"),
        ({"tool_span": "t:", "arguments": "my.args"}, "arguments"),
        ({"tool_span": "t:", "agent": [""]}, "agent"),
        ({"tool_span": "t:", "agent_span": ""}, "agent_span"),
    ],
)
def test_attribute_convention_rejects_bad_declarations(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        AttributeConvention(**kwargs)


def test_rejecting_a_non_tool_span_never_reads_its_events() -> None:
    class Untouchable(tuple):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            raise AssertionError("events were read for a non-tool span")

    for name, attributes in [
        ("chat", {"gen_ai.operation.name": "chat"}),
        ("x", {"openinference.span.kind": "LLM"}),
        ("y", {"traceloop.span.kind": "task"}),
        ("invoke_agent a", {}),
    ]:
        assert find_tool_call(DEFAULT_CONVENTIONS, name, attributes, Untouchable()) is None


def test_the_default_conventions_are_the_processors_default() -> None:
    assert RepeatGuardSpanProcessor()._guard._conventions == DEFAULT_CONVENTIONS


def test_the_fast_reader_agrees_with_the_built_in_conventions() -> None:
    from otel_repeat_guard.conventions import SpanRouter, tool_call_reader

    read = tool_call_reader(DEFAULT_CONVENTIONS)
    router = SpanRouter(DEFAULT_CONVENTIONS)
    both = {"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"}
    cases = [
        ("running tool", {}),
        ("running tool", {"gen_ai.tool.name": "x", "tool_arguments": "{}"}),
        ("execute_tool x", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"}),
        ("x", {"openinference.span.kind": "TOOL", "tool.name": "x", "input.value": "{}"}),
        ("x", {"traceloop.span.kind": "tool", "traceloop.entity.name": "x"}),
        ("execute_tool x", {**both, "traceloop.entity.input": '{"input_str": "", "inputs": {"a": 1}}'}),
        ("chat", {"gen_ai.operation.name": "chat"}),
        ("x", {"openinference.span.kind": "AGENT"}),
    ]
    for name, attributes in cases:
        # reading only the marked conventions never changes what the full, ordered set reads
        for conventions in (DEFAULT_CONVENTIONS, tuple(reversed(DEFAULT_CONVENTIONS))):
            assert tool_call_reader(conventions)(name, attributes, ()) == find_tool_call(
                conventions, name, attributes, ()
            )
    assert read("chat", {"gen_ai.operation.name": "chat"}, ()) is None
    # with both marks, the configured order decides: Traceloop unwraps OpenLLMetry's wrapper first
    wrapped = {**both, "gen_ai.tool.call.arguments": '{"input_str": "", "inputs": {"a": 1}}'}
    assert read("execute_tool x", wrapped, ()) == ToolCall("x", {"a": 1})
    reversed_read = tool_call_reader(tuple(reversed(DEFAULT_CONVENTIONS)))
    assert reversed_read("execute_tool x", wrapped, ()) == ToolCall("x", wrapped["gen_ai.tool.call.arguments"])
    for name, attributes in [
        ("invoke_agent a", {"gen_ai.agent.id": "i"}),
        ("w", {"traceloop.span.kind": "agent", "gen_ai.agent.id": "i"}),
    ]:
        run = find_agent_run(DEFAULT_CONVENTIONS, name, attributes)
        assert run is not None and run.agent_id is not None
        assert router.may_name_agent_id(name, attributes, router.route(name, attributes))
    custom = [AttributeConvention(tool_span="t:"), *DEFAULT_CONVENTIONS]
    assert tool_call_reader(custom)("t:grep", {}, ()) == ToolCall("grep")
    # any mapping, not only a dict (the router reads a plain dict: compiled, a Mapping would raise TypeError)
    proxy = MappingProxyType({"openinference.span.kind": "TOOL", "tool.name": "x", "input.value": "{}"})
    assert read("x", proxy, ()) == ToolCall("x", "{}")
    assert SpanRouter(custom).may_name_agent_id("x", {}, 0)  # a user's agent_run may read anything


_OPERATIONS = ["invoke_agent", "invoke_workflow", "handle_conversation_turn", "execute_tool", "chat"]
_MARK_VALUES = st.sampled_from([*_OPERATIONS, "agent", "workflow", "tool", "AGENT", "TOOL", "LLM", ["agent"], 7])
_SPAN = st.tuples(
    st.sampled_from(["invoke_agent coder", "invoke_workflow w", "handle_conversation_turn", "execute_tool x", "chat"])
    | st.text(max_size=12),
    st.dictionaries(
        st.sampled_from(["gen_ai.operation.name", "traceloop.span.kind", "openinference.span.kind", "gen_ai.agent.id"]),
        _MARK_VALUES | st.sampled_from(["i", ""]),
    ),
)


@given(_SPAN)
def test_the_routers_agent_run_marks_pass_every_span_a_built_in_convention_reads_an_agent_id_off(
    span: tuple[str, dict[str, Any]],
) -> None:
    """The router's agent-run marks, built from the marks declared beside each ``agent_run``, against the readers
    themselves: a span they stop is one no built-in convention reads an agent id off (else a run would reset no
    chain). The mark never reaches what the router answers for tool and model calls."""
    from otel_repeat_guard.conventions import SpanRouter

    name, attributes = span
    router = SpanRouter(DEFAULT_CONVENTIONS)
    mask = router.route(name, attributes)
    run = find_agent_run(DEFAULT_CONVENTIONS, name, attributes)
    if run is not None and run.agent_id is not None:
        assert router.may_name_agent_id(name, attributes, mask)
    assert not router.agent_bit & (router.tool_bits | router.model_bits)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.agent.id": "i"}  # a tool span of its agent's
    assert not router.may_name_agent_id("execute_tool x", tool, router.route("execute_tool x", tool))


def test_every_genai_invocation_operation_is_a_run_and_the_older_name_still_is() -> None:
    genai = GenAIConvention()
    for operation in ("invoke_agent", "invoke_workflow", "handle_conversation_turn"):
        run = genai.agent_run("x", {"gen_ai.operation.name": operation, "gen_ai.agent.name": "coder"})
        assert run == AgentRun(agent_id=None, agent_name="coder")
        assert genai.agent_run(f"{operation} planner", {}) == AgentRun(agent_id=None, agent_name="planner")
    assert genai.agent_run("chat gpt-4o", {"gen_ai.operation.name": "chat"}) is None
    assert genai.agent_run("invoke_workflowish", {}) == AgentRun(agent_id=None, agent_name=None)


def test_a_span_that_carries_a_model_mark_but_calls_no_model_routes_as_no_model_call() -> None:
    """LlamaIndex's ``_prepare_chat_with_tools`` (of whichever LLM class) builds a request under the LLM kind."""
    from otel_repeat_guard.conventions import SpanRouter

    router = SpanRouter(DEFAULT_CONVENTIONS)
    llm = {"openinference.span.kind": "LLM"}
    assert router.route("OpenAI.astream_chat", llm) & router.model_bits
    assert not router.route("OpenAI._prepare_chat_with_tools", llm) & router.model_bits
    assert not router.route("Anthropic._prepare_chat_with_tools", llm) & router.model_bits
    chat = {"gen_ai.operation.name": "chat"}  # only the declaring convention's mark is cleared
    assert router.route("OpenAI._prepare_chat_with_tools", chat) & router.model_bits
