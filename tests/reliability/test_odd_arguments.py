"""Both builds, one behaviour: every public entry point takes any argument type.

The compiled build (mypyc) checks a compiled function's ``str``/``int``/``bool``/``dict`` annotations
when it is called, and the OTel SDK catches nothing a processor raises: a ``TypeError`` there reaches
the application. So each entry point either ignores an odd argument or refuses it with a
``ValueError`` naming the option. ``make unit`` runs this file on the pure-Python install, ``make
unit-compiled`` on the wheel; the assertions are the same on both.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import AgentRun, GuardConfig, ReminderInbox, RepeatGuardSpanProcessor, ToolCall, configure
from otel_repeat_guard.integrations.google_adk import repeat_guard_before_model_callback
from otel_repeat_guard.integrations.openai_agents import repeat_guard_input_filter
from otel_repeat_guard.setup.propagation import RunBaggagePropagator, run_context
from otel_repeat_guard.spans.baggage import run_in

ODD = [None, 5, 2.5, b"agent", ["agent"], {"agent": 1}, True, object()]
"""Values a harness may pass where a string (an agent id) or a Context is meant."""
REPEAT, REMINDER_EVENT = "repeat_tool_guard.repeat", "repeat_tool_guard.reminder"


def _loop(provider: TracerProvider, name: Any, calls: int = 3) -> None:
    """One agent run making ``calls`` identical tool calls whose spans are named ``name``."""
    tracer = provider.get_tracer("tests.odd")
    run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "looper"}
    with tracer.start_as_current_span(name, attributes=run):
        for _ in range(calls):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "grep",
                "gen_ai.tool.call.arguments": '{"q": 1}',
            }
            tracer.start_span(name, attributes=tool).end()


def _guarded(wrapping: bool, **options: Any) -> tuple[TracerProvider, RepeatGuardSpanProcessor, InMemorySpanExporter]:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    if wrapping:  # the guard hands each span on to the processors it wraps
        guard = RepeatGuardSpanProcessor(downstream=[SimpleSpanProcessor(exporter)], **options)
        provider.add_span_processor(guard)
    else:
        guard = RepeatGuardSpanProcessor(**options)
        provider.add_span_processor(guard)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, guard, exporter


@pytest.mark.parametrize("wrapping", [False, True], ids=["beside", "wrapping"])
@pytest.mark.parametrize("name", [5, None, b"grep", 2.5], ids=repr)
def test_a_span_whose_name_is_not_a_string_is_counted_and_reaches_the_exporter(
    wrapping: bool, name: Any, caplog: pytest.LogCaptureFixture
) -> None:
    provider, _, exporter = _guarded(wrapping)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        _loop(provider, name)
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == [name] * 4  # three tool spans, then the run's
    assert [[e.name for e in span.events] for span in spans[:3]] == [
        [],
        [REPEAT],
        [REPEAT, REMINDER_EVENT],
    ]
    assert caplog.records == []  # read as a span named "", not a failure


@pytest.mark.parametrize("event", [7, None, b"exception", ("exception",)], ids=repr)
def test_a_span_event_whose_name_is_not_a_string_costs_no_call(event: Any, caplog: pytest.LogCaptureFixture) -> None:
    provider, _, exporter = _guarded(False)
    tracer = provider.get_tracer("tests.odd")
    run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "looper"}
    with (
        caplog.at_level(logging.ERROR, logger="otel_repeat_guard"),
        tracer.start_as_current_span("run", attributes=run),
    ):
        for _ in range(3):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "grep",
                "gen_ai.tool.call.arguments": "{}",
            }
            span = tracer.start_span("execute_tool grep", attributes=tool)
            span.add_event(event, {"exception.type": "ValueError"})  # read as no exception, on both builds
            span.end()
    guard_events = [[e.name for e in span.events][1:] for span in exporter.get_finished_spans()[:3]]
    assert guard_events == [[], [REPEAT], [REPEAT, REMINDER_EVENT]]
    assert caplog.records == []


def test_run_propagation_ignores_a_context_that_is_not_one_and_refuses_a_guard_that_is_not_one() -> None:
    provider, guard, _ = _guarded(False)
    carrier: dict[str, str] = {}
    with provider.get_tracer("t").start_as_current_span("run", attributes={"gen_ai.operation.name": "invoke_agent"}):
        key = guard.current_agent_id()
        assert key is not None
        assert run_in(run_context(guard, context=5)) == key  # the current context instead
        RunBaggagePropagator(guard).inject(carrier, 5)
    assert carrier == {"baggage": f"repeat_tool_guard.run={quote(key)}"}
    assert RunBaggagePropagator().extract(carrier, 5) == RunBaggagePropagator().extract(carrier)
    for call in (lambda: run_context("guard"), lambda: RunBaggagePropagator(5)):
        with pytest.raises(ValueError, match=r"^guard must be a RepeatGuardSpanProcessor or None, got "):
            call()


class _Loose:
    """A user's convention that answers outside its contract: odd field types, or no ToolCall at all."""

    def __init__(self, call: Any, run: Any) -> None:
        self.call, self.run = call, run

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[Any]) -> Any:
        return self.call if name == "tool" else None

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> Any:
        return self.run if name == "run" else None


