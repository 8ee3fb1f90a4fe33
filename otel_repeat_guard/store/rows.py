"""The store's rows, as :mod:`otel_repeat_guard.store.records` reads them from spans and
:mod:`otel_repeat_guard.store.writes` writes them: plain values, no OpenTelemetry import, so a writer that has no
spans (the Claude Code command hook, :mod:`otel_repeat_guard.integrations._claude_rows`) builds the same rows.
Here the tool calls' rows; the model calls' and agent runs' in :mod:`otel_repeat_guard.store.model_rows`, which
that hook never makes (each frozen dataclass costs its process about half a millisecond to define)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from otel_repeat_guard.store.storable import storable_int, storable_text

UNKNOWN_SERVICE = "unknown_service"


@dataclass(frozen=True, slots=True)
class CallRow:
    """What a tool call and a model call have in common: when, where, and the agent run they belong to."""

    start_ns: int
    end_ns: int
    service_name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    agent_key: str
    agent_name: str | None
    agent_known: bool

    @property
    def duration_ns(self) -> int:
        return storable_int(max(0, self.end_ns - self.start_ns))

    @property
    def agent_pending(self) -> bool:
        """Whether the parent agent-run span may still supply this call's agent key or name."""
        return self.parent_span_id is not None and (not self.agent_known or self.agent_name is None)


REPEAT, CYCLE, NO_PROGRESS, PARALLEL_DUPLICATE = "repeat", "cycle", "no_progress", "parallel_duplicate"
LOOP_KINDS = (REPEAT, CYCLE, NO_PROGRESS, PARALLEL_DUPLICATE)
"""The kinds of detection the store records, one ``detections`` row per tool call and kind."""


@dataclass(frozen=True, slots=True)
class DetectionRow:
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


@dataclass(frozen=True, slots=True)
class ToolCallRow(CallRow):
    """One tool call as the store keeps it. ``reminder_tier`` and ``reminder_threshold`` are the repeat
    reminder's (as before detections by kind); ``detections`` holds every kind, repeats included."""

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
_MODEL_TEXT_FIELDS = (
    "service_name",
    "agent_key",
    "agent_name",
    "model",
    "provider",
    "conversation_id",
    "output_preview",
)
_MODEL_INT_FIELDS = (
    "start_ns",
    "end_ns",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


Row = TypeVar("Row", bound=CallRow)
"""A :class:`ToolCallRow` or a :class:`~otel_repeat_guard.store.model_rows.ModelCallRow`."""


def storable(row: Row) -> Row:
    """The row with every value SQLite can hold, as the store documents: text with U+FFFD for lone
    surrogates, integers clamped to 64 bits. Nearly every row is returned as it is."""
    changes: dict[str, Any] = {}
    text_fields, int_fields = (
        (_TEXT_FIELDS, _INT_FIELDS) if isinstance(row, ToolCallRow) else (_MODEL_TEXT_FIELDS, _MODEL_INT_FIELDS)
    )
    for field in text_fields:
        value = getattr(row, field)
        if value is not None and storable_text(value) is not value:
            changes[field] = storable_text(value)
    for field in int_fields:
        value = getattr(row, field)
        if value is not None and storable_int(value) != value:
            changes[field] = storable_int(value)
    return dataclasses.replace(row, **changes) if changes else row
