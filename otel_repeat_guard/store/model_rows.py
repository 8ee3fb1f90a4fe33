"""The store's rows of model calls and agent runs (:mod:`otel_repeat_guard.store.rows` has the tool calls'): plain
values, no OpenTelemetry import, read from spans by :mod:`otel_repeat_guard.store.records`."""

from __future__ import annotations

from dataclasses import dataclass

from otel_repeat_guard.store.rows import CallRow


@dataclass(frozen=True, slots=True)
class AgentRunRow:
    """An agent-run span: the key the guard gives the tool calls made directly under it."""

    trace_id: str
    span_id: str
    agent_key: str
    agent_name: str | None


@dataclass(frozen=True, slots=True)
class UndeliveredRow:
    """A reminder that did not reach the model call it is on (the guard's ``repeat_tool_guard.undelivered`` event)."""

    reminder_span_id: str
    tool_name: str
    tier: str
    reason: str


@dataclass(frozen=True, slots=True)
class ModelCallRow(CallRow):
    """One model call as the store keeps it (see :mod:`otel_repeat_guard.store.model_calls`)."""

    model: str | None
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    conversation_id: str | None
    error: bool
    output_preview: str | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    undelivered: tuple[UndeliveredRow, ...] = ()
