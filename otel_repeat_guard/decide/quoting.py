"""Quote what the model sent: a tool span whose own arguments differ from the model's request for the call
(OpenInference's LangChain tool span records ``a.txt`` where the model sent ``{"path": "a.txt"}``) is quoted as
the request has it, in the reminder and in the store's preview. The chain key stays the tool span's."""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.conventions import MISSING
from otel_repeat_guard.core.canonical import canonical_or_none
from otel_repeat_guard.core.facts import REQUESTED
from otel_repeat_guard.spans.requested import Step


def quoted(step: Step, tool: str, call_id: str | None, arguments: Any, facts: dict[str, Any] | None) -> Any:
    """The arguments the model's request ``step`` sent for this call of ``tool`` (MISSING where unknown), and,
    with ``facts``, the fact :data:`~otel_repeat_guard.core.facts.REQUESTED` when they read otherwise than the
    tool span's ``arguments``. A request that cannot be read costs only the quote (the span's, then)."""
    try:
        requested = step.arguments_of(tool, call_id)
        if requested is MISSING or facts is None:
            return requested
        sent = canonical_or_none(requested)
        if sent is not None and sent != canonical_or_none(arguments):
            facts[REQUESTED] = sent.decode("utf-8", "surrogatepass")
        return requested
    except Exception:  # an odd value in a request: the tool span's arguments are quoted, as before
        return MISSING
