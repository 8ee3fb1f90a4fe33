"""Canonical tool-call arguments: equal arguments give equal bytes, distinct arguments never do.

orjson does the work. Where it would lose information (integers beyond 64 bits, which it
silently reads as floats; NaN and Infinity, which it rejects or writes as null; lone
surrogates) the exact standard-library path takes over.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson

_SORT_KEYS = orjson.OPT_SORT_KEYS
# Maps every ASCII digit to "0" and everything else to a space, so that a run of
# 19 digits (the shortest integer orjson may round) is one substring search.
_DIGIT_MASK = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
_LONG_NUMBER = b"0" * 19
# Canonical forms up to this size are their own key; longer ones are digested.
KEY_INLINE_LIMIT = 32


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 canonical form of tool-call arguments (see :func:`canonical_arguments`)."""
    if isinstance(value, str):
        return _from_text(value)
    try:
        out = orjson.dumps(value, option=_SORT_KEYS)
    except TypeError:
        return _exact_dumps(value)
    # orjson writes NaN and Infinity as null: look closer only when a null is there.
    return _exact_dumps(value) if b"null" in out and _has_non_finite(value) else out


def canonical_arguments(value: Any) -> str:
    """Deep key sort, then compact JSON with non-ASCII kept.

    A string is parsed as JSON first; a string that does not parse is its own value.
    """
    return canonical_bytes(value).decode("utf-8", "surrogatepass")


def arguments_key(canonical: bytes) -> bytes:
    """What a chain remembers of the arguments: short forms as they are, long ones digested."""
    return canonical if len(canonical) <= KEY_INLINE_LIMIT else _digest(canonical)


def arguments_digest(canonical: bytes) -> str:
    """Stable hex digest of a canonical form, for events and the store."""
    return _digest(canonical).hex()


def _digest(canonical: bytes) -> bytes:
    return hashlib.blake2b(canonical, digest_size=16).digest()


def _from_text(text: str) -> bytes:
    try:
        if len(text) >= len(_LONG_NUMBER) and _LONG_NUMBER in text.encode("utf-8").translate(_DIGIT_MASK):
            raise ValueError("may hold an integer orjson would round")
        return orjson.dumps(orjson.loads(text), option=_SORT_KEYS)
    except ValueError:  # orjson.JSONDecodeError and UnicodeEncodeError are ValueErrors
        pass
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
