"""The Claude Code command hook's fast path: a call counted and stored without spans or OpenTelemetry.

A hook process lives for one event; building the SDK, a processor and a span for it cost ten times Python's own
start. Where nothing asks for spans (no collector, no shared store, nothing opt-in: :func:`needs_spans`), the
call is decided by the pieces the guard itself decides with, in the order the guard's tool path
(:meth:`~otel_repeat_guard.decide.guard.Guard.tool_call`) applies them to the ``execute_tool`` span the span path
would make (:func:`~otel_repeat_guard.integrations._claude.tool_attributes`):

- the same tool filter (:class:`~otel_repeat_guard.core.patterns.ToolFilter` of the configuration);
- the arguments' key (:func:`~otel_repeat_guard.core.canonical.arguments_key` of the span's arguments text, the
  same bytes read without msgspec: :mod:`~otel_repeat_guard.integrations._claude_keys`);
- the chain (:class:`~otel_repeat_guard.core.chains.ChainTracker`: the reminders waiting for this call settled,
  the call observed, a reminder that fires remembered);
- the reminder's tier and text (:mod:`otel_repeat_guard.core.reminders`, as the recorder words them).

The store gets the row :func:`~otel_repeat_guard.store.records.tool_call_row` reads from that span, facts
included (:mod:`otel_repeat_guard.store.rows`), written by the exporter's own transaction
(:func:`~otel_repeat_guard.store.batch.write_batch`). ``tests/integrations/test_claude_hook_fast_path.py`` holds
the two paths equal, row for row and answer for answer.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

from otel_repeat_guard.core.chains import ChainTracker
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Call
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.policy import NONE
from otel_repeat_guard.core.reminders import SEED, Reminder, arguments_preview, repeat_text, shown_preview, tiers_of
from otel_repeat_guard.integrations._claude import call_times, failure_of, service_name, tool_attributes
from otel_repeat_guard.integrations._claude_deciders import Counted
from otel_repeat_guard.integrations._claude_keys import (
    arguments_digest,
    arguments_key,
    canonical_arguments,
    canonical_or_none,
)
from otel_repeat_guard.store.rows import REPEAT, DetectionRow, ToolCallRow

ARGUMENTS = "gen_ai.tool.call.arguments"
NO_ARGUMENTS = "no_arguments"
""":data:`otel_repeat_guard.decide.blind_spots.NO_ARGUMENTS` (that module imports OpenTelemetry; a test holds them
equal): the reason stored for a tracked call whose input has no ``tool_input``."""
OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


def to_collector(environ: Mapping[str, str]) -> bool:
    """Whether the environment sends spans to a collector (then the hook makes them)."""
    return any(environ.get(name) for name in OTLP_VARIABLES)


def needs_spans(config: GuardConfig, environ: Mapping[str, str]) -> bool:
    """Whether a hook call takes the span path: spans to export, the chains in a shared store (Redis: the guard's
    own store keeps them), or anything opt-in (detectors, parallel collapse, a policy per tool, progress by
    results, a wording other than the seed's), which the guard's general body decides. Else the fast path, the guard's plain case."""
    detectors = config.cycle_thresholds or config.no_progress_thresholds or config.collapse_parallel
    worded = config.reminder_style != SEED or config.reminder_variants  # the recorder words and draws variants
    opt_in = bool(detectors or config.tools or config.progress != NONE or worded)
    return to_collector(environ) or config.shared_store or opt_in


class RowDecider:
    """Decides a hook call's tool calls in one chain and keeps their store rows: the span path's guard, without
    spans. Made per hook call, like the span path's guard (``_claude_state``)."""

    __slots__ = ("_chains", "_config", "_reminders", "_service", "_tiers", "_trace_id", "_tracked", "rows")

    def __init__(self, config: GuardConfig, session_id: str, environ: Mapping[str, str]) -> None:
        self._config = config
        self._chains = ChainTracker(1_000)
        self._tracked = ToolFilter(config.include, config.exclude)
        self._tiers = tiers_of(config.thresholds, config.stop_at)
        self._reminders: list[Reminder] = []
        self._service = service_name(environ)
        try:  # as the span path's trace ids: the session's UUID, else a random one per call
            self._trace_id = uuid.UUID(session_id).int or None
        except ValueError:
            self._trace_id = None
        self.rows: list[ToolCallRow] = []

    def restore_chain(self, key: str, state: list[Any]) -> None:
        self._chains.restore_chain(key, state)

    def chain_state(self, key: str) -> list[Any] | None:
        return self._chains.chain_state(key)

    def counted(self, key: str) -> Counted:
        """The reminders of the calls counted so far, in order, and their rows."""
        return Counted(list(self._reminders), list(self.rows))

    def count(self, hook_input: Mapping[str, Any], key: str, end: int | None = None) -> None:
        """Count one tool call of the chain ``key`` (ended at ``end``, ns since the epoch; None: now), as the guard
        counts its ``execute_tool`` span, and keep its row."""
        attributes = tool_attributes(hook_input, key)
        tool = str(attributes["gen_ai.tool.name"])
        arguments = attributes.get(ARGUMENTS)
        tracked = self._tracked[tool]
        run_length = None
        digest = tier = threshold = unguarded = None
        if tracked:
            found = None if arguments is None else arguments_key(arguments)
            if self._chains.pending:  # what the chain's last reminders led to (the guard's opt-in step)
                self._chains.settle(key, tool, found, Call(tool, found, None, None))
            run_length = self._chains.observe(key, tool, found)
            if arguments is None:
                unguarded = NO_ARGUMENTS
            elif found is not None and run_length >= 2:
                digest = found.hex()
                tier = self._tiers.get(run_length)
                if tier is not None:
                    threshold = run_length
                    self._remind(attributes, key, run_length, tier)
        start, end = call_times(hook_input, end)
        canonical = None if arguments is None else canonical_or_none(arguments)
        if canonical is not None:
            digest = digest or arguments_digest(canonical)
        preview_chars = self._config.arguments_preview_chars
        trace_id = self._trace_id if self._trace_id is not None else _random_id(16)
        row = ToolCallRow(
            start_ns=start,
            end_ns=end,
            service_name=self._service,
            trace_id=f"{trace_id:032x}",
            span_id=f"{_random_id(8):016x}",
            parent_span_id=None,
            agent_key=key,
            agent_name=str(attributes["gen_ai.agent.name"]),
            agent_known=True,
            tool_name=tool,
            tracked=tracked,
            arguments_digest=digest,
            arguments_preview=(
                None
                if canonical is None
                else arguments_preview(canonical.decode("utf-8", "surrogatepass"), preview_chars)
            ),
            error=failure_of(hook_input) is not None,
            run_length=run_length,
            reminder_tier=tier,
            reminder_threshold=threshold,
            unguarded_reason=unguarded,
            detections=_detections(run_length, tier, threshold),
            decided=True,
        )
        self.rows.append(row.storable())

    def _remind(self, attributes: Mapping[str, Any], key: str, run_length: int, tier: Any) -> None:
        """The reminder of a repeat that reached a tier, worded as the recorder words it; the chain waits for its
        outcome."""
        tool = str(attributes["gen_ai.tool.name"])
        preview = shown_preview(canonical_arguments(attributes[ARGUMENTS]), self._config.arguments_preview_chars)
        text = repeat_text(tier, tool, run_length, preview)
        reminder = Reminder(
            agent_id=key,
            agent_name=str(attributes["gen_ai.agent.name"]),
            tool_name=tool,
            run_length=run_length,
            threshold=run_length,
            tier=tier,
            text=text,
            arguments_preview=preview,
            trace_id="0" * 32,
            span_id="0" * 16,
        )
        self._reminders.append(reminder)
        self._chains.reminded(key, "repeat", tier, 1)


def _detections(run_length: int | None, tier: str | None, threshold: int | None) -> tuple[DetectionRow, ...]:
    if run_length is None or run_length < 2:
        return ()
    return (DetectionRow(REPEAT, run_length=run_length, reminder_tier=tier, reminder_threshold=threshold),)


def _random_id(size: int) -> int:
    """A random trace (16 bytes) or span (8 bytes) id, never 0 (the invalid id), as the SDK's generator makes them."""
    return int.from_bytes(os.urandom(size), "big") or 1
