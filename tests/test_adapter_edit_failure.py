"""An adapter whose edit of the model request fails sends it unchanged and loses no reminder: the reminders wait
for the run's next request (``due_reminders``, which every framework adapter uses around its edit)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from otel_repeat_guard import GuardConfig, ReminderInbox, RepeatGuardSpanProcessor, RepeatGuardStop
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.integrations import due_reminders

RUN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": '{"q":"x"}'}


class Guarded:
    def __init__(self, config: GuardConfig, inbox: ReminderInbox) -> None:
        self.inbox = inbox
        self.guard = RepeatGuardSpanProcessor(config, on_reminder=inbox.put)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.guard)
        self.tracer: Tracer = self.provider.get_tracer("test")

    def calls(self, count: int) -> None:
        for _ in range(count):
            self.tracer.start_span("execute_tool grep", attributes=TOOL).end()


@pytest.fixture
def g() -> Iterator[Guarded]:
    guarded = Guarded(GuardConfig(thresholds=(2, 3)), ReminderInbox())
    yield guarded
    guarded.provider.shutdown()


def errors_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "otel_repeat_guard" and r.levelno >= logging.ERROR]


def test_a_failed_edit_is_logged_and_its_reminders_ride_the_runs_next_request(
    g: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    request: list[str] = []
    with g.tracer.start_as_current_span("invoke_agent coder", attributes=RUN):
        g.calls(3)
        with due_reminders(g.guard, g.inbox) as reminders:
            assert [r.run_length for r in reminders] == [2, 3]
            texts = [r.text for r in reminders]
            raise AttributeError("'NoneType' object has no attribute 'append'")  # the framework's messages: None
        assert request == []  # the request goes out as it was
        assert errors_of(caplog) == [
            "repeat guard could not add reminders; the model request goes out unchanged, and its 2 reminders wait "
            "for the run's next one"
        ]
        with due_reminders(g.guard, g.inbox) as reminders:
            request.extend(r.text for r in reminders)
    assert request == texts
    assert texts[0].startswith("You have called `grep` with identical arguments 2 times in a row.")
    assert g.inbox.pending() == []


def test_a_block_that_fails_with_nothing_due_only_logs(g: Guarded, caplog: pytest.LogCaptureFixture) -> None:
    with g.tracer.start_as_current_span("invoke_agent coder", attributes=RUN), due_reminders(g.guard, g.inbox) as due:
        assert due == []
        raise KeyError("messages")
    assert errors_of(caplog) == ["repeat guard could not add reminders; the model request goes out unchanged"]
    assert g.inbox.pending() == []


def test_the_stop_tier_still_ends_the_run() -> None:
    guarded = Guarded(GuardConfig(thresholds=(2,), stop_at=3), ReminderInbox())
    with guarded.tracer.start_as_current_span("invoke_agent coder", attributes=RUN):
        guarded.calls(3)
        with pytest.raises(RepeatGuardStop), due_reminders(guarded.guard, guarded.inbox) as reminders:
            assert [r.tier for r in reminders] == ["gentle", "stop"]
            raise RepeatGuardStop(reminders[-1])
    assert guarded.inbox.pending() == []  # a stop is delivered by ending the run, not given back
    guarded.provider.shutdown()


class _NoGivingBack(ReminderInbox):
    def give_back(self, reminders: list[Reminder]) -> None:
        raise RuntimeError("a broken inbox")


def test_an_inbox_that_cannot_take_them_back_never_breaks_the_request(caplog: pytest.LogCaptureFixture) -> None:
    guarded = Guarded(GuardConfig(thresholds=(2,)), _NoGivingBack())
    with guarded.tracer.start_as_current_span("invoke_agent coder", attributes=RUN):
        guarded.calls(2)
        with due_reminders(guarded.guard, guarded.inbox) as reminders:
            assert len(reminders) == 1
            raise TypeError("an odd request")
    assert errors_of(caplog) == [
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one",
        "repeat guard could not keep the reminders for the run's next model request",
    ]
    guarded.provider.shutdown()
