"""Small pieces of the guard's decisions that need no guard state of their own: which detectors a config
makes, a call's outcome and its opt-in reading, a span's scope, and merging two decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xxhash
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_repeat_guard.conventions import MISSING, EventLike, RawToolCall, SpanRouter, failed
from otel_repeat_guard.conventions.base import gen_ai_agent
from otel_repeat_guard.conventions.outcomes import outcome_of
from otel_repeat_guard.core.canonical import canonical_or_none
from otel_repeat_guard.core.chains import ChainStore, ChainTracker
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Call, CycleDetector, Detector, NoProgressDetector
from otel_repeat_guard.core.facts import WRAPPER
from otel_repeat_guard.decide.metrics import GuardMetrics
from otel_repeat_guard.decide.recorder import CountedCall, Decision
from otel_repeat_guard.inputs import checked_callable, positive_int
from otel_repeat_guard.spans.agents import run_of_agent
from otel_repeat_guard.spans.runs import Run
from otel_repeat_guard.spans.span_events import end_ns, start_ns
from otel_repeat_guard.state.redis import RedisChainStore


def checked_options(
    config: object, redact: object, audit: object, max_agents: object, max_live_spans: object
) -> tuple[int, int]:
    """The guard's options checked (ValueError naming the one that is wrong): its two bounds, as integers."""
    if not isinstance(config, GuardConfig):
        raise ValueError(f"config must be a GuardConfig, got {config!r}")
    checked_callable("redact", redact)
    checked_callable("audit", audit)
    return positive_int("max_agents", max_agents), positive_int("max_live_spans", max_live_spans)


def model_facts(run: Run, attributes: Mapping[str, Any], wrapper: bool = False) -> dict[str, Any]:
    """A model span's run (``run``, resolved through its ancestors), as its tool spans are keyed: by its own
    ``gen_ai.agent.id`` when it has one and no run of that agent encloses it; and ``WRAPPER`` when it only
    wraps the model call of record (see :data:`otel_repeat_guard.core.facts.WRAPPER`)."""
    agent_id, name = gen_ai_agent(attributes)  # as a tool span's are read
    if agent_id is not None:
        run = run_of_agent(run, agent_id, name)
    facts = run.facts
    if wrapper:
        facts[WRAPPER] = True
    return facts


def open_tool_reader(router: SpanRouter) -> Callable[[str, dict[str, Any]], RawToolCall | None]:
    """An open span's tool call, if it is a tool span by what it carries so far (its events are not read)."""
    readers = tuple(router.tool_reader(mask) for mask in range(router.tool_bits + 1))

    def read(name: str, attributes: dict[str, Any]) -> RawToolCall | None:
        reader = readers[router.route(name, attributes) & router.tool_bits]
        return None if reader is None else reader(name, attributes, ())

    return read


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


def chain_store(
    config: GuardConfig,
    max_agents: int,
    metrics: GuardMetrics,
    detectors: Callable[[], tuple[Detector, ...]] | None,
    meter_provider: MeterProvider | None,
) -> ChainStore:
    """The runs' chains: in this process, or with ``shared_store`` in Redis (this process's the fallback)."""
    if config.shared_store:
        return RedisChainStore.from_config(
            config,
            max_agents,
            metrics.run_ended,
            detectors=detectors,
            on_reminder_outcome=metrics.reminder_outcome,
            meter_provider=meter_provider,
        )
    return ChainTracker(
        max_agents, metrics.run_ended, detectors=detectors, on_reminder_outcome=metrics.reminder_outcome
    )


def outcome_and_key(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[EventLike], error: bool
) -> tuple[Any, bytes | None]:
    """The call's outcome (the error, else the result) and its key; (MISSING, None) when none was recorded."""
    status = span.status
    failed_ = error or status.status_code is StatusCode.ERROR or failed(attributes, events)
    value, is_error = outcome_of(attributes, events, failed_, status.description)
    return value, (None if value is MISSING else outcome_digest(value, is_error))


def outcome_digest(value: Any, is_error: bool = False) -> bytes | None:
    """What no-progress detection compares of an outcome; None for a value with no canonical form."""
    canonical = canonical_or_none(value)
    if canonical is None:
        return None
    return xxhash.xxh3_128_digest((b"E" if is_error else b"R") + canonical)  # an error never equals a result


def opt_in(
    chains: ChainStore, config: GuardConfig, counted: CountedCall, awaits: str | None = None
) -> tuple[Call | None, Any]:
    """What the opt-in work needs before the call is counted: the call as detectors see it (None for
    a parallel duplicate, which is not counted), its outcome (for no-progress detection), and the outcome
    of reminders waiting for it. A call whose outcome was not recorded awaits it under its call id
    ``awaits``, from the run's next model request."""
    span, tool, key = counted.span, counted.tool, counted.key
    outcome = outcome_key = None
    if config.no_progress_thresholds:
        if span is not None:
            outcome, outcome_key = outcome_and_key(span, counted.attributes, counted.events, counted.error)
        if span is not None and outcome is not MISSING:
            awaits = None  # recorded on its span: nothing to wait for
    else:
        awaits = None
    call = Call(tool, key, outcome_key, awaits)
    if config.collapse_parallel and span is not None and key is not None:
        parent = span.parent.span_id if span.parent is not None else None
        if chains.parallel_duplicate(counted.run.key, call, parent, start_ns(span), end_ns(span)):
            return None, outcome
    if chains.pending:
        chains.settle(counted.run.key, tool, key, call)  # what the run's last reminders led to: the metric
    return call, outcome
