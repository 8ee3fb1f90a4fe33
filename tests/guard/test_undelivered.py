"""Reminders the guard hands on that no adapter takes before the run's next model call ends (or the run ends):
counted on ``repeat_tool_guard.undelivered_reminders``, said once with the adapter that would deliver them, and
put on that model call's span (decide/delivery.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.decide.delivery import (
    NO_ADAPTER,
    NO_RUN,
    NOT_ADDED,
    RUN_ENDED,
    UNDELIVERED_EVENT,
    UNDELIVERED_REMINDERS,
    adapter_for,
    fix_for,
    watched_inbox,
)
from otel_repeat_guard.integrations._common import due_reminders, take_reminders

PATH = {"path": "a.txt"}


class Setup:
    def __init__(self, *, watched: bool = True) -> None:
        self.inbox = ReminderInbox()
        self.metrics = InMemoryMetricReader()
        self.taken: list[Any] = []
        on_reminder = self.inbox.put if watched else self.taken.append
        self.guard = RepeatGuardSpanProcessor(
            on_reminder=on_reminder, meter_provider=MeterProvider(metric_readers=[self.metrics])
        )
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.guard)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("openinference.instrumentation.langchain")

    def tool(self, arguments: dict[str, str] = PATH) -> None:
        with self.tracer.start_as_current_span("execute_tool read_file") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "read_file")
            span.set_attribute("gen_ai.tool.call.arguments", '{"path": "a.txt"}')

    def model(self, adapter: str | None = None) -> None:
        """One model call of the run: an adapter asks first (``run``: from the run's span; ``nowhere``: from
        outside any span), or none does."""
        if adapter == "run":
            with due_reminders(self.guard, self.inbox):
                pass
        elif adapter == "nowhere":
            from opentelemetry import context

            token = context.attach(context.Context())  # the request goes out with no span current
            try:
                take_reminders(self.guard, self.inbox)
            finally:
                context.detach(token)
        with self.tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attribute("gen_ai.operation.name", "chat")

    def undelivered(self) -> dict[tuple[str, str], int]:
        data = self.metrics.get_metrics_data()
        found: dict[tuple[str, str], int] = {}
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == UNDELIVERED_REMINDERS:
                        for point in metric.data.data_points:
                            key = (str(point.attributes["repeat_tool_guard.tier"]), str(point.attributes["reason"]))
                            found[key] = int(point.value)
        return found

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (span.name, dict(event.attributes or {}))
            for span in self.exporter.get_finished_spans()
            for event in span.events
            if event.name == UNDELIVERED_EVENT
        ]


def loop(setup: Setup, calls: int, adapter: str | None) -> None:
    """An agent run whose model asks for the same call ``calls`` times, each followed by a model call."""
    with setup.tracer.start_as_current_span(
        "invoke_agent reader", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reader"}
    ):
        for _ in range(calls):
            setup.model(adapter)
            setup.tool()
        setup.model(adapter)


def test_reminders_no_adapter_takes_are_counted_said_once_and_put_on_the_model_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup = Setup()
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        loop(setup, 8, None)
    assert setup.undelivered() == {("gentle", NO_ADAPTER): 1, ("detailed", NO_ADAPTER): 2}
    events = setup.events()
    assert [(name, e["repeat_tool_guard.tier"], e["repeat_tool_guard.threshold"]) for name, e in events] == [
        ("chat gpt-4o", "gentle", 3),
        ("chat gpt-4o", "detailed", 5),
        ("chat gpt-4o", "detailed", 8),
    ]
    assert {e["repeat_tool_guard.reason"] for _, e in events} == {NO_ADAPTER}
    warnings = [r.getMessage() for r in caplog.records if "did not reach the model" in r.getMessage()]
    assert len(warnings) == 1  # once per guard, reason and framework
    assert "for LangChain, turn on create_agent(..., middleware=[RepeatGuardMiddleware()])" in warnings[0]


def test_reminders_an_adapter_takes_are_not_undelivered(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup()
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        loop(setup, 8, "run")
    assert setup.undelivered() == {}
    assert setup.events() == []
    assert "did not reach the model" not in caplog.text
    assert setup.guard._guard.deliveries.runs == {}  # nothing left watched


def test_an_adapter_that_finds_no_run_names_the_client_adapters_requirement(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup()
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        loop(setup, 5, "nowhere")
    assert setup.undelivered() == {("gentle", NO_RUN): 1, ("detailed", NO_RUN): 1}
    assert "finds the run from the span current where the request goes out" in caplog.text
    assert "RepeatGuardMiddleware" in caplog.text


def test_a_reminder_an_adapter_gave_back_is_not_added() -> None:
    setup = Setup()
    attributes = {"gen_ai.operation.name": "invoke_agent"}
    with setup.tracer.start_as_current_span("invoke_agent reader", attributes=attributes):
        for _ in range(3):
            setup.tool()
        with due_reminders(setup.guard, setup.inbox) as reminders:
            assert len(reminders) == 1
            _fail()  # the adapter's edit fails: the reminder goes back to the inbox, the request out without it
        setup.model()
    assert setup.undelivered() == {("gentle", NOT_ADDED): 1}


def _fail() -> None:
    raise RuntimeError("the adapter's edit failed")


def test_a_run_that_ends_before_its_next_model_call_leaves_its_reminder_undelivered() -> None:
    setup = Setup()
    with setup.tracer.start_as_current_span(
        "invoke_agent reader", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for _ in range(3):
            setup.tool()
    assert setup.undelivered() == {("gentle", RUN_ENDED): 1}


def test_a_callback_of_the_harness_own_is_not_watched() -> None:
    setup = Setup(watched=False)
    loop(setup, 5, None)
    assert len(setup.taken) == 2
    assert setup.undelivered() == {}
    assert watched_inbox(setup.taken.append) is None
    assert watched_inbox(ReminderInbox().drain) is None


def test_each_framework_has_its_adapter_named() -> None:
    assert adapter_for("openinference.instrumentation.crewai")[0] == "CrewAI"
    assert adapter_for("opentelemetry.instrumentation.langchain")[0] == "LangChain"
    assert adapter_for("gcp.vertex.agent")[0] == "google-adk"
    assert adapter_for("my.own")[0] is None
    assert "docs/runtimes.md" in fix_for(NO_ADAPTER, "my.own")


def test_what_is_watched_is_bounded_per_run_and_in_runs() -> None:
    from opentelemetry.metrics import NoOpMeterProvider

    from otel_repeat_guard.core.reminders import Reminder
    from otel_repeat_guard.decide.delivery import MAX_HANDED, Deliveries

    inbox = ReminderInbox()
    deliveries = Deliveries(NoOpMeterProvider(), logging.getLogger("test"), 2)
    deliveries.watch(inbox)

    def reminder(run: str) -> Reminder:
        return Reminder(run, None, "t", 3, 3, "gentle", "text", "{}", "0" * 32, "0" * 16)

    for run in ("a", "b", "c"):
        deliveries.handed(reminder(run))
    assert sorted(deliveries.runs) == ["b", "c"]  # the oldest run is no longer watched
    for _ in range(MAX_HANDED + 5):
        deliveries.handed(reminder("c"))
    assert len(deliveries.runs["c"]) == MAX_HANDED
