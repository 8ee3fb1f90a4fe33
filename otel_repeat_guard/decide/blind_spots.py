"""Why the guard could not compare a tool call it recognised, and the setting that fixes it.

One table, used by the guard's warning log, by ``otel-repeat-guard doctor`` and by the
dashboard, so all three name the same fix.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final, Literal, NamedTuple

Reason = Literal["no_arguments", "no_agent", "no_result"]
NO_ARGUMENTS: Final = "no_arguments"
NO_AGENT: Final = "no_agent"
NO_RESULT: Final = "no_result"
"""Under ``progress: results``: a call whose result was not recorded, compared by its tool and arguments alone."""
REASONS: Final = (NO_ARGUMENTS, NO_AGENT, NO_RESULT)
NO_USAGE: Final = "no_usage"
"""Not a reason a call goes uncompared: a model call that issued a wasted call recorded no token usage (warned of
once per scope, :meth:`WarnOnce.no_usage`)."""
NO_USAGE_WARNING: Final = (
    "repeat guard cannot count the tokens wasted by model calls from %s: they record no token usage "
    "(gen_ai.usage.input_tokens / output_tokens), so their wasted tokens are unknown, not 0. To fix it: "
    "record usage on the model call's span; an OpenAI chat stream reports it only when the request asks "
    "(stream_options={'include_usage': True})."
)
"""The warning (a ``logging`` format, the scope its one argument) that a scope's model calls record no usage."""
NO_GUARD: Final = "no_guard"
"""A reader's reason, not the guard's: a tool span in a trace store with none of the guard's facts or events
(the guard was not in the process that made it)."""


class CallAudit(NamedTuple):
    """How the guard saw one recognised tool call: what ``otel-repeat-guard doctor`` reports."""

    scope: str
    """The instrumentation scope of the span that told of the call ("" when unnamed)."""
    tool: str
    arguments_from: str
    """``tool_span``, ``model_request`` (joined by call id), ``model_request_only`` (no tool span), or ``none``."""
    run_from: str
    """``agent_id``, ``agent_id_run``, ``agent_span``, ``enclosing_span``, ``local_root``, or ``none``."""
    reason: str | None
    """Why it could not be compared (``no_arguments``, ``no_agent``; ``no_result``: not by its result), or None."""


def tell(audit: Callable[[CallAudit], None] | None, record: CallAudit) -> None:
    """Tell ``audit=`` how a call was seen; a callable that fails costs only its own record, not the count."""
    try:
        if audit is not None:
            audit(record)
    except Exception:
        logging.getLogger("otel_repeat_guard").exception(
            "repeat guard's audit= callable failed for %r; the call is counted all the same", record.tool
        )


_CLIENT_CAPTURE: Final = (
    "instrument the model client with content capture on (opentelemetry-instrumentation-openai-v2 with "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (true on releases before 2.x), openinference-instrumentation-openai with "
    "outputs not hidden (OPENINFERENCE_HIDE_OUTPUTS unset), or OpenLLMetry with TRACELOOP_TRACE_CONTENT=true): the guard then takes the arguments from the model's request"
)

# (instrumentation scope prefix, what to set so that the arguments are recorded), most specific first.
_ARGUMENT_FIXES: Final = (
    (
        "semantic_kernel",
        "set SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true, or " + _CLIENT_CAPTURE,
    ),
    ("gcp.vertex.agent", "set ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=true (google-adk's content capture)"),
    ("openinference.", "stop hiding inputs: OPENINFERENCE_HIDE_INPUTS=false (TraceConfig(hide_inputs=False))"),
    (
        "opentelemetry.instrumentation.openai_v2",
        "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (true on releases before 2.x)",
    ),
    (
        "opentelemetry.util.genai",
        "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (true on releases before 2.x)",
    ),
    ("opentelemetry.instrumentation.", "set TRACELOOP_TRACE_CONTENT=true (OpenLLMetry's content capture)"),
    ("pydantic-ai", "turn content on: InstrumentationSettings(include_content=True)"),
    ("strands", "record content: OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, or " + _CLIENT_CAPTURE),
    ("autogen", _CLIENT_CAPTURE),
    ("mcp", _CLIENT_CAPTURE),
)
_EXACT_ARGUMENT_FIXES: Final = {
    "ai": "leave the Vercel AI SDK's outputs recorded: experimental_telemetry.recordOutputs not false (it records"
    " ai.toolCall.args as an output)",
}
_AGENT_FIX: Final = (
    "wrap your agent loop in a span (any span: the guard keys the run by it), or set gen_ai.agent.id on the tool span"
)


