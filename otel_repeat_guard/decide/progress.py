"""Progress-aware repeats (``progress: results``): which tools' calls compare their results, and each call's
result digest, which its chain key takes (:func:`~otel_repeat_guard.core.policy.with_result`).

The result is read where :mod:`otel_repeat_guard.conventions.outcomes` reads a call's outcome for the no-progress
detector: the error (type and message) when the call failed, else ``gen_ai.tool.call.result``, OpenInference's
``output.value``, OpenLLMetry's ``traceloop.entity.output`` (pydantic-ai's ``tool_response``, the Vercel AI SDK's
``ai.toolCall.result``), a framework's envelope unwrapped. Only its 16-byte digest is kept, never the result.
"""

from __future__ import annotations

from typing import Final

import xxhash

from otel_repeat_guard.conventions.base import call_failed, first_present
from otel_repeat_guard.conventions.outcomes import RESULT_KEYS, outcome_and_key
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.policy import RESULTS, Policy, PolicyTable
from otel_repeat_guard.decide.decision import CountedCall

_MAYBE_JSON: Final = frozenset('{["-0123456789tfnNI')
"""How a text that may be JSON (or an envelope holding the result) begins: it is read whole. Any other text is no JSON
and its own result: digested as ``outcome_digest`` digests it (the same digest), without the parses that would fail
first (most tools return plain text)."""


def policy_table(config: GuardConfig) -> PolicyTable:
    """Each tool's policy, from ``config``'s ``tools`` and its global values."""
    return PolicyTable(config.tools, Policy(config.thresholds, config.stop_at, config.progress))


class Results:
    """The calls whose results count: ``compares(tool)``; ``digest(call)``, None when the call's span shows none."""

    __slots__ = ("_table",)

    def __init__(self, table: PolicyTable) -> None:
        self._table = table

    @classmethod
    def of(cls, config: GuardConfig) -> Results | None:
        """The results to compare under ``config``; None when no tool's calls compare them (the default)."""
        if config.progress != RESULTS and not config.tools:
            return None
        table = policy_table(config)
        return cls(table) if table.compares_results() else None

    def compares(self, tool: str) -> bool:
        return self._table[tool].progress == RESULTS

    @staticmethod
    def digest(call: CountedCall) -> bytes | None:
        """The digest of the call's result (its error when it failed); None when its span recorded neither, or it
        has no span (a call counted from its model's request)."""
        span = call.span
        if span is None:
            return None
        attributes, events = call.attributes, call.events
        if not call_failed(call.error, span.status.status_code, attributes, events):
            result = first_present(attributes, RESULT_KEYS)
            if isinstance(result, str) and result.lstrip()[:1] not in _MAYBE_JSON:
                return xxhash.xxh3_128_digest(b"R" + result.encode("utf-8", "surrogatepass"))  # as outcome_digest
        return outcome_and_key(span, attributes, events, call.error)[1]
