"""The Claude Code command hook's JSON: what orjson reads and writes, done by the standard library where it provably
gives the same values and bytes, so a plain hook call does not import orjson.

orjson's import (its module, with :mod:`datetime` and what else it loads at its import) cost each hook call
about 3 ms, for a few small values: the event read, the call's arguments written, read and written sorted (the
chain's key: :mod:`~otel_repeat_guard.integrations._claude_keys`), the chain's waiting reminders, the answer. The
standard library reads and writes a value exactly as orjson does when it is **plain** (:func:`plain`): strings
without a lone surrogate, booleans, null, integers in orjson's range (``-2**63`` to ``2**64 - 1``), lists, and
objects with string keys, nested at most :data:`MAX_DEPTH` levels. Anything else goes to orjson, imported then,
as before: a float (the stdlib writes ``2.5e-05`` and ``1e-07`` where orjson writes ``0.000025`` and ``1e-7``), a
lone surrogate (orjson refuses it), a larger integer (orjson reads a float), deeper nesting (orjson's limits), any
other type.
``tests/guard/test_claude_hook_keys.py`` holds both equal over generated values and texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 128
"""The deepest nesting of a plain value: well under orjson's (a value nested 255 levels is past its writer's)."""
_LOWEST, _HIGHEST = -(1 << 63), (1 << 64) - 1
"""The integers orjson reads and writes as integers."""


def plain(value: Any) -> bool:
    """Whether the standard library reads and writes ``value`` as orjson does (see the module's docstring)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            if not _whole(item):
                return False
        elif kind is int:
            if not _LOWEST <= item <= _HIGHEST:
                return False
        elif kind is list or kind is dict:
            if depth >= MAX_DEPTH:
                return False
            if kind is dict:
                if not all(type(key) is str and _whole(key) for key in item):
                    return False
                item = item.values()
            stack.extend((child, depth + 1) for child in item)
        elif item is not None and kind is not bool:
            return False
    return True


def _whole(text: str) -> bool:
    """Whether ``text`` has no lone surrogate (what Node writes of output cut inside a character)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_UNREAD = object()


def loads(data: str | bytes) -> Any:
    """``orjson.loads(data)``: the same value, or the error orjson raises (a ValueError where it refuses ``data``)."""
    try:
        value = json.loads(data)
    except (ValueError, TypeError, RecursionError):
        value = _UNREAD
    if value is not _UNREAD and plain(value):
        return value
    import orjson

    return orjson.loads(data)


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``orjson.dumps(value, default=default).decode()``: the same text, or a TypeError where orjson cannot write
    ``value``."""
    if plain(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    import orjson

    return orjson.dumps(value, default=default).decode()


def dumps_sorted(value: Any) -> bytes:
    """``orjson.dumps(value, option=orjson.OPT_SORT_KEYS)``: the same bytes, or a TypeError where orjson cannot
    write ``value``."""
    if plain(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    import orjson

    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
