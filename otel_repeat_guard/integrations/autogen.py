"""AutoGen AgentChat 0.7: a model context that adds due reminders to the next model request.

    from otel_repeat_guard.integrations.autogen import RepeatGuardModelContext

    agent = AssistantAgent("weather_agent", model_client, tools=[lookup], max_tool_iterations=10,
                           model_context=RepeatGuardModelContext(guard=guard, inbox=inbox))

``RepeatGuardModelContext(inner, guard=..., inbox=...)`` wraps the agent's own model context
(``inner``, by default an ``UnboundedChatCompletionContext``): it stores and recalls messages
exactly as ``inner`` does. ``AssistantAgent`` calls ``get_messages()`` right before each model
request, inside the run's ``invoke_agent`` span, so the run is found through the span context
there; the due reminders are appended as one ``UserMessage`` after the tool results. That
message goes into that request only: it is never added to ``inner``, so the conversation the
agent keeps holds no reminder. (A memory's ``update_context`` also reads ``get_messages()``,
before a run's first request, when nothing is due yet.)

``max_tool_iterations`` (1 by default) must be above 1 for a model request to follow tool
results within one run. An ``AssistantAgent`` holds one conversation, so give each agent
instance its own context. ``dump_component()`` dumps ``inner``: the guard and inbox are live
objects, not configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

if TYPE_CHECKING:
    _ChatCompletionContext = object
else:
    from autogen_core.model_context import ChatCompletionContext as _ChatCompletionContext

REMINDER_SOURCE = "repeat_guard"
"""The ``source`` of the reminder ``UserMessage`` (the OpenAI client sends it as the message's ``name``)."""


class RepeatGuardModelContext(_ChatCompletionContext):
    """A ``ChatCompletionContext`` around ``inner`` whose ``get_messages()`` ends with the due reminders."""

    def __init__(
        self,
        inner: Any = None,
        *,
        guard: RepeatGuardSpanProcessor | None = None,
        inbox: ReminderInbox | None = None,
    ) -> None:
        self._guard, self._inbox = check_sources(guard, inbox)
        from autogen_core.model_context import ChatCompletionContext, UnboundedChatCompletionContext

        if inner is None:
            inner = UnboundedChatCompletionContext()
        elif not isinstance(inner, ChatCompletionContext):
            raise ValueError(f"inner must be an autogen_core ChatCompletionContext, got {inner!r}")
        self.inner = inner

    async def add_message(self, message: Any) -> None:
        await self.inner.add_message(message)

    async def get_messages(self) -> list[Any]:
        messages: list[Any] = await self.inner.get_messages()
        with due_reminders(self._guard, self._inbox, framework="autogen") as reminders:
            if reminders:
                from autogen_core.models import UserMessage

                return [*messages, UserMessage(content=reminder_message(reminders), source=REMINDER_SOURCE)]
        return messages

    async def clear(self) -> None:
        await self.inner.clear()

    async def save_state(self) -> Mapping[str, Any]:
        state: Mapping[str, Any] = await self.inner.save_state()
        return state

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self.inner.load_state(state)

    def dump_component(self) -> Any:
        return self.inner.dump_component()
