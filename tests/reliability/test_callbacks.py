"""Misbehaving callbacks: a raising one is logged and changes nothing else; a slow one holds up
only its own agent's thread, because the guard holds no lock while calling it."""

from __future__ import annotations

import logging
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor


def _call(provider: TracerProvider, agent: str, arguments: str = '{"q": 1}') -> None:
    with provider.get_tracer("t").start_as_current_span("execute_tool grep") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "grep",
                "gen_ai.tool.call.arguments": arguments,
                "gen_ai.agent.id": agent,
            }
        )


def test_a_slow_callback_does_not_block_other_agents() -> None:
    release = threading.Event()
    entered = threading.Event()
    delivered: list[tuple[str, int]] = []

    def slow(reminder: Reminder) -> None:
        delivered.append((reminder.agent_id, reminder.run_length))
        if reminder.agent_id == "slow-agent":
            entered.set()
            release.wait(timeout=30)  # the harness is stuck, e.g. on a network call

    guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=(2, 3)), slow)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    stuck = threading.Thread(target=lambda: [_call(provider, "slow-agent") for _ in range(2)])
    stuck.start()
    assert entered.wait(timeout=10)
    # while that callback blocks, another agent's thread runs its whole loop, reminders included
    other = threading.Thread(target=lambda: [_call(provider, "busy-agent") for _ in range(50)])
    other.start()
    other.join(timeout=10)
    assert not other.is_alive(), "another agent's thread was blocked by a slow callback"
    assert ("busy-agent", 2) in delivered and ("busy-agent", 3) in delivered
    assert guard.run_length("busy-agent") == 50
    guard.reset("slow-agent")  # harness calls also go through while the callback blocks
    assert guard.run_length("slow-agent") == 0
    release.set()
    stuck.join(timeout=10)
    assert not stuck.is_alive()
    assert len(exporter.get_finished_spans()) == 52


def test_a_raising_callback_is_logged_and_later_reminders_still_fire(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def flaky(reminder: Reminder) -> None:
        calls.append(reminder.run_length)
        raise ConnectionError("harness down")

    guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=(2, 3, 4)), flaky)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        for _ in range(5):
            _call(provider, "a")
    assert calls == [2, 3, 4]
    assert caplog.text.count("on_reminder callback raised for agent 'a'") == 3
    spans = exporter.get_finished_spans()
    assert len(spans) == 5
    assert [len(s.events) for s in spans] == [0, 2, 2, 2, 1]  # events are on the spans all the same
