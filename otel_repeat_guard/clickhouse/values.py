"""The one rule for the table's attribute values: which strings become typed values again.

The Collector's clickhouse exporter writes every attribute value as a string (``pcommon.Value.AsString``:
``42``, ``true``, JSON for arrays). The guard and the store read a few keys as typed values: token counts
as integers (a string count is unknown to them, see ``conventions/usage.py``), a few flags as booleans
(compared ``is True``). Only those keys are parsed back; every other value stays the string it is (tool
arguments are JSON text already, which the guard reads as text anyway). A value that does not parse
(a count of ``"abc"``) stays the string too, so it is unknown, as it would have been in the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from otel_repeat_guard.conventions.genai import IS_NESTED
from otel_repeat_guard.conventions.usage import FIGURES
from otel_repeat_guard.core.facts import WASTED, WRAPPER

INT_KEYS: Final = frozenset(
    (
        *(key for figure in FIGURES for key in (*figure.totals, *figure.parts)),
        # the guard's own event attributes, read back by the store from a trace recorded with the guard
        "repeat_tool_guard.run_length",
        "repeat_tool_guard.threshold",
        "repeat_tool_guard.period",
        "repeat_tool_guard.repetitions",
    )
)
"""Keys whose values are integers: token usage, and the guard's run lengths and thresholds."""

BOOL_KEYS: Final = frozenset((IS_NESTED, WASTED, WRAPPER))
"""Keys whose values are booleans (written ``true`` / ``false``)."""

_BOOLS: Final = {"true": True, "false": False}


def typed_value(key: str, text: str) -> str | int | bool:
    """``text``, the table's value of ``key``, as the type the guard and store expect for that key."""
    if key in INT_KEYS:
        stripped = text.strip()
        if stripped.lstrip("-").isdigit() and stripped.isascii():
            return int(stripped)
        return text
    if key in BOOL_KEYS:
        return _BOOLS.get(text.strip().lower(), text)
    return text


def typed_attributes(values: Mapping[str, str] | None) -> dict[str, str | int | bool]:
    """A map column's attributes with :func:`typed_value` applied to each."""
    return {str(key): typed_value(str(key), str(value)) for key, value in (values or {}).items()}
