"""Adapters that put the guard's reminders into agent frameworks' next model request.

Each adapter drains, from a :class:`~otel_repeat_guard.ReminderInbox`, the reminders of
the agent run that is about to call the model (matched through the current span, see
:meth:`~otel_repeat_guard.RepeatGuardSpanProcessor.current_agent_id`) and adds them as one
synthetic user message tagged ``<system-reminder>…</system-reminder>``. Tool results are
never edited. Every framework is imported only inside its own module, so the core package
needs none of them:

- :mod:`otel_repeat_guard.integrations.pydantic_ai`: a ``ProcessHistory`` capability.
- :mod:`otel_repeat_guard.integrations.langchain`: an ``AgentMiddleware`` for
  ``langchain.agents.create_agent`` and a ``pre_model_hook`` for LangGraph's
  ``create_react_agent``.
- :mod:`otel_repeat_guard.integrations.openai_agents`: a ``call_model_input_filter`` for
  ``RunConfig``.
"""

from otel_repeat_guard.integrations._common import REMINDER_CLOSE, REMINDER_OPEN, reminder_message, take_reminders

__all__ = ["REMINDER_CLOSE", "REMINDER_OPEN", "reminder_message", "take_reminders"]
