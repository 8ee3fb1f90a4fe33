"""canonical_arguments: equal arguments give equal text; distinct arguments never do."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_repeat_guard.core.canonical import (
    arguments_digest,
    arguments_key,
    canonical_arguments,
    canonical_bytes,
    canonical_or_none,
    decoded_json,
    key_of_decoded,
    raw_key,
)


def test_deep_key_sort_and_compact_output() -> None:
    assert canonical_arguments({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": None}}) == (
        '{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}'
    )


def test_key_order_does_not_matter_in_strings() -> None:
    assert canonical_arguments('{"city": "Paris", "units": "metric"}') == canonical_arguments(
        '{ "units":"metric",\n "city":"Paris" }'
    )


def test_json_string_and_structured_value_are_the_same_arguments() -> None:
    assert canonical_arguments('{"q": [1, 2.5, true]}') == canonical_arguments({"q": [1, 2.5, True]})


def test_non_ascii_is_kept() -> None:
    assert canonical_arguments('{"city": "Z\\u00fcrich"}') == '{"city":"Zürich"}'
    assert canonical_bytes({"city": "Zürich"}) == '{"city":"Zürich"}'.encode()


def test_malformed_json_is_its_own_value() -> None:
    assert canonical_arguments('{"city": "Paris"') == '{"city": "Paris"'
    assert canonical_arguments("grep -r foo") == "grep -r foo"
    assert canonical_arguments('{"city": "Paris"') != canonical_arguments('{"city": "Paris"}')


def test_a_json_string_is_not_the_same_as_its_raw_text() -> None:
    assert canonical_arguments('"abc"') == '"abc"'
    assert canonical_arguments("abc") == "abc"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('{"n": 18446744073709551616}', '{"n": 18446744073709551617}'),
        ('{"n": -9223372036854775809}', '{"n": -9223372036854775810}'),
        ("[1, 1.0]", "[1, 1]"),
        ("[true]", "[1]"),
        ('{"a": null}', '{"a": NaN}'),
        ("[Infinity]", "[-Infinity]"),
        ("[NaN]", "[null]"),
        ('"\\ud800"', '"\\ud801"'),
    ],
)
def test_values_orjson_would_conflate_stay_distinct(a: str, b: str) -> None:
    assert canonical_arguments(a) != canonical_arguments(b)


def test_big_integers_are_exact() -> None:
    assert canonical_arguments('{"n": 18446744073709551616}') == '{"n":18446744073709551616}'
    assert canonical_arguments({"n": 2**70}) == '{"n":1180591620717411303424}'
    assert canonical_arguments('{"id": "12345678901234567890123", "n": 1}') == '{"id":"12345678901234567890123","n":1}'


def test_non_finite_floats_in_structured_values() -> None:
    assert canonical_arguments([float("nan"), None]) == "[NaN,null]"
    assert canonical_arguments({"x": [float("-inf")], "y": None}) == '{"x":[-Infinity],"y":null}'
    assert canonical_arguments({"x": [1.5], "y": None}) == '{"x":[1.5],"y":null}'
    assert canonical_arguments(("a", None)) == '["a",null]'


def test_lone_surrogates_round_trip() -> None:
    text = canonical_arguments("\ud800 not json")
    assert text == "\ud800 not json"
    assert canonical_bytes(["\udcff"]) == '["\udcff"]'.encode("utf-8", "surrogatepass")


def test_unsupported_values_raise_type_error() -> None:
    with pytest.raises(TypeError):
        canonical_arguments({"s": {1, 2}})


def test_the_key_is_the_digest_of_the_canonical_form() -> None:
    key = arguments_key('{"b": 1, "a": [2]}')
    assert key == arguments_key({"a": [2], "b": 1}) and key is not None and len(key) == 16
    assert key.hex() == arguments_digest(b'{"a":[2],"b":1}')
    assert arguments_key('{"a": [2], "b": 2}') != key
    assert len(arguments_digest(b"{}")) == 32


@pytest.mark.parametrize(
    "text",
    ['{"b": 1, "a": [2]}', '"text"', "[1, 2.5, null]", '{"n": 123456789012345678901234567890}', "[" * 300 + "]" * 300],
)
def test_a_key_from_the_decoded_text_is_the_texts_key(text: str) -> None:
    """Past 64 bits or 255 levels orjson cannot write the decoded value: the exact path keys the text."""
    assert key_of_decoded(text, decoded_json(text)) == arguments_key(text) is not None


def test_the_raw_key_tells_texts_apart_byte_for_byte() -> None:
    built = "".join(['{"a"', ": ", "1}"])  # the same text, another object: the key depends on the bytes only
    assert raw_key(built) == raw_key('{"a": 1}')
    assert raw_key('{"a": 1}') != raw_key('{"a":1}')  # equal arguments, different texts
    assert len(raw_key("\ud800")) == 16  # lone surrogates hash too


def test_values_that_are_not_json_like_have_no_canonical_form() -> None:
    assert canonical_or_none({"s": {1, 2}}) is None
    assert arguments_key({"s": {1, 2}}) is None
    assert canonical_or_none([1]) == b"[1]"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _typed(value: Any) -> Any:
    """A form of a JSON value where 1, 1.0 and True are all different."""
    if isinstance(value, dict):
        return ("dict", sorted((k, _typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float) and math.isinf(value):
        return ("inf", value > 0)
    return (type(value).__name__, value)


@given(json_values.filter(lambda v: not isinstance(v, str)))
def test_canonical_form_is_exact(value: Any) -> None:
    """Parsing the canonical text gives back the same value: no two values share a form.

    (A top-level string is JSON text to be parsed, so it is covered by the tests above.)
    """
    canonical = canonical_arguments(value)
    assert _typed(json.loads(canonical)) == _typed(value)
    assert canonical_arguments(json.dumps(value, indent=1)) == canonical


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_key_order_never_matters(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert canonical_arguments(json.dumps(reordered)) == canonical_arguments(value)


# -- hostile inputs: no recursion limit, no conversion limit, no shared forms ---------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_text_too_deep_to_parse_is_compared_as_raw_text(depth: int) -> None:
    text = "[" * depth + "]" * depth
    assert canonical_arguments(text) == text  # never a RecursionError
    assert arguments_key(text) == arguments_key(text) is not None
    assert arguments_key(text) != arguments_key("[" * depth + "] " + "]" * (depth - 1))


def test_structured_values_of_any_depth_have_an_exact_form() -> None:
    depth = 100_000
    deep: Any = {"b": 1, "a": None}
    for _ in range(depth):
        deep = [deep]
    assert canonical_bytes(deep) == b"[" * depth + b'{"a":null,"b":1}' + b"]" * depth
    # its canonical text, too deep to parse, is compared as raw text: the same key
    assert arguments_key(deep) == arguments_key(canonical_bytes(deep))
    assert canonical_bytes([{"b": [True, False, None, 1.5, float("-inf")], "a": "x"}]) == (
        b'[{"a":"x","b":[true,false,null,1.5,-Infinity]}]'
    )


def test_integers_past_the_conversion_limit_keep_their_value_and_key_order_does_not_matter() -> None:
    digits = "7" * 5_000
    a = canonical_arguments('{"b": 1, "a": ' + digits + "}")
    assert a == canonical_arguments('{"a":' + digits + ', "b":1}') == '{"a":' + digits + ',"b":1}'
    assert canonical_arguments('{"a": ' + digits + "8}") != a
    assert canonical_arguments({"a": int(digits[:4000]) * 10**1000 + int(digits[:1000]), "b": 1}).startswith(
        '{"a":7777'
    )


def test_numbers_past_the_float_range_never_share_a_form_with_infinity() -> None:
    forms = {canonical_arguments(text) for text in ("1e400", "1e401", "Infinity", "-1e400")}
    assert forms == {"1E+400", "1E+401", "Infinity", "-1E+400"}
    assert canonical_arguments("10e399") == canonical_arguments("1e400")  # the same value
    assert canonical_arguments('{"x": 1e400, "y": NaN}') == '{"x":1E+400,"y":NaN}'


def test_bytes_are_the_text_they_encode() -> None:
    assert canonical_bytes(b'{"b":1, "a": 2}') == canonical_bytes('{"a":2,"b":1}') == b'{"a":2,"b":1}'
    assert canonical_bytes(bytearray(b"[1]")) == b"[1]"
    assert arguments_key(b'{"a":1}') == arguments_key('{"a": 1}')
    assert canonical_bytes(b"\xff not utf-8") == "\udcff not utf-8".encode("utf-8", "surrogatepass")


def test_non_string_keys_in_deep_values_are_not_json_like() -> None:
    deep: list[Any] = [{1: "x"}]
    for _ in range(300):
        deep = [deep]
    assert canonical_or_none(deep) is None


def test_finite_floats_beside_non_finite_ones_stay_exact() -> None:
    assert canonical_arguments('{"b": NaN, "a": 1.5}') == '{"a":1.5,"b":NaN}'