# (instrumentation scope prefix, what to set so that a tool span records its result), most specific first.
_RESULT_FIXES: Final = (
    (
        "semantic_kernel",
        "set SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true (its tool spans' results)",
    ),
    ("gcp.vertex.agent", "set ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=true (google-adk's content capture)"),
    ("openinference.", "stop hiding outputs: OPENINFERENCE_HIDE_OUTPUTS=false (TraceConfig(hide_outputs=False))"),
    ("opentelemetry.instrumentation.", "set TRACELOOP_TRACE_CONTENT=true (OpenLLMetry's content capture)"),
    ("pydantic-ai", "turn content on: InstrumentationSettings(include_content=True)"),
)
_RESULT_FIX: Final = (
    "record each tool's result on its span (gen_ai.tool.call.result; OpenInference: OPENINFERENCE_HIDE_OUTPUTS "
    "unset; OpenLLMetry: TRACELOOP_TRACE_CONTENT=true); a call with no tool span of its own shows none"
)

_GUARD_FIX: Final = (
    "put the guard in the process that made these spans (configure(), or the zero-code setup), or replay "
    "them through it: otel-repeat-guard ingest --from URL --replay"
)


def fix_for(reason: str, scope: str | None) -> str:
    """The setting that makes calls of instrumentation ``scope`` comparable again."""
    if reason == NO_AGENT:
        return _AGENT_FIX
    if reason == NO_GUARD:
        return _GUARD_FIX
    name = scope or ""
    if reason == NO_RESULT:
        return _result_fix(name)
    exact = _EXACT_ARGUMENT_FIXES.get(name)
    if exact is not None:
        return exact
    for prefix, fix in _ARGUMENT_FIXES:
        if name.startswith(prefix):
            return fix
    return "record the call's arguments on the tool span (gen_ai.tool.call.arguments), or " + _CLIENT_CAPTURE


def _result_fix(scope: str) -> str:
    """The setting that makes tool spans of instrumentation ``scope`` record their results (``no_result``)."""
    if scope == "ai":
        return "leave the Vercel AI SDK's outputs recorded: experimental_telemetry.recordOutputs not false"
    return next((fix for prefix, fix in _RESULT_FIXES if scope.startswith(prefix)), _RESULT_FIX)


def explain(reason: str) -> str:
    """What the reason means, in a sentence."""
    if reason == NO_AGENT:
        return "the tool span has no parent span in this process and no gen_ai.agent.id, so no agent run"
    if reason == NO_GUARD:
        return "no guard facts or events on the span: the guard was not in the process that made it"
    if reason == NO_RESULT:
        return (
            "no result (nor error) recorded for the call, so under progress: results it is compared by its tool "
            "and arguments alone, and a poll whose result moved counts as a repeat"
        )
    return "neither the tool span nor the model's request recorded the call's arguments"


def _named(scope: str) -> str:
    return f"instrumentation scope {scope!r}" if scope else "an unnamed instrumentation scope"


class WarnOnce:
    """One warning per instrumentation scope and reason: which calls cannot be compared, or which model calls'
    wasted tokens are unknown, and the fix."""

    __slots__ = ("_limit", "_lock", "_logger", "_warned")

    def __init__(self, logger: logging.Logger, limit: int = 1024) -> None:
        self._logger = logger
        self._limit = limit
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def after_fork(self) -> None:
        """In a forked child: a fresh lock; what was warned of stays warned of (the child logs where its parent does)."""
        self._lock = threading.Lock()

    def _first(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` is warned of for the first time (never past ``limit`` keys)."""
        if key in self._warned or len(self._warned) >= self._limit:
            return False
        with self._lock:
            first = key not in self._warned
            self._warned.add(key)
        return first

    def no_usage(self, scope: str) -> None:
        """A model call that issued a wasted call recorded no token usage: its scope, once."""
        if self._first((NO_USAGE, scope)):
            self._logger.warning(NO_USAGE_WARNING, _named(scope))

    def __call__(self, reason: str, scope: str, tool: str) -> None:
        if self._first((reason, scope)):
            self._logger.warning(
                "repeat guard cannot compare calls of tool %r from %s: %s (%s). To fix it: %s.",
                tool,
                _named(scope),
                explain(reason),
                reason,
                fix_for(reason, scope),
            )
