"""Fuzzing the processor: arbitrary spans never raise, are exported unchanged but for the guard's
events, and get exactly the run lengths and reminders of a simple reference model of the rules."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, set_span_in_context

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor

THRESHOLDS = (2, 4)
TOOLS = ["grep", "read", "todo_write", ""]

text = st.text(max_size=40) | st.sampled_from(
    ["", "{", "NaN", "[1, 2", '{"a": 1}', '{ "a" : 1 }', "\ud800", "x" * 5000]
)
json_text = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
    max_leaves=8,
).map(lambda v: json.dumps(v, allow_nan=True))
attribute_value = (
    text
    | json_text
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.booleans()
    | st.lists(st.integers(), max_size=3)
    | st.lists(st.text(max_size=3), max_size=3)
)


@st.composite
def tool_span(draw: st.DrawFn) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    often = st.integers(0, 9).map(lambda n: n < 8)
    if draw(often):
        attributes["gen_ai.operation.name"] = draw(st.sampled_from(["execute_tool"] * 6 + ["chat", 7]))
    if draw(often):
        attributes["gen_ai.tool.name"] = draw(st.sampled_from(TOOLS) if draw(often) else attribute_value)
    if draw(often):
        same = st.sampled_from(['{"q": 1}', '{ "q":1 }', '["a"]'])
        attributes["gen_ai.tool.call.arguments"] = draw(same if draw(often) else attribute_value)
    if draw(st.integers(0, 3)) == 0:
        attributes["gen_ai.agent.id"] = draw(st.sampled_from(["a1", "a2", ""]) | attribute_value)
    if draw(st.integers(0, 5)) == 0:
        attributes["error.type"] = "Denied"
    return {
        "name": draw(st.sampled_from(["execute_tool grep"] * 4 + ["execute_tool ", "tool", "", "invoke_agent x"])),
        "attributes": attributes,
        "error": draw(st.integers(0, 4)) == 0,
    }


@st.composite
def scenario(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A flat script of steps: open an agent run or a plain span, close one, or make a tool call."""
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["tool", "tool", "tool", "open_agent", "open_plain", "open_remote", "close"]))
        steps.append((kind, draw(tool_span()) if kind == "tool" else draw(st.sampled_from(["coder", ""]))))
    return steps


@dataclass
class Open:
    """An open span of the scenario and its parent in this process (None: a local root)."""

    span: Any
    parent: Open | None
    agent: bool = False
    encloses_model_call: bool = False
    stands_for: str | None = None  # how it was first found to stand for a run: kept while it is open

    @property
    def key(self) -> str:
        return f"span-{self.span.get_span_context().span_id}"

    def run_key(self) -> str:
        """The nearest agent run above; else the nearest span enclosing a model call; else the local root.
        A span found once keeps standing for its run, unless a span enclosing a model call is nearer."""
        node: Open | None = self
        enclosing: Open | None = None
        root = self
        while node is not None:
            if node.stands_for is not None and (enclosing is None or node.stands_for == "agent"):
                return node.key
            if node.agent:
                node.stands_for = "agent"
                return node.key
            if enclosing is None and node.encloses_model_call:
                enclosing = node
            root, node = node, node.parent
        chosen = enclosing or root
        chosen.stands_for = "enclosing" if enclosing else "root"
        return chosen.key

    def mark_model_call(self) -> None:
        node: Open | None = self
        while node is not None:
            node.encloses_model_call = True
            node = node.parent


@dataclass
class Model:
    """The chain rules, written plainly: the oracle for the fuzz test."""

    chains: dict[str, tuple[str, Any, int]] = field(default_factory=dict)
    reminders: list[tuple[str, int]] = field(default_factory=list)

    @staticmethod
    def key(arguments: Any) -> Any:
        if isinstance(arguments, str):
            try:
                return json.dumps(json.loads(arguments), sort_keys=True, default=_strict)
            except ValueError:
                return ("raw", arguments)
        return json.dumps(list(arguments) if isinstance(arguments, tuple) else arguments, sort_keys=True)

    def observe(self, agent: str, tool: str, arguments: Any) -> int:
        key = None if arguments is None else self.key(arguments)
        previous = self.chains.get(agent)
        run = previous[2] + 1 if previous and key is not None and previous[0] == tool and previous[1] == key else 1
        self.chains[agent] = (tool, key, run)
        if run in THRESHOLDS:
            self.reminders.append((tool, run))
        return run


