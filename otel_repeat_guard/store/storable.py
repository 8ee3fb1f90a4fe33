"""Values as the store keeps them: text and integers SQLite can hold (:func:`storable_text`,
:func:`storable_int`), and span attributes read as the types the store expects, anything else as
unknown (None)."""

from __future__ import annotations

import re

_INT64 = (-(2**63), 2**63 - 1)
_SURROGATE = "[\ud800-\udfff]"
"""A lone surrogate: compiled where one is met (:mod:`re`'s cache), as nearly no text has one and the compile cost
each Claude Code hook call about a hundredth of it."""


def storable_text(value: str) -> str:
    """``value`` with every lone surrogate (what ``json.dumps`` writes for a cut-off emoji) as U+FFFD:
    SQLite stores UTF-8, which has no form for them."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return re.sub(_SURROGATE, "\ufffd", value)
    return value


def storable_int(value: int) -> int:
    """``value`` clamped to SQLite's 64-bit integers (a harness that ends a span in the wrong unit)."""
    low, high = _INT64
    return value if low <= value <= high else max(low, min(high, value))


def storable_or_none(value: int | None) -> int | None:
    return None if value is None else storable_int(value)


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