@pytest.mark.parametrize(
    ("call", "run", "counted", "warned"),
    [
        (ToolCall("grep", "{}", agent_id=5, agent_name=b"a", error="yes", call_id=7), AgentRun(5, 6, 1), 3, False),  # type: ignore[arg-type]
        (ToolCall("grep", "{}"), AgentRun("a1", None), 3, False),
        (ToolCall("grep", "{}"), ("a1", "agent", False), 3, False),
        (ToolCall("grep", "{}"), True, 3, True),  # no AgentRun: the run is the local root
        (ToolCall(5, "{}"), AgentRun("a1"), 0, True),  # type: ignore[arg-type]  # no tool name: no call
        (("grep", "{}"), AgentRun("a1"), 0, True),
        ("grep", AgentRun("a1"), 0, True),
    ],
    ids=repr,
)
def test_a_users_convention_answering_outside_its_contract_is_read_alike_on_both_builds(
    call: Any, run: Any, counted: int, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    provider, guard, _ = _guarded(False, conventions=[_Loose(call, run)])
    tracer = provider.get_tracer("tests.odd")
    lengths = []
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"), tracer.start_as_current_span("run"):
        for _ in range(3):
            tracer.start_span("tool").end()
            lengths.append(guard.run_length(guard.current_agent_id()))
    assert lengths == [1, 2, 3][:counted] + [0] * (3 - counted)
    assert [r.levelno for r in caplog.records] == ([logging.WARNING] if warned else [])  # said once, not per span
    assert all("not a ToolCall" in r.getMessage() or "not an AgentRun" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("value", ODD, ids=repr)
def test_the_harness_api_ignores_an_agent_id_or_context_that_is_not_one(
    value: object, caplog: pytest.LogCaptureFixture
) -> None:
    provider, guard, _ = _guarded(False)
    inbox = ReminderInbox()
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        guard.reset(value)  # e.g. reset(guard.current_agent_id()) outside a span: None
        guard.forget(value)
        assert guard.run_length(value) == 0
        assert guard.current_agent_id(value) is None  # no current span, whatever the context
        assert guard.model_call_due(value) is None
        assert inbox.drain(value) == inbox.peek(value) == []
        guard.on_start(provider.get_tracer("t").start_span("x"), parent_context=value)  # type: ignore[arg-type]
    assert caplog.records == []
    with pytest.raises(ValueError, match="reminder must be a Reminder, got None"):
        inbox.put(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [2500.0, 2500])
def test_force_flush_takes_a_float_timeout_as_the_sdk_processors_do(timeout: float) -> None:
    for wrapping in (False, True):
        provider, guard, exporter = _guarded(wrapping)
        _loop(provider, "execute_tool grep", calls=2)
        assert guard.force_flush(timeout) is True
        assert provider.force_flush(timeout) is True  # type: ignore[arg-type]  # the SDK declares an int
        assert len(exporter.get_finished_spans()) == 3
    telemetry = configure(span_exporters=[InMemorySpanExporter()], metric_readers=[], set_global=False)
    _loop(telemetry.tracer_provider, "execute_tool grep")
    assert telemetry.force_flush(timeout) is True
    telemetry.shutdown()


@pytest.mark.parametrize("timeout", [None, "2500", float("nan"), float("inf"), True, [1]], ids=repr)
def test_force_flush_with_a_timeout_that_is_no_number_flushes_with_the_default(timeout: object) -> None:
    exporter = InMemorySpanExporter()
    telemetry = configure(span_exporters=[exporter], metric_readers=[], set_global=False)
    _loop(telemetry.tracer_provider, "execute_tool grep", calls=2)
    assert telemetry.guard.force_flush(timeout) is True
    assert telemetry.force_flush(timeout) is True  # type: ignore[arg-type]
    assert len(exporter.get_finished_spans()) == 3
    telemetry.shutdown()


async def _async_callback(value: object) -> None:
    return None


class _AsyncCallable:
    async def __call__(self, value: object) -> None:
        return None


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_agents", 1e5),
        ("max_agents", "100"),
        ("max_agents", None),
        ("max_agents", 0),
        ("max_live_spans", None),
        ("max_live_spans", 2.5),
        ("max_live_spans", True),
        ("conventions", 5),
        ("conventions", "genai"),
        ("conventions", [5]),
        ("downstream", 5),
        ("downstream", [object()]),
        ("meter_provider", "x"),
        ("on_reminder", 5),
        ("on_reminder", _async_callback),  # a coroutine that never runs: every reminder lost unsaid
        ("on_reminder", _AsyncCallable()),
        ("redact", "x"),
        ("audit", 1),
        ("audit", _async_callback),
        ("config", {"thresholds": [3]}),
    ],
)
def test_an_option_of_the_wrong_type_is_a_value_error_naming_it(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"^{option} must "):
        RepeatGuardSpanProcessor(**{option: value})


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("span_exporters", 5),
        ("span_exporters", [5]),  # else accepted, and failing only at exit, in shutdown
        ("metric_readers", "otlp"),
        ("metric_readers", [5]),
        ("resource_attributes", [1]),
        ("store", 5),
        ("store", "a\0b"),  # else "embedded null byte", naming no option
        ("store_arguments", "false"),  # else read as on: argument text, which can hold secrets, stored
        ("service_name", 5),  # else every row said unknown_service
        ("service_name", ""),
        ("config", 3),
    ],
)
def test_configure_refuses_an_option_of_the_wrong_type_with_a_value_error_naming_it(option: str, value: Any) -> None:
    options: dict[str, Any] = {"span_exporters": [], "metric_readers": [], option: value}
    with pytest.raises(ValueError, match=f"^{option} must "):
        configure(set_global=False, **options)