def _strict(value: Any) -> Any:
    raise TypeError(value)


_DENIED_READ = {
    "name": "execute_tool grep",
    "attributes": {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read",
        "gen_ai.tool.call.arguments": '{"q": 1}',
        "error.type": "Denied",
    },
    "error": True,
}
_CHAT = {"name": "chat", "attributes": {"gen_ai.operation.name": "chat"}, "error": False}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario())
# found by CI: a model call under a nested span after the root's first call; the nested span encloses it
@example(
    [("open_plain", "coder"), ("tool", _DENIED_READ), ("open_plain", "coder"), ("tool", _CHAT), ("tool", _DENIED_READ)]
)
def test_fuzzed_spans_never_raise_and_follow_the_rules(steps: list[tuple[str, Any]]) -> None:
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=THRESHOLDS), reminders.append)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("fuzz")
    model = Model()
    stack: list[Open] = []
    expected: dict[int, int] = {}
    sent: dict[int, dict[str, Any]] = {}
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))

    for kind, payload in steps:
        parent = stack[-1] if stack else None
        parent_ctx: Context | None = set_span_in_context(parent.span) if parent else None
        if kind == "open_agent":
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": payload} if payload else {}
            span = tracer.start_span(
                "invoke_agent " + payload if payload else "invoke_agent", context=parent_ctx, attributes=attrs
            )
            stack.append(Open(span, parent, agent=True))
        elif kind == "open_plain":
            stack.append(Open(tracer.start_span("http", context=parent_ctx), parent))
        elif kind == "open_remote":  # a local root whose parent lives in another process
            stack.append(Open(tracer.start_span("rpc", context=set_span_in_context(NonRecordingSpan(remote))), None))
        elif kind == "close" and stack:
            closing = stack.pop()
            closing.span.end()
            model.chains.pop(closing.key, None)  # a chain keyed to an agent run or local root ends with it
        elif kind == "tool":
            span = tracer.start_span(payload["name"], context=parent_ctx)
            for name, value in payload["attributes"].items():
                span.set_attribute(name, value)
            if payload["error"]:
                span.set_status(Status(StatusCode.ERROR, "boom"))
            recorded = dict(span.attributes or {})
            span.end()
            span_id = span.get_span_context().span_id
            sent[span_id] = recorded
            run = _model_step(model, payload["name"], recorded, parent)
            if run is not None:
                expected[span_id] = run
    while stack:
        stack.pop().span.end()

    exported = {s.context.span_id: s for s in exporter.get_finished_spans()}
    for span_id, attributes in sent.items():
        span = exported[span_id]
        theirs = {k: v for k, v in (span.attributes or {}).items() if not k.startswith("repeat_tool_guard.")}
        assert theirs == attributes  # untouched: the guard only adds its facts (on by default)
        guard_events = [e for e in span.events if e.name.startswith("repeat_tool_guard.")]
        repeat = [e for e in guard_events if e.name == "repeat_tool_guard.repeat"]
        got = int(repeat[0].attributes["repeat_tool_guard.run_length"]) if repeat else 1  # type: ignore[index]
        assert got == expected.get(span_id, 1), (attributes, span.name)
    for span in exported.values():
        if span.context.span_id not in sent:
            assert not span.events  # no event on any non-tool span
    assert [(r.tool_name, r.run_length) for r in reminders] == model.reminders


def _model_step(model: Model, span_name: str, attributes: dict[str, Any], parent: Open | None) -> int | None:
    operation = attributes.get("gen_ai.operation.name")
    if operation == "chat" and parent is not None:
        parent.mark_model_call()  # a model call: its ancestors enclose the run's model calls
    if operation != "execute_tool":
        return None
    tool = attributes.get("gen_ai.tool.name")
    if not isinstance(tool, str) or not tool:
        tool = span_name[len("execute_tool ") :].strip() if span_name.startswith("execute_tool ") else ""
    if not tool or tool == "todo_write":
        return None
    agent = attributes.get("gen_ai.agent.id")
    if not isinstance(agent, str) or not agent:
        agent = parent.run_key() if parent else None  # no parent at all: no agent
    if agent is None:
        return None
    return model.observe(agent, tool, attributes.get("gen_ai.tool.call.arguments"))
