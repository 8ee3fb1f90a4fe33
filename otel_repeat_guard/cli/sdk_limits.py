"""The OpenTelemetry SDK's span limits from the environment, checked before the SDK is imported.

``opentelemetry.sdk.trace`` reads ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` and the other limits below when it is
imported, and raises ``ValueError`` at the import for a value that is not a non-negative integer (or empty): a
command would die with a traceback before its ``main`` could say a word. Every console script checks them first
(``otel_repeat_guard_entry``), and refuses a bad one in one line that names it (exit 2; the Claude Code hook
says it and exits 0). No OpenTelemetry import here.
"""

from __future__ import annotations

from collections.abc import Mapping

SDK_LIMITS = (
    "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT",
    "OTEL_SPAN_LINK_COUNT_LIMIT",
)
"""The limits ``opentelemetry.sdk.trace`` reads from the environment as it is imported (its ``SpanLimits``)."""


def sdk_limit_problem(environ: Mapping[str, str]) -> str | None:
    """What is wrong with the first span limit of the environment the SDK would refuse at its import, naming the
    variable and its value; None when they are all right. The SDK's own rule: the value, stripped, is empty (no
    limit) or an integer of 0 or more (``tests/packaging/test_entry.py`` holds the two rules equal)."""
    for name in SDK_LIMITS:
        if name not in environ:
            continue
        value = environ[name].strip()
        if not value:
            continue
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0:
            return f"{name}={environ[name]!r} is not a span limit: a whole number of 0 or more, or empty for none"
    return None