def test_configure_refuses_a_set_global_that_is_no_flag_and_installs_nothing() -> None:
    """``set_global="no"`` read by ``bool()`` installed the global providers."""
    before = trace.get_tracer_provider()
    with pytest.raises(ValueError, match=r"^set_global must be True or False, got 'no'$"):
        configure(span_exporters=[], metric_readers=[], set_global="no")  # type: ignore[arg-type]
    assert trace.get_tracer_provider() is before


def test_configure_refuses_a_store_it_cannot_use_with_a_value_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no such folder" / "repeat-guard.db"
    with pytest.raises(ValueError, match=r"^store cannot be used: the directory for the store .* does not exist$"):
        configure(set_global=False, span_exporters=[], metric_readers=[], store=str(missing))


def test_the_store_refuses_a_store_arguments_that_is_no_flag(tmp_path: Path) -> None:
    from otel_repeat_guard.store import SQLiteSpanExporter

    with pytest.raises(ValueError, match=r"^store_arguments must be True or False, got 'false'$"):
        SQLiteSpanExporter(tmp_path / "store.db", store_arguments="false")  # type: ignore[arg-type]


def test_flags_take_any_truthy_value_alike_on_both_builds() -> None:
    _, guard, _ = _guarded(False, fast_path=0, record_facts=1)
    assert guard._guard.facts is True
    assert GuardConfig() == guard.config


@pytest.mark.parametrize("adapter", [repeat_guard_input_filter, repeat_guard_before_model_callback])
def test_an_adapters_then_that_is_not_callable_is_a_value_error_naming_it(adapter: Any) -> None:
    with pytest.raises(ValueError, match=r"^then must be callable or None, got 5$"):
        adapter(guard=RepeatGuardSpanProcessor(), inbox=ReminderInbox(), then=5)  # before its framework is imported
