"""Canonical tool-call arguments: equal arguments give equal bytes, distinct arguments never do.

msgspec parses (it keeps integers of any size exact, where orjson would silently turn
integers beyond 64 bits into floats) and orjson writes with sorted keys. Values neither
can carry exactly (NaN, Infinity, lone surrogates, integers beyond 64 bits on output)
take the standard library's exact path.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import orjson
import xxhash

_SORT_KEYS = orjson.OPT_SORT_KEYS
_decode = msgspec.json.Decoder().decode
_digest = xxhash.xxh3_128_digest
RAW_KEY_MIN_CHARS = 1024
"""From this length on, arguments text also gets a :func:`raw_key`: hashing it is then far
cheaper than canonicalizing it again when it arrives unchanged."""


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 canonical form of tool-call arguments (see :func:`canonical_arguments`)."""
    if isinstance(value, str):
        try:
            value = _decode(value)
        except (msgspec.DecodeError, UnicodeEncodeError):
            return _from_text_exactly(value)
        try:
            return orjson.dumps(value, option=_SORT_KEYS)  # msgspec yields no NaN or Infinity
        except TypeError:  # integers beyond 64 bits, lone surrogates
            return _exact_dumps(value)
    try:
        out = orjson.dumps(value, option=_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits, lone surrogates, non-JSON types
        return _exact_dumps(value)
    # orjson writes NaN and Infinity as null: look closer only when a null is there.
    return _exact_dumps(value) if b"null" in out and _has_non_finite(value) else out


def canonical_or_none(value: Any) -> bytes | None:
    """:func:`canonical_bytes`, or None for a value that is not JSON-like (nothing can be identical to it)."""
    try:
        return canonical_bytes(value)
    except (TypeError, ValueError, RecursionError):
        return None


def arguments_key(value: Any) -> bytes | None:
    """What a chain compares: the 128-bit digest of the canonical form, whose hex is the
    :func:`arguments_digest` of events and the store. None for a value that is not JSON-like."""
    if type(value) is str:  # the hot path: JSON text that msgspec and orjson carry exactly
        try:
            return _digest(orjson.dumps(_decode(value), option=_SORT_KEYS))
        except (msgspec.DecodeError, UnicodeEncodeError, TypeError):
            return _exact_key(value)
    return _exact_key(value)


def _exact_key(value: Any) -> bytes | None:
    canonical = canonical_or_none(value)
    return None if canonical is None else _digest(canonical)


def raw_key(text: str) -> bytes:
    """The 128-bit digest of arguments text exactly as received, before any parsing."""
    return _digest(text.encode("utf-8", "surrogatepass"))


def canonical_arguments(value: Any) -> str:
    """Deep key sort, then compact JSON with non-ASCII kept.

    A string is parsed as JSON first; a string that does not parse is its own value.
    """
    return canonical_bytes(value).decode("utf-8", "surrogatepass")


def arguments_digest(canonical: bytes) -> str:
    """Stable 128-bit hex digest of a canonical form, for events and the store."""
    return xxhash.xxh3_128_hexdigest(canonical)


def _from_text_exactly(text: str) -> bytes:
    """Text msgspec rejects: JSON with NaN, Infinity or huge exponents, lone surrogates, or not JSON at all."""
    try:
        value = json.loads(text)
    except ValueError:
        return text.encode("utf-8", "surrogatepass")
    return _exact_dumps(value)


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_non_finite(item) for item in value)
    return False


def _exact_dumps(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return text.encode("utf-8", "surrogatepass")
