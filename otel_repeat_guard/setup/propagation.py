"""Putting the run's baggage entry (:data:`~otel_repeat_guard.spans.baggage.RUN_BAGGAGE_KEY`) in outgoing headers.

Two ways, both resolving the run of the current span with a guard (default: the installed one):

- :class:`RunBaggagePropagator`, a propagator that resolves the run when the headers are injected
  (``OTEL_PROPAGATORS=tracecontext,baggage,repeat_tool_guard`` or
  ``set_global_textmap(CompositePropagator([...]))``): nothing else changes in the agent loop;
- :func:`run_context` / :func:`propagate_run`: the current context with the entry, for code that
  injects the headers itself.

It sits above the guard (it asks the installed one for the current run), while
:mod:`otel_repeat_guard.spans.baggage`, which the guard reads the entry with, sits below it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context, attach, detach, get_current
from opentelemetry.propagators import textmap

from otel_repeat_guard.inputs import context_or_none
from otel_repeat_guard.installed import installed_guard
from otel_repeat_guard.processor import RepeatGuardSpanProcessor
from otel_repeat_guard.spans.baggage import run_in, with_run

_W3C_BAGGAGE = W3CBaggagePropagator()


def run_context(guard: object = None, context: object = None) -> Context:
    """``context`` (default, or not a ``Context``: the current one) with the baggage entry naming the run its
    current span belongs to, as ``guard`` (default: the installed guard) resolves it; unchanged when there is
    no run. A ``guard`` that is not a guard is a ``ValueError`` naming it."""
    chosen = _checked(guard) if guard is not None else installed_guard()
    context = context_or_none(context)
    run_key = None if chosen is None else chosen.current_agent_id(context)
    if run_key is None:
        return context if context is not None else get_current()
    return with_run(run_key, context)


def _checked(guard: object) -> RepeatGuardSpanProcessor:
    if not isinstance(guard, RepeatGuardSpanProcessor):
        raise ValueError(f"guard must be a RepeatGuardSpanProcessor or None, got {guard!r}")
    return guard


@contextmanager
def propagate_run(guard: object = None) -> Iterator[str | None]:
    """Within the block, the current context's baggage names the current run (see :func:`run_context`),
    so whatever injects headers there (``opentelemetry.propagate.inject``) carries it. Yields the run's
    chain key, or None when the current span belongs to no run."""
    context = run_context(guard)
    token = attach(context)
    try:
        yield run_in(context)
    finally:
        detach(token)


class RunBaggagePropagator(textmap.TextMapPropagator):
    """Injects the W3C ``baggage`` header with the current run's entry added (and every other entry
    of the context kept); extracts it as the W3C baggage propagator does.

    Put it after ``baggage`` among the propagators, as its header replaces that one's. ``guard``
    defaults to the installed guard, looked up at each injection.
    """

    def __init__(self, guard: object = None) -> None:
        self._guard = None if guard is None else _checked(guard)

    def inject(
        self,
        carrier: textmap.CarrierT,
        context: object = None,
        setter: textmap.Setter[textmap.CarrierT] = textmap.default_setter,
    ) -> None:
        _W3C_BAGGAGE.inject(carrier, run_context(self._guard, context), setter)

    def extract(
        self,
        carrier: textmap.CarrierT,
        context: object = None,
        getter: textmap.Getter[textmap.CarrierT] = textmap.default_getter,
    ) -> Context:
        return _W3C_BAGGAGE.extract(carrier, context_or_none(context), getter)

    @property
    def fields(self) -> set[str]:
        return _W3C_BAGGAGE.fields
