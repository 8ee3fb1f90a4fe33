"""Framework adapters take the process-wide guard and inbox when not handed their own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry import trace

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor, default_inbox
from otel_repeat_guard.installed import set_installed_guard
from otel_repeat_guard.integrations._common import check_sources, unguarded
from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks


@pytest.fixture
def no_installed_guard() -> Iterator[None]:
    previous = set_installed_guard(None)
    yield
    set_installed_guard(previous)


@pytest.mark.usefixtures("no_installed_guard")
def test_defaults_are_the_installed_guard_and_the_default_inbox() -> None:
    guard = RepeatGuardSpanProcessor()
    set_installed_guard(guard)
    assert check_sources() == (guard, default_inbox())
    own = ReminderInbox()
    assert check_sources(inbox=own) == (guard, own)


@pytest.mark.usefixtures("no_installed_guard")
def test_without_an_installed_guard_adapters_pass_through_and_a_wrong_guard_is_refused() -> None:
    guard, inbox = check_sources()  # no guard to use: one that sees no span, so no run and no reminder
    assert (guard, inbox) == (unguarded(), default_inbox())
    assert guard.model_call_due() is None and guard.current_agent_id() is None
    with pytest.raises(ValueError, match="guard must be a RepeatGuardSpanProcessor, got 'g'"):
        check_sources("g", ReminderInbox())
    with pytest.raises(ValueError, match="inbox must be a ReminderInbox, got 3"):
        check_sources(RepeatGuardSpanProcessor(), 3)


@pytest.mark.usefixtures("no_installed_guard")
def test_the_claude_agent_sdk_hooks_built_with_no_guard_installed_pass_every_call_through() -> None:
    """As every adapter does (docs/operations.md): no ValueError for a missing tracer provider, since there is
    no guard to record spans for; the callbacks answer nothing, and the session goes on unguarded."""
    hooks = RepeatGuardHooks(tracer_provider=trace.NoOpTracerProvider())  # as with no SDK provider set globally
    call = {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t"}
    for _ in range(5):
        assert asyncio.run(hooks.pre_tool_use({**call, "hook_event_name": "PreToolUse"})) == {}
        assert asyncio.run(hooks.post_tool_use({**call, "hook_event_name": "PostToolUse"})) == {}
    with pytest.raises(ValueError, match="tracer_provider must be the SDK TracerProvider the guard is on"):
        RepeatGuardHooks(guard=RepeatGuardSpanProcessor(), tracer_provider=trace.NoOpTracerProvider())
