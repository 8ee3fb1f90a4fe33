"""The store's rows of model calls and agent runs (:mod:`otel_repeat_guard.store.rows` has the tool calls'): plain
values, no OpenTelemetry import, read from spans by :mod:`otel_repeat_guard.store.records`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from otel_repeat_guard.store.rows import duration_between, pending_agent, storable_changes


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
class ModelCallRow:
    """One model call as the store keeps it (see :mod:`otel_repeat_guard.store.model_calls`): a
    :class:`~otel_repeat_guard.store.rows.CallRow`, then the call's own."""

    start_ns: int
    end_ns: int
    service_name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    agent_key: str
    agent_name: str | None
    agent_known: bool
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

    @property
    def duration_ns(self) -> int:
        return duration_between(self.start_ns, self.end_ns)

    @property
    def agent_pending(self) -> bool:
        return pending_agent(self.parent_span_id, self.agent_known, self.agent_name)

    def storable(self) -> ModelCallRow:
        """:meth:`otel_repeat_guard.store.rows.ToolCallRow.storable`, for a model call's row."""
        changes = storable_changes(self, _TEXT_FIELDS, _INT_FIELDS)
        return dataclasses.replace(self, **changes) if changes else self


_TEXT_FIELDS = (
    "service_name",
    "agent_key",
    "agent_name",
    "model",
    "provider",
    "conversation_id",
    "output_preview",
)
_INT_FIELDS = (
    "start_ns",
    "end_ns",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
