"""Run identity across processes: the run's chain key in W3C baggage, ``repeat_tool_guard.run``.

An agent loop in one process often has its tool calls executed by workers elsewhere (Temporal
activities, job queues). The application's propagators carry the OTel context to them; a worker's
tool span then has a *remote* parent, and no agent run of its own. With this baggage entry beside
``traceparent``, the worker's guard counts the call in the agent process's run (with a shared
chain store, see ``docs/distributed.md``); without it, the call stays ``no_agent``.

This module only reads and writes the entry, and imports nothing of the guard: the guard reads it
with :func:`run_in`. Putting it in outgoing headers needs the guard to resolve the current run, so
the propagator and its helpers live above the guard, in :mod:`otel_repeat_guard.setup.propagation`.
"""

from __future__ import annotations

from opentelemetry import baggage
from opentelemetry.context import Context

RUN_BAGGAGE_KEY = "repeat_tool_guard.run"
"""The baggage entry that names a run's chain key (``Reminder.agent_id``)."""


def run_in(context: object = None) -> str | None:
    """The run named in the baggage of ``context`` (default, or not a ``Context``: the current one), or None."""
    value = baggage.get_baggage(RUN_BAGGAGE_KEY, context if isinstance(context, Context) else None)
    return value if isinstance(value, str) and value else None


def with_run(run_key: str, context: Context | None = None) -> Context:
    """``context`` (default: the current one) with its baggage naming the run ``run_key``."""
    return baggage.set_baggage(RUN_BAGGAGE_KEY, run_key, context)
