"""Both builds, one behaviour: every public entry point takes any argument type.

The compiled build (mypyc) checks a compiled function's ``str``/``int``/``bool``/``dict`` annotations
when it is called, and the OTel SDK catches nothing a processor raises: a ``TypeError`` there reaches
the application. So each entry point either ignores an odd argument or refuses it with a
``ValueError`` naming the option. ``make unit`` runs this file on the pure-Python install, ``make
unit-compiled`` on the wheel; the assertions are the same on both.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, ReminderInbox, RepeatGuardSpanProcessor, configure

ODD = [None, 5, 2.5, b"agent", ["agent"], {"agent": 1}, True, object()]
"""Values a harness may pass where a string (an agent id) or a Context is meant."""
REPEAT = "repeat_tool_guard.repeat"


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
        [REPEAT, "repeat_tool_guard.reminder"],
    ]
    assert caplog.records == []  # read as a span named "", not a failure


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
        ("redact", "x"),
        ("audit", 1),
        ("config", {"thresholds": [3]}),
    ],
)
def test_an_option_of_the_wrong_type_is_a_value_error_naming_it(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"^{option} must "):
        RepeatGuardSpanProcessor(**{option: value})


@pytest.mark.parametrize(
    ("option", "value"),
    [("span_exporters", 5), ("metric_readers", "otlp"), ("resource_attributes", [1]), ("store", 5), ("config", 3)],
)
def test_configure_refuses_an_option_of_the_wrong_type_with_a_value_error_naming_it(option: str, value: Any) -> None:
    options: dict[str, Any] = {"span_exporters": [], "metric_readers": [], option: value}
    with pytest.raises(ValueError, match=f"^{option} must "):
        configure(set_global=False, **options)


def test_flags_take_any_truthy_value_alike_on_both_builds() -> None:
    _, guard, _ = _guarded(False, fast_path=0, record_facts=1)
    assert guard._guard.facts is True
    assert guard._guard._plain is None  # fast_path=0: every span read the general way
    assert GuardConfig() == guard.config
