"""The Claude Code command hook's arguments keys (``integrations/_claude_keys.py``, read as orjson reads) against the
guard's (``core/canonical.py``, read by msgspec): the same bytes for every text, the hook's own texts and odd ones;
and the hook's JSON by the standard library (``integrations/_claude_json.py``) against orjson's, value for value."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_repeat_guard.core import canonical
from otel_repeat_guard.integrations import _claude_json, _claude_keys
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


# The hook's JSON by the standard library (integrations/_claude_json.py): orjson's bytes and values for a plain value,
# orjson itself for every other. The characters JSON escapes, or might: quotes, controls, DEL, the line and paragraph
# separators, a byte-order mark, past the BMP, and lone surrogates (which orjson refuses).
ESCAPED = ["\x00", "\x08", "\x1f", '"', "\\", "/", "\x7f", "\x80", "é", "\u2028", "\u2029", "\ufeff", "\U0001f600"]
LONE = ["\ud83d", "\ude00"]
characters = st.sampled_from(ESCAPED + LONE) | st.characters(exclude_categories=())
texts = st.text(characters, max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.sampled_from([-(2**63) - 1, 2**64, 2**70])  # just past orjson's integers, and far
    | st.floats()
    | texts
)
any_values = st.recursive(
    scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4)
)
plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.text(st.sampled_from(ESCAPED) | st.characters(codec="utf-8"), max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.sampled_from(ESCAPED) | st.characters(codec="utf-8"), max_size=6), children, max_size=4
        )
    ),
)


def exactly(value: Any) -> Any:
    """``value`` with each item's type beside it: ``1``, ``1.0`` and ``True`` are equal, and must not be."""
    if isinstance(value, dict):
        return ("dict", [(key, exactly(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [exactly(item) for item in value])
    return (type(value).__name__, repr(value))


def outcome(function: Any, value: Any) -> Any:
    """What ``function`` gives of ``value``, with each item's type beside it, or the kind of error it raises."""
    try:
        return exactly(function(value))
    except TypeError:  # orjson's JSONEncodeError is one
        return TypeError
    except ValueError:  # orjson's JSONDecodeError is one
        return ValueError


@settings(max_examples=500, deadline=None)
@given(plain_values)
def test_a_plain_value_is_written_by_the_stdlib_as_orjson_and_the_guard_write_it(value: Any) -> None:
    assert _claude_json.plain(value)  # the stdlib's branch, not orjson's
    assert _claude_json.dumps(value).encode() == orjson.dumps(value)
    assert _claude_json.dumps_sorted(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    text = json_text(value)  # as the hook writes a tool_input: keyed as the guard keys it
    assert text == orjson.dumps(value).decode()
    assert _claude_json.dumps_sorted(value) == canonical.canonical_bytes(text)
    both(text)
    assert exactly(_claude_json.loads(text)) == exactly(orjson.loads(text)) == exactly(value)


@settings(max_examples=500, deadline=None)
@given(any_values)
def test_any_value_is_written_as_orjson_writes_it_or_refused_as_orjson_refuses_it(value: Any) -> None:
    assert outcome(_claude_json.dumps, value) == outcome(lambda v: orjson.dumps(v).decode(), value)
    assert outcome(_claude_json.dumps_sorted, value) == outcome(
        lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS), value
    )
    text = json_text(value)
    if text is not None:
        both(text)


@settings(max_examples=500, deadline=None)
@given(any_values, st.booleans(), st.sampled_from([None, (",", ":"), (" , ", " : ")]))
def test_any_text_is_read_as_orjson_reads_it_or_refused_as_orjson_refuses_it(
    value: Any, ascii_only: bool, separators: tuple[str, str] | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=separators)  # \\u escapes, lone surrogates, NaN
    for data in (text, text.encode("utf-8", "surrogatepass")):
        assert outcome(_claude_json.loads, data) == outcome(orjson.loads, data)


@pytest.mark.parametrize("text", ODD_TEXTS, ids=range(len(ODD_TEXTS)))
def test_an_odd_text_is_read_as_orjson_reads_it(text: str) -> None:
    assert outcome(_claude_json.loads, text) == outcome(orjson.loads, text)


def test_what_the_stdlib_would_write_otherwise_falls_back_to_orjson() -> None:
    nested: list[Any] = []
    for _ in range(_claude_json.MAX_DEPTH - 1):
        nested = [nested]
    assert _claude_json.plain(nested) and not _claude_json.plain([nested])
    for value in (
        2.5e-05,  # the stdlib writes 2.5e-05, orjson 0.000025
        [0.0],
        {"a": -0.0},
        "\ud83d",  # a lone surrogate: orjson refuses it
        {"\ude00": 1},
        2**64,  # orjson reads it as a float
        -(2**63) - 1,
        (1, 2),
        {1: "a"},
        b"x",
        [nested],
    ):
        assert not _claude_json.plain(value), value
    assert (
        _claude_json.dumps([2.5e-05, 1e-07]) == "[0.000025,1e-7]" and json.dumps([2.5e-05, 1e-07]) == "[2.5e-05, 1e-07]"
    )
    assert _claude_json.dumps({"b": [1.5, True], "a": None}) == '{"b":[1.5,true],"a":null}'
    assert _claude_json.loads("18446744073709551616") == float(2**64)
    assert _claude_json.loads("[1.0]") == [1.0] and type(_claude_json.loads("[1.0]")[0]) is float
    with pytest.raises(ValueError):
        _claude_json.loads('"\\ud83d"')  # orjson refuses a lone surrogate escape; the stdlib would read it
    with pytest.raises(TypeError):
        _claude_json.dumps("\ud83d")
