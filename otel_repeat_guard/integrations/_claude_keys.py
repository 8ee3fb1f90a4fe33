"""The Claude Code command hook's arguments keys, read without msgspec: the same bytes as
:mod:`otel_repeat_guard.core.canonical`, for a process that lives for one event.

:func:`~otel_repeat_guard.core.canonical.arguments_key` reads JSON text with msgspec, whose import (with
``typing_extensions``) cost the hook about a tenth of its call. The hook's arguments text is what orjson (or, for a
value orjson cannot write, the stdlib) wrote of the event's ``tool_input``, and orjson reads it into the same values
as msgspec does, but for integers beyond 64 bits, which orjson reads as floats. So this module reads the text with
orjson, and hands the text to :mod:`~otel_repeat_guard.core.canonical` itself (msgspec imported then) for anything
else: text orjson refuses (a lone surrogate escape, ``NaN``, ``1e400``, nesting past 1,024), a float as large as
2**63 (which may be an integer orjson turned into a float), or a value orjson cannot write sorted (nesting past
255). ``tests/guard/test_claude_hook_keys.py`` holds both readings equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
import xxhash

if TYPE_CHECKING:
    from typing import Any

_BIG = float(1 << 63)
"""Each integer orjson reads as a float (past ``-2**63`` or ``2**64 - 1``) is at least this large."""


def _sorted_json(text: str) -> bytes | None:
    """The canonical form of JSON ``text`` as orjson reads and writes it, or None where msgspec's reading may
    differ (or there is none): then :mod:`~otel_repeat_guard.core.canonical` decides."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float:
            if item >= _BIG or item <= -_BIG:
                return None
        elif type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # nesting past orjson's writer's 255 levels
        return None


def canonical_or_none(value: Any) -> bytes | None:
    """:func:`otel_repeat_guard.core.canonical.canonical_or_none`, the same bytes."""
    if type(value) is str:
        found = _sorted_json(value)
        if found is not None:
            return found
    from otel_repeat_guard.core import canonical

    return canonical.canonical_or_none(value)


def arguments_key(value: Any) -> bytes | None:
    """:func:`otel_repeat_guard.core.canonical.arguments_key`, the same digest."""
    if type(value) is str:
        found = _sorted_json(value)
        if found is not None:
            return xxhash.xxh3_128_digest(found)
    from otel_repeat_guard.core import canonical

    return canonical.arguments_key(value)


def canonical_arguments(value: Any) -> str:
    """:func:`otel_repeat_guard.core.canonical.canonical_arguments`, the same text."""
    if type(value) is str:
        found = _sorted_json(value)
        if found is not None:
            return found.decode("utf-8", "surrogatepass")
    from otel_repeat_guard.core import canonical

    return canonical.canonical_arguments(value)


def arguments_digest(canonical: bytes) -> str:
    """:func:`otel_repeat_guard.core.canonical.arguments_digest`: the 128-bit hex digest of a canonical form."""
    return xxhash.xxh3_128_hexdigest(canonical)
