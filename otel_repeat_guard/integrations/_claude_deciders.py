"""Who decides the calls one Claude Code hook call counts: the guard on spans (:class:`SpanDecider`, the span path),
or the fast path's :class:`~otel_repeat_guard.integrations._claude_rows.RowDecider`; both answer as a
:class:`Decider`, whichever store keeps the chains between hook processes
(:mod:`otel_repeat_guard.integrations._claude_state`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.integrations._claude import record_call, service_name

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol


class Counted:
    """What one hook call counted: the reminders due now, and what to export of its calls (spans on the span
    path, store rows on the fast path). A plain class, as the :class:`Decider` protocol is the type checker's only:
    a ``NamedTuple``'s or a ``Protocol``'s definition cost each hook call about a hundredth of it."""

    __slots__ = ("reminders", "spans")

    def __init__(self, reminders: list[Reminder], spans: Sequence[Any]) -> None:
        self.reminders = reminders
        self.spans = spans


if TYPE_CHECKING:

    class Decider(Protocol):
        """Decides the calls one hook call counts in a chain: the guard on spans (:class:`SpanDecider`), or the fast
        path's :class:`~otel_repeat_guard.integrations._claude_rows.RowDecider` (no spans, no OpenTelemetry)."""

        def restore_chain(self, key: str, state: list[Any]) -> None: ...

        def chain_state(self, key: str) -> list[Any] | None: ...

        def count(self, hook_input: Mapping[str, Any], key: str, end: int | None = None) -> None: ...

        def counted(self, key: str) -> Counted: ...

    Deciders = Callable[[GuardConfig, str], Decider]
    """Makes the :class:`Decider` of one hook call, from the guard's configuration and the session id."""


class SpanDecider:
    """The span path: a guard in this process decides on each call's ``execute_tool`` span, which is exported."""

    def __init__(self, config: GuardConfig, session_id: str) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from otel_repeat_guard.decide.inbox import ReminderInbox
        from otel_repeat_guard.processor import RepeatGuardSpanProcessor

        self._inbox = ReminderInbox()
        self.guard = RepeatGuardSpanProcessor(config, self._inbox.put, record_facts=True)
        resource = Resource.create({"service.name": service_name(os.environ)})  # the fast path's, on any SDK
        provider = TracerProvider(id_generator=session_trace_ids(session_id), resource=resource)
        provider.add_span_processor(self.guard)
        self._spans = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(self._spans))
        self._tracer = provider.get_tracer("otel_repeat_guard.integrations.claude_code_hook")

    def restore_chain(self, key: str, state: list[Any]) -> None:
        self.guard.restore_chain(key, state)

    def chain_state(self, key: str) -> list[Any] | None:
        return self.guard.chain_state(key)

    def count(self, hook_input: Mapping[str, Any], key: str, end: int | None = None) -> None:
        from opentelemetry.context import Context

        record_call(self._tracer, hook_input, key, Context(), end=end)

    def counted(self, key: str) -> Counted:
        return Counted(self._inbox.drain(key), self._spans.get_finished_spans())


def session_trace_ids(session_id: str) -> Any:
    """Every span of a session in one trace: its id is the session's UUID (random when it is none)."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class SessionTraceIds(RandomIdGenerator):
        def __init__(self, trace_id: int | None) -> None:
            self._trace_id = trace_id

        def generate_trace_id(self) -> int:
            return self._trace_id if self._trace_id is not None else super().generate_trace_id()

    try:
        trace_id: int | None = uuid.UUID(session_id).int or None
    except ValueError:
        trace_id = None
    return SessionTraceIds(trace_id)
