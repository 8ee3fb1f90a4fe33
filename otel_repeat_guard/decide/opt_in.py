"""What the opt-in work (detectors, parallel collapse, reminder outcomes) needs of a call before it is counted."""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.conventions import MISSING
from otel_repeat_guard.conventions.outcomes import outcome_and_key
from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Call
from otel_repeat_guard.decide.decision import CountedCall
from otel_repeat_guard.spans.span_events import end_ns, start_ns


def opt_in(
    chains: ChainStore, config: GuardConfig, counted: CountedCall, awaits: str | None, chained: bytes | None
) -> tuple[Call | None, Any]:
    """What the opt-in work needs before the call is counted: the call as detectors see it (None for
    a parallel duplicate, which is not counted), its outcome (for no-progress detection), and the outcome
    of reminders waiting for it. A call whose outcome was not recorded awaits it under its call id
    ``awaits``, from the run's next model request. ``chained`` is the key its run's chain compares (its arguments'
    key, with its result's digest under ``progress: results``)."""
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
        chains.settle(counted.run.key, tool, chained, call)  # what the run's last reminders led to: the metric
    return call, outcome
