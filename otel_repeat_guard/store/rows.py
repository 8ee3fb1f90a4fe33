"""The store's rows, as :mod:`otel_repeat_guard.store.records` reads them from spans and
:mod:`otel_repeat_guard.store.writes` writes them: plain values, no OpenTelemetry import, so a writer that has no
spans (the Claude Code command hook, :mod:`otel_repeat_guard.integrations._claude_rows`) builds the same rows.
Here the tool calls' rows; the model calls' and agent runs' in :mod:`otel_repeat_guard.store.model_rows`, which
that hook never makes. The tool calls' rows are named tuples: that hook defines them in every call, and a frozen
dataclass of this size cost it about a millisecond to define, a named tuple a fifth of that."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from otel_repeat_guard.store.storable import storable_int, storable_text

UNKNOWN_SERVICE = "unknown_service"


class CallRow(Protocol):
    """What a tool call's row and a model call's row have in common (their first nine fields, in this order): when,
    where, and the agent run they belong to."""

    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def service_name(self) -> str: ...
    @property
    def trace_id(self) -> str: ...
    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str | None: ...
    @property
    def agent_key(self) -> str: ...
    @property
    def agent_name(self) -> str | None: ...
    @property
    def agent_known(self) -> bool: ...
    @property
    def duration_ns(self) -> int: ...
    @property
    def agent_pending(self) -> bool:
        """Whether the parent agent-run span may still supply this call's agent key or name."""


def duration_between(start_ns: int, end_ns: int) -> int:
    """A call's :attr:`CallRow.duration_ns`."""
    return storable_int(max(0, end_ns - start_ns))


def pending_agent(parent_span_id: str | None, agent_known: bool, agent_name: str | None) -> bool:
    """A call's :attr:`CallRow.agent_pending`."""
    return parent_span_id is not None and (not agent_known or agent_name is None)


REPEAT, CYCLE, NO_PROGRESS, PARALLEL_DUPLICATE = "repeat", "cycle", "no_progress", "parallel_duplicate"
LOOP_KINDS = (REPEAT, CYCLE, NO_PROGRESS, PARALLEL_DUPLICATE)
"""The kinds of detection the store records, one ``detections`` row per tool call and kind."""


class DetectionRow(NamedTuple):
    """One detection on a tool call: its kind, its numbers, and the reminder of that kind if the call fired one.

    ``run_length`` is the number of calls the detection spans so far, as the guard's ``Reminder`` counts it:
    the run of identical calls (repeat), the calls of the cycle's complete copies (``period`` x
    ``repetitions``), the same-outcome calls (no progress); None for a parallel duplicate.
    """

    kind: str
    run_length: int | None = None
    period: int | None = None
    repetitions: int | None = None
    cycle_tools: str | None = None  # JSON array of the cycle's tools, in order
    outcome_digest: str | None = None
    reminder_tier: str | None = None
    reminder_threshold: int | None = None


class ToolCallRow(NamedTuple):
    """One tool call as the store keeps it: a :class:`CallRow`, then the call's own. ``reminder_tier`` and
    ``reminder_threshold`` are the repeat reminder's (as before detections by kind); ``detections`` holds every
    kind, repeats included."""

    start_ns: int
    end_ns: int
    service_name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    agent_key: str
    agent_name: str | None
    agent_known: bool
    tool_name: str
    tracked: bool
    arguments_digest: str | None
    arguments_preview: str | None
    error: bool
    run_length: int | None
    reminder_tier: str | None
    reminder_threshold: int | None
    unguarded_reason: str | None = None
    detections: tuple[DetectionRow, ...] = ()
    issuer_span_id: str | None = None
    """The model call that asked for this call, as the guard decided it (:data:`otel_repeat_guard.core.facts.ISSUER`)."""
    charges_issuer: bool = False
    """The guard charged the issuer's tokens as wasted on this call (each model call on one call)."""
    decided: bool = False
    """The guard's facts were on the span: the run, issuer and charge are its, not the store's guesses."""
    reminder_variant: str | None = None
    """The wording variant of the repeat reminder (:data:`otel_repeat_guard.core.facts.VARIANT`), while an experiment runs."""

    @property
    def duration_ns(self) -> int:
        return duration_between(self.start_ns, self.end_ns)

    @property
    def agent_pending(self) -> bool:
        return pending_agent(self.parent_span_id, self.agent_known, self.agent_name)

    def storable(self) -> ToolCallRow:
        """The row with every value SQLite can hold, as the store documents: text with U+FFFD for lone
        surrogates, integers clamped to 64 bits. Nearly every row is returned as it is."""
        changes = storable_changes(self, _TEXT_FIELDS, _INT_FIELDS)
        return self._replace(**changes) if changes else self

    @property
    def in_loop(self) -> bool:
        """Whether the call repeats another or belongs to a detected cycle or no-progress run: its issuing
        model call is wasted (a parallel duplicate is not: the same model call also asked for the original)."""
        repeated = self.run_length is not None and self.run_length >= 2
        return repeated or any(d.kind in (CYCLE, NO_PROGRESS) for d in self.detections)


_TEXT_FIELDS = (
    "service_name",
    "agent_key",
    "agent_name",
    "tool_name",
    "arguments_preview",
    "reminder_tier",
    "reminder_variant",
)
_INT_FIELDS = ("start_ns", "end_ns", "run_length", "reminder_threshold")


def storable_changes(row: object, text_fields: tuple[str, ...], int_fields: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``row`` to change for its ``storable()`` (a tool call's or a model call's row), with their
    storable values."""
    changes: dict[str, Any] = {}
    for field in text_fields:
        value = getattr(row, field)
        if value is not None and storable_text(value) is not value:
            changes[field] = storable_text(value)
    for field in int_fields:
        value = getattr(row, field)
        if value is not None and storable_int(value) != value:
            changes[field] = storable_int(value)
    return changes
