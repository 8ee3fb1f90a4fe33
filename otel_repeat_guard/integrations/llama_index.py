"""LlamaIndex agents (``llama_index.core.agent.workflow``): reminders into the next LLM call.

    from otel_repeat_guard.integrations.llama_index import RepeatGuardFunctionAgent, RepeatGuardReActChatFormatter

    agent = RepeatGuardFunctionAgent(tools=tools, llm=llm, guard=guard, inbox=inbox)  # a FunctionAgent
    agent = ReActAgent(tools=tools, llm=llm, formatter=RepeatGuardReActChatFormatter(guard=guard, inbox=inbox))

LlamaIndex has no pre-LLM-call hook; each agent builds its LLM input in its own extension point:

- ``FunctionAgent``: ``take_step`` (the method a workflow agent implements, one LLM call each)
  sends the memory's messages followed by the run's scratchpad (its tool calls and results).
  :class:`RepeatGuardFunctionAgent` overrides it to append one user ``ChatMessage`` of
  ``<system-reminder>`` blocks to the scratchpad first, after the tool results. The reminder
  PERSISTS: it stays in the run's conversation where it was delivered, once, and goes to the
  memory with the rest of the scratchpad when the run ends. (With ``initial_tool_choice`` set,
  FunctionAgent forces that tool whenever the last message is a user message, so also after
  a reminder.)
- ``ReActAgent``: its ``formatter`` (a ``ReActChatFormatter``) turns the history and the reasoning
  (``Observation:`` user messages for tool results) into the LLM input.
  :class:`RepeatGuardReActChatFormatter` adds the user message after them, in that call only.

The run is found through the span context at that moment (the instrumentation's
``run_agent_step`` span, under the run's span), so concurrent runs of one agent object each get
their own reminders. Tested with ``llama-index-core`` 0.14 (workflow agents, ``ctx.store``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

if TYPE_CHECKING:  # what the adapters use of their bases

    class _FunctionAgent:
        scratchpad_key: str

        def __init__(self, **kwargs: Any) -> None: ...

        async def take_step(self, ctx: Any, llm_input: list[Any], tools: Sequence[Any], memory: Any) -> Any: ...

    class _ReActChatFormatter:
        def __init__(self, **fields: Any) -> None: ...

        def format(self, tools: Sequence[Any], chat_history: list[Any], current_reasoning: Any = None) -> list[Any]: ...

else:
    from llama_index.core.agent.react.formatter import ReActChatFormatter as _ReActChatFormatter
    from llama_index.core.agent.workflow import FunctionAgent as _FunctionAgent
    from llama_index.core.bridge.pydantic import PrivateAttr


class _Sources:
    """The guard and inbox of an agent or formatter: shared, never copied (pydantic deep-copies private attributes)."""

    __slots__ = ("guard", "inbox")

    def __init__(self, guard: object, inbox: object) -> None:
        self.guard, self.inbox = check_sources(guard, inbox)

    def __copy__(self) -> _Sources:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sources:
        return self


def _due(sources: _Sources) -> AbstractContextManager[list[Reminder]]:
    return due_reminders(sources.guard, sources.inbox, framework="llama-index")


def _chat_message(reminders: list[Reminder]) -> Any:
    """One user ``ChatMessage`` of ``reminders``."""
    from llama_index.core.llms import ChatMessage, MessageRole

    return ChatMessage(role=MessageRole.USER, content=reminder_message(reminders))


class RepeatGuardFunctionAgent(_FunctionAgent):
    """A ``FunctionAgent`` that adds due reminders to its scratchpad before each LLM call.

    Takes FunctionAgent's arguments, plus ``guard`` and ``inbox``.
    """

    if not TYPE_CHECKING:
        _repeat_guard = PrivateAttr(default=None)

    def __init__(
        self, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None, **kwargs: Any
    ) -> None:
        sources = _Sources(guard, inbox)
        super().__init__(**kwargs)
        self._repeat_guard = sources

    async def take_step(self, ctx: Any, llm_input: list[Any], tools: Sequence[Any], memory: Any) -> Any:
        with _due(self._repeat_guard) as reminders:
            if reminders:
                scratchpad = await ctx.store.get(self.scratchpad_key, default=[])
                await ctx.store.set(self.scratchpad_key, [*scratchpad, _chat_message(reminders)])
        return await super().take_step(ctx, llm_input, tools, memory)


class RepeatGuardReActChatFormatter(_ReActChatFormatter):
    """A ``ReActChatFormatter`` that ends the LLM input with the due reminders, as one user message.

    Takes ReActChatFormatter's fields (``system_header``, ``context``, ``observation_role``),
    plus ``guard`` and ``inbox``.
    """

    if not TYPE_CHECKING:
        _repeat_guard = PrivateAttr(default=None)

    def __init__(
        self, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None, **fields: Any
    ) -> None:
        sources = _Sources(guard, inbox)
        super().__init__(**fields)
        self._repeat_guard = sources

    def format(self, tools: Sequence[Any], chat_history: list[Any], current_reasoning: Any = None) -> list[Any]:
        messages: list[Any] = super().format(tools, chat_history, current_reasoning)
        with _due(self._repeat_guard) as reminders:
            if reminders:
                return [*messages, _chat_message(reminders)]
        return messages
