"""The Claude Code command hook's arguments keys (``integrations/_claude_keys.py``, read by orjson) against the
guard's (``core/canonical.py``, read by msgspec): the same bytes for every text, the hook's own texts and odd ones."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_repeat_guard.core import canonical
from otel_repeat_guard.integrations import _claude_keys
from otel_repeat_guard.integrations._claude import json_text


def both(text: Any) -> None:
    assert _claude_keys.arguments_key(text) == canonical.arguments_key(text)
    assert _claude_keys.canonical_or_none(text) == canonical.canonical_or_none(text)
    if canonical.canonical_or_none(text) is not None:
        assert _claude_keys.canonical_arguments(text) == canonical.canonical_arguments(text)
        found = canonical.canonical_bytes(text)
        assert _claude_keys.arguments_digest(found) == canonical.arguments_digest(found)


ODD_TEXTS = [
    "18446744073709551615",  # the largest integer orjson reads as one
    "18446744073709551616",  # past it: orjson reads a float, msgspec the integer
    "-9223372036854775808",
    "-9223372036854775809",
    '{"n": 123456789012345678901234567890, "b": [1.5, -99999999999999999999]}',
    "9223372036854775808.0",  # a float as large as 2**63: read by msgspec's reading too
    "1e19",
    "-1e300",
    "1e400",  # past a float's range: neither reads it; the exact path keeps its value
    "NaN",
    "[Infinity, -Infinity]",
    '"\\ud83d"',  # a lone surrogate escape, as Node writes output cut inside a character
    '{"a": 1, "a": 2}',
    "-0",
    "-0.0",
    "1E5",
    "0.1",
    "5e-324",
    "1e-400",
    '"\\u0000\\u001f\\u007f é \U0001f600"',
    " [1, 2] ",
    "\ufeff1",
    "01",
    "[1,]",
    "not json",
    "",
    "[" * 300 + "]" * 300,  # past orjson's writer's 255 levels
    "[" * 1100 + "]" * 1100,  # past orjson's reader's 1,024 levels
    '{"a":' * 260 + "1" + "}" * 260,
    "[" * 100_000 + "]" * 100_000,
]


@pytest.mark.parametrize("text", ODD_TEXTS, ids=range(len(ODD_TEXTS)))
def test_an_odd_text_gets_the_guards_key(text: str) -> None:
    both(text)


def test_values_that_are_not_text_get_the_guards_key() -> None:
    for value in (b'{"a": 1}', {"b": 2, "a": [1.5, None]}, [float("nan")], 2**70, None, object()):
        both(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**66), max_value=2**66)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_the_hooks_arguments_text_of_any_value_gets_the_guards_key(value: Any) -> None:
    text = json_text(value)  # as the hook writes a tool_input
    assert text is not None
    both(text)
    both(json.dumps(value))  # the stdlib's text too: exponents written 1e+16, integers of any size


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_to_the_same_key(number: float) -> None:
    for text in (repr(number), f"{number:.17e}", f"{number:.25g}", json.dumps([number])):
        if math.isfinite(float(text.strip("[]"))):
            both(text)
