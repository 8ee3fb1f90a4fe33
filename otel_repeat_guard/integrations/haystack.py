"""Haystack 2.x/3.x ``Agent``: a ``before_llm`` hook that adds due reminders to the next chat-generator call.

    from otel_repeat_guard.integrations.haystack import RepeatGuardHook

    agent = Agent(chat_generator=generator, tools=tools, hooks={"before_llm": [RepeatGuardHook(guard=guard, inbox=inbox)]})

The Agent runs ``before_llm`` hooks before each chat-generator call, on the live ``State``,
while the span of the ``Agent.run`` (an instrumentor's, or Haystack's own) is current, so the
run is found through the span context. Haystack runs tools without spans, so the guard counts
the calls the model asked for at this point (``take_reminders`` lets it first), and the
reminders of the last one are due in this very request. The reminder is appended to
``state["messages"]`` as one user ``ChatMessage``, after the tool results: it stays in the
run's conversation (and in the messages the Agent returns) where it was delivered, once.

Serialized with the Agent (``to_dict``), the hook keeps no guard or inbox: rebuilt with
``from_dict``, it uses the process-wide ones (Haystack's deserialization allowlist must name
``otel_repeat_guard``, e.g. ``HAYSTACK_DESERIALIZATION_ALLOWLIST=otel_repeat_guard``).
"""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor


class RepeatGuardHook:
    """A Haystack Agent hook (``run(state)``, ``run_async(state)``) for the ``before_llm`` hook point."""

    def __init__(self, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
        self._guard, self._inbox = check_sources(guard, inbox)

    def run(self, state: Any) -> None:
        """Append one user message with the run's due reminders to ``state["messages"]``; never raises."""
        with due_reminders(self._guard, self._inbox, framework="haystack") as reminders:
            if not reminders:
                return
            from haystack.dataclasses import ChatMessage

            state.set("messages", [ChatMessage.from_user(reminder_message(reminders))])

    async def run_async(self, state: Any) -> None:
        """As :meth:`run` (it does not block), in the event loop's context."""
        self.run(state)

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{type(self).__module__}.{type(self).__qualname__}", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepeatGuardHook:
        return cls()
