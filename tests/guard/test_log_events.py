"""The guard's span events, also as log events through the Logs API, and its loops as GenAI evaluations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.decide.evaluations import reached
from otel_repeat_guard.decide.log_events import LogEvents, is_real
from tests.guard.conftest import Harness, make_harness

FOUR = ("gen_ai.evaluation.name", "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label")
FOUR += ("gen_ai.evaluation.explanation",)


def _logs_of(exporter: InMemoryLogRecordExporter) -> list[tuple[str, int, int, dict[str, Any]]]:
    """(event name, trace id, span id, attributes) of each log record, in order."""
    out = []
    for finished in exporter.get_finished_logs():
        record = getattr(finished, "log_record", finished)  # a ReadableLogRecord on newer SDKs
        out.append((record.event_name, record.trace_id, record.span_id, dict(record.attributes or {})))
    return out


@pytest.fixture
def logged() -> Iterator[tuple[Harness, InMemoryLogRecordExporter]]:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    h = make_harness(GuardConfig(thresholds=(3, 5), stop_at=7), logger_provider=provider)
    yield h, exporter
    h.provider.shutdown()
    provider.shutdown()


def _span_events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(event.name, dict(event.attributes or {})) for event in span.events]


def test_each_span_event_is_also_a_log_event_in_its_spans_context(
    logged: tuple[Harness, InMemoryLogRecordExporter],
) -> None:
    h, exporter = logged
    with h.agent_run("researcher"):
        for _ in range(4):
            h.call("read_file", {"path": "a.txt"})
    records = _logs_of(exporter)
    guard_records = [r for r in records if r[0] != "gen_ai.evaluation.result"]
    expected = [
        (name, span.context.trace_id, span.context.span_id, attributes)
        for span in h.tool_spans()
        for name, attributes in _span_events(span)
    ]
    assert guard_records == expected
    assert [r[0] for r in guard_records] == [
        "repeat_tool_guard.repeat",
        "repeat_tool_guard.repeat",
        "repeat_tool_guard.reminder",
        "repeat_tool_guard.repeat",
    ]


def test_each_loop_is_an_evaluation_with_the_four_attributes(
    logged: tuple[Harness, InMemoryLogRecordExporter],
) -> None:
    h, exporter = logged
    with h.agent_run("researcher"):
        for _ in range(7):
            h.call("read_file", {"path": "a.txt"})
    spans = h.tool_spans()
    evaluations = [r for r in _logs_of(exporter) if r[0] == "gen_ai.evaluation.result"]
    outcomes = [
        r[3]["gen_ai.evaluation.score.label"] for r in evaluations if "outcome" in r[3]["gen_ai.evaluation.name"]
    ]
    assert outcomes == ["ignored", "ignored", "ended"]  # the reminders at 3 and 5 went on, the run ended after 7
    evaluations = [r for r in evaluations if r[3]["gen_ai.evaluation.name"] == "repeat_tool_guard.repeat"]
    assert len(evaluations) == 6
    assert all(tuple(r[3]) == FOUR for r in evaluations)
    assert [(r[3]["gen_ai.evaluation.score.value"], r[3]["gen_ai.evaluation.score.label"]) for r in evaluations] == [
        (2.0, "none"),
        (3.0, "gentle"),
        (4.0, "gentle"),
        (5.0, "detailed"),
        (6.0, "detailed"),
        (7.0, "stop"),
    ]
    assert [r[2] for r in evaluations] == [s.context.span_id for s in spans[1:]]  # the span that completed it
    texts = {int(r[3]["gen_ai.evaluation.score.value"]): r[3]["gen_ai.evaluation.explanation"] for r in evaluations}
    reminder = next(e for e in spans[2].events if e.name == "repeat_tool_guard.reminder")
    assert texts[3] == reminder.attributes["repeat_tool_guard.reminder_text"]  # type: ignore[index]
    assert texts[4] == "`read_file` called 4 times in a row with the same arguments"


def test_cycles_and_no_progress_are_evaluations_too() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    h = make_harness(GuardConfig(cycle_thresholds=(2,), no_progress_thresholds=(3,)), logger_provider=provider)
    with h.agent_run("researcher"):
        for _ in range(2):
            h.call("search", {"q": "x"})
            h.call("open", {"url": "y"})
    evaluations = [r[3] for r in _logs_of(exporter) if r[0] == "gen_ai.evaluation.result"]
    cycle = [e for e in evaluations if e["gen_ai.evaluation.name"] == "repeat_tool_guard.cycle"]
    assert [(e["gen_ai.evaluation.score.value"], e["gen_ai.evaluation.score.label"]) for e in cycle] == [
        (2.0, "gentle")
    ]
    assert str(cycle[0]["gen_ai.evaluation.explanation"]).startswith("You are going in circles")
    h.provider.shutdown()


def test_the_tiers_a_loop_reaches() -> None:
    assert [reached(n, (3, 5, 8)) for n in (2, 3, 4, 5, 8, 9)] == ["none", "gentle", "gentle"] + ["detailed"] * 3
    assert reached(12, (3, 5, 8), 12) == "stop"
    assert reached(4, ()) == "none"
    assert reached(4, (4,)) == "gentle"


def test_log_events_can_be_turned_off_and_the_spans_keep_their_events() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    h = make_harness(GuardConfig.from_env({"OTEL_REPEAT_GUARD_LOG_EVENTS": "off"}), logger_provider=provider)
    with h.agent_run("researcher"):
        for _ in range(3):
            h.call("read_file", {"path": "a.txt"})
    assert exporter.get_finished_logs() == ()
    assert h.run_lengths() == [1, 2, 3]
    with pytest.raises(ValueError, match="log_events must be true or false, got 'no'"):
        GuardConfig(log_events="no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="logger_provider must be an OpenTelemetry LoggerProvider or None"):
        make_harness(logger_provider="otlp")


def test_with_no_logger_provider_the_spans_keep_their_events() -> None:
    assert not is_real(_logs.get_logger_provider())  # the tests set no global provider: the API's proxy
    assert not is_real(_logs.NoOpLoggerProvider()) and is_real(LoggerProvider())
    h = make_harness()
    with h.agent_run("researcher"):
        for _ in range(6):
            h.call("read_file", {"path": "a.txt"})
    assert h.run_lengths() == [1, 2, 3, 4, 5, 6]
    h.provider.shutdown()


class _Later(_logs.LoggerProvider):
    """A provider that is the no-op one until ``real`` is set: as the global one is, until an SDK one is set."""

    def __init__(self) -> None:
        self.real: _logs.LoggerProvider | None = None

    def get_logger(self, name: str, *args: Any, **kwargs: Any) -> _logs.Logger:
        chosen = self.real or _logs.NoOpLoggerProvider()
        return chosen.get_logger(name, *args, **kwargs)


def test_a_provider_set_later_is_found_within_a_second_and_kept() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    later, now = _Later(), [100.0]
    events = LogEvents(GuardConfig(), later, clock=lambda: now[0])
    context = SpanContext(7, 9, is_remote=False, trace_flags=TraceFlags(1))
    repeat = ("repeat_tool_guard.repeat", {"repeat_tool_guard.run_length": 2})
    events.emit(context, [repeat], None)  # a no-op logger: nothing kept
    later.real = provider
    events.emit(context, [repeat], None)  # within the second: not looked for again
    now[0] += 1.0
    events.emit(context, [repeat], 5)
    later.real = None
    events.emit(context, [repeat], 6)  # kept once found
    events.emit(None, [repeat], 6)  # no context: nothing
    assert [(r[0], r[1], r[2]) for r in _logs_of(exporter)] == [
        ("repeat_tool_guard.repeat", 7, 9),
        ("gen_ai.evaluation.result", 7, 9),
    ] * 2


def test_reminder_outcomes_are_evaluations_of_the_span_that_showed_the_reminder() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    h = make_harness(GuardConfig(thresholds=(3,)), logger_provider=provider)
    shown = []
    for agent, then in (("broke", {"path": "b.txt"}), ("ignored", {"path": "a.txt"}), ("ended", None)):
        with h.agent_run(agent):
            for _ in range(3):
                shown_span = h.call("read_file", {"path": "a.txt"})
            shown.append(shown_span.context.span_id)
            if then is not None:
                h.call("read_file", then)
    outcomes = [
        (r[2], r[3])
        for r in _logs_of(exporter)
        if r[3].get("gen_ai.evaluation.name") == "repeat_tool_guard.reminder_outcome"
    ]
    assert [
        (span_id, e["gen_ai.evaluation.score.label"], e["gen_ai.evaluation.score.value"]) for span_id, e in outcomes
    ] == [
        (shown[0], "broken", 1.0),
        (shown[1], "ignored", 0.0),
        (shown[2], "ended", 0.0),
    ]
    assert all(tuple(e) == FOUR for _, e in outcomes)
    assert outcomes[0][1]["gen_ai.evaluation.explanation"] == (
        "after the gentle repeat reminder, the run's next call was different: the reminder broke the loop"
    )
    h.provider.shutdown()
