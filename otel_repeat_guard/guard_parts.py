"""Small pieces of the guard's decisions that need no guard state: which detectors a config makes,
a call's outcome, a span's scope, and merging two decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xxhash
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_repeat_guard.canonical import canonical_or_none
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import MISSING, EventLike, failed
from otel_repeat_guard.conventions.genai import AGENT_ID, AGENT_NAME
from otel_repeat_guard.conventions.outcomes import outcome_of
from otel_repeat_guard.detectors import CycleDetector, Detector, NoProgressDetector
from otel_repeat_guard.facts import WRAPS, run_facts
from otel_repeat_guard.recorder import Decision
from otel_repeat_guard.runs import Run


def positive_int(name: str, value: object) -> int:
    """``value``, an option that must be an integer >= 1 (ValueError naming it otherwise)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def model_facts(run: Run, attributes: Mapping[str, Any], wraps: bool = False) -> dict[str, Any]:
    """A model span's run, as its tool spans are keyed: by its own ``gen_ai.agent.id`` when it has one; with
    ``wraps``, that a model call started inside it (``WRAPS``) and its own request is not the run's step, so the
    store keeps the inner call as the model call of this request."""
    agent_id = attributes.get(AGENT_ID)
    if agent_id.__class__ is str and agent_id:
        name = attributes.get(AGENT_NAME)
        facts = run_facts(agent_id, name if name.__class__ is str and name else agent_id)
    else:
        facts = run.facts
    if wraps:
        facts[WRAPS] = True
    return facts


def merge(into: Decision, more: Decision | None) -> None:
    """Add ``more``'s events and reminders to ``into`` (whose facts stand); None adds nothing."""
    if more is None:
        return
    into.events.extend(more.events)
    into.reminders.extend(more.reminders)


def scope_of(span: ReadableSpan | None) -> str:
    """The span's instrumentation scope name, "" when unnamed."""
    scope = None if span is None else span.instrumentation_scope
    return "" if scope is None else scope.name


def detectors_for(config: GuardConfig) -> Callable[[], tuple[Detector, ...]] | None:
    """What makes a run's opt-in detectors, or None when none is configured."""
    cycle, no_progress = config.cycle_thresholds, config.no_progress_thresholds
    if not cycle and not no_progress:
        return None
    period = config.max_cycle_period

    def make() -> tuple[Detector, ...]:
        made: list[Detector] = []
        if cycle:
            made.append(CycleDetector(cycle, period))
        if no_progress:
            made.append(NoProgressDetector(no_progress))
        return tuple(made)

    return make


def outcome_and_key(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[EventLike], error: bool
) -> tuple[Any, bytes | None]:
    """The call's outcome (the error, else the result) and its key; (MISSING, None) when none was recorded."""
    status = span.status
    failed_ = error or status.status_code is StatusCode.ERROR or failed(attributes, events)
    value, is_error = outcome_of(attributes, events, failed_, status.description)
    if value is MISSING:
        return value, None
    canonical = canonical_or_none(value)
    if canonical is None:
        return value, None
    return value, xxhash.xxh3_128_digest((b"E" if is_error else b"R") + canonical)  # an error never equals a result
