"""smolagents: a model wrapper that adds due reminders to the agent's next model request.

    from otel_repeat_guard.integrations.smolagents import RepeatGuardModel

    agent = ToolCallingAgent(tools=tools, model=RepeatGuardModel(model, guard=guard, inbox=inbox))

smolagents has no pre-model-request hook. Its step callbacks run when a step ends, *before*
the agent appends that step to ``agent.memory``, so a message a callback adds to the memory
lands before the step's own tool results. The one place every request of the agent passes
through is its ``Model``, so the adapter wraps it: before each ``generate`` (and
``generate_stream``) it finds the agent run through the current span (OpenInference's
``Step N`` span, under the run's AGENT span), drains that run's reminders and passes the
messages on with one more ``ChatMessage`` (role ``user``) of ``<system-reminder>`` blocks
after the ``Observation:`` messages. The list smolagents passed in (which it also keeps as
the step's ``model_input_messages``) is not edited, and the memory never holds the reminder:
it is in that one request. When the model builds the provider request, smolagents merges
consecutive user messages (tool responses are user messages to it), so on the wire the
reminder text follows the observation text in one user message, as smolagents' own
``Now let's retry`` texts do. Everything else (``model_id``, ``parse_tool_calls``,
``to_dict``...) is the wrapped model's. Tested with ``smolagents`` 1.26.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor


def with_reminders(messages: Any, guard: RepeatGuardSpanProcessor, inbox: ReminderInbox) -> Any:
    """``messages`` with the current run's due reminders as one more user message, or ``messages`` itself."""
    with due_reminders(guard, inbox, framework="smolagents") as reminders:
        if reminders:
            from smolagents.models import ChatMessage, MessageRole

            text = reminder_message(reminders)
            return [*messages, ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": text}])]
    return messages


class RepeatGuardModel:
    """A smolagents model (``generate``, ``generate_stream``, ``__call__``) that delivers reminders.

    Wraps any smolagents ``Model``; every other attribute is the wrapped model's.
    """

    def __init__(
        self, model: Any, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
    ) -> None:
        if not callable(getattr(model, "generate", None)):
            raise ValueError(f"model must be a smolagents Model (with generate()), got {model!r}")
        self.wrapped_model = model
        self._guard, self._inbox = check_sources(guard, inbox)

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.wrapped_model.generate(with_reminders(messages, self._guard, self._inbox), *args, **kwargs)

    def __call__(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.generate(messages, *args, **kwargs)

    def _stream(self, generate_stream: Callable[..., Any]) -> Callable[..., Any]:
        def stream(messages: Any, *args: Any, **kwargs: Any) -> Any:
            return generate_stream(with_reminders(messages, self._guard, self._inbox), *args, **kwargs)

        return stream

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not define; agents test hasattr(model, "generate_stream").
        if name.startswith("__") or name in {"wrapped_model", "_guard", "_inbox"}:
            raise AttributeError(name)
        value = getattr(self.wrapped_model, name)
        return self._stream(value) if name == "generate_stream" else value

    def __repr__(self) -> str:
        return f"RepeatGuardModel({self.wrapped_model!r})"
