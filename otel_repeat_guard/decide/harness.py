"""What a harness asks the guard between spans, on the span processor: start a chain afresh, drop it, read
its length, carry it between processes, and find the run a model request goes out from. The processor
(:mod:`otel_repeat_guard.processor`) adds the SDK's hooks; the guard (:mod:`otel_repeat_guard.decide.guard`) answers."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor

from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.decision import Decision
from otel_repeat_guard.decide.guard import Guard
from otel_repeat_guard.decide.span_ends import InPlace, Outlets
from otel_repeat_guard.inputs import chain_key, context_or_none

logger = logging.getLogger("otel_repeat_guard")


class HarnessQuestions(SpanProcessor):
    """The harness-facing half of :class:`~otel_repeat_guard.processor.RepeatGuardSpanProcessor`: the state it
    reads is the processor's, set by its constructor."""

    _guard: Guard
    _chains: ChainStore
    _ends: InPlace  # where an ending span is decided and its events go (decide/span_ends.py)
    _outlets: Outlets

    @property
    def config(self) -> GuardConfig:
        return self._guard.config

    def reset(self, agent_id: object) -> None:
        """A user prompt was submitted: start the agent's chain afresh. ``agent_id`` is a chain key (``Reminder.agent_id``)
        or a ``gen_ai.agent.id`` (each open run of it too); not a string (None: no span), it is ignored, as by all three."""
        if (key := chain_key(agent_id)) is not None:
            self._guard.questions.harness("reset", key)

    def forget(self, agent_id: object) -> None:
        """The agent is disposed: drop its state (a chain key, or a ``gen_ai.agent.id`` and its open runs)."""
        if (key := chain_key(agent_id)) is not None:
            self._guard.questions.harness("forget", key)

    def run_length(self, agent_id: object) -> int:
        """The agent's current consecutive count, 0 if none."""
        return 0 if (key := chain_key(agent_id)) is None else self._guard.questions.run_length(key)

    def chain_state(self, agent_id: object) -> list[Any] | None:
        """The chain key's repeat chain as plain values, for a harness that keeps it between processes; None without
        (and for a key that is not a string, as ``run_length`` answers 0)."""
        return None if (key := chain_key(agent_id)) is None else self._chains.chain_state(key)

    def restore_chain(self, agent_id: object, state: object) -> None:
        """Give the chain key what :meth:`chain_state` returned (a shared chain store keeps its own: nothing then).
        A key that is not a string is ignored; a state that is no such value is a TypeError on both builds."""
        if (key := chain_key(agent_id)) is None:
            return
        if not isinstance(state, (list, tuple)) or len(state) != 4 or not isinstance(state[3], (list, tuple)):
            raise TypeError(f"not a chain state (what chain_state returned): {state!r}")
        try:
            self._chains.restore_chain(key, list(state))
        except (TypeError, ValueError) as error:  # a field of the wrong type: the compiled build's words, or Python's
            raise TypeError(f"not a chain state (what chain_state returned): {state!r}") from error

    def current_agent_id(self, context: object = None) -> str | None:
        """The chain key of the current span's agent run (of ``context``), resolved as for a tool span started
        right here (``inbox.drain(guard.current_agent_id())``); None with no current span of this process."""
        return self._guard.questions.current_run(trace.get_current_span(context_or_none(context)))

    def model_call_due(self, context: object = None) -> str | None:
        """A model request is about to go out from the current span (of ``context``): count now what the run's last
        model call requested that no tool span answered, so their reminders are in the inbox before this request
        (their events on the current span); returns the run's chain key."""
        try:
            current = trace.get_current_span(context_or_none(context))
            key, decision = self._guard.questions.model_call_due(current)
            self._guard.deliveries.asked(key)  # an adapter asks: for this run, or (None) for none it could find
            if decision is not None:
                self._record_open(current, None, decision)
        except Exception:
            logger.exception("repeat guard failed to prepare the next model call")
            return None
        return key

    def _record_open(self, span: Any, span_id: int | None, decision: Decision) -> None:
        """A decision about a span still open: its events on it (the public API works; wrapping this provider's
        spans, on the copy handed on at its end), its reminders to the harness."""
        if decision.events:  # none: nothing to put on the span, which may be a recorded one (playback.py)
            self._ends.open_events(span, span_id, decision.events)
        self._outlets.opened(span, decision)
