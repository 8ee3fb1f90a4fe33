"""OpenAI Agents SDK: a ``call_model_input_filter`` that adds due reminders to the next model call.

    from otel_repeat_guard.integrations.openai_agents import repeat_guard_input_filter

    Runner.run(agent, prompt, run_config=RunConfig(call_model_input_filter=repeat_guard_input_filter(
        guard=guard, inbox=inbox)))

The reminder goes into that one model call as a user input item after the tool outputs;
the SDK does not keep filtered input in the run's history. To combine it with a filter of
your own, pass that as ``then``: it receives the data with the reminder already added. At a
``stop`` reminder (``GuardConfig.stop_at``) the run ends: ``Runner.run`` raises
:class:`~otel_repeat_guard.RepeatGuardStop`, which carries the reminder.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import (
    check_sources,
    check_then,
    due_reminders,
    reminder_message,
    stop_if_due,
)
from otel_repeat_guard.processor import RepeatGuardSpanProcessor


def repeat_guard_input_filter(
    *,
    guard: RepeatGuardSpanProcessor | None = None,
    inbox: ReminderInbox | None = None,
    then: Callable[[Any], Any] | None = None,
) -> Callable[[Any], Any]:
    """An async ``CallModelInputFilter``: ``(CallModelData) -> ModelInputData``."""
    guard, inbox = check_sources(guard, inbox)
    check_then(then)
    from agents.run_config import ModelInputData

    async def add_reminders(data: Any) -> Any:
        with due_reminders(guard, inbox, framework="openai-agents") as reminders:
            stop_if_due(reminders)  # the stop tier ends the run: Runner.run raises RepeatGuardStop
            if reminders:
                model_data = data.model_data
                item = {"role": "user", "content": reminder_message(reminders)}
                data.model_data = ModelInputData(input=[*model_data.input, item], instructions=model_data.instructions)
        if then is None:
            return data.model_data
        result = then(data)
        return await result if inspect.isawaitable(result) else result

    return add_reminders
