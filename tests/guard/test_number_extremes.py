"""A bad value costs only itself: numbers no float, int or default Decimal can hold still have a canonical form.

Identical calls compare equal whatever their numbers, equal values spelt differently compare equal
as far as :mod:`decimal` can hold them, and distinct values never share a form. The oracle is
Python's own :class:`decimal.Decimal` comparison (exact at any precision), applied to the text we
generated, not to anything the canonicalizer computed.
"""

from __future__ import annotations

import decimal
import json
import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from otel_repeat_guard.core.canonical import (
    arguments_key,
    canonical_arguments,
    canonical_bytes,
    canonical_or_none,
    parse_exactly,
)

from .conftest import make_harness

HUGE = "9" * 5_000  # past Python's int conversion limit
_WIDEST = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def test_a_number_past_the_default_decimal_exponent_keeps_its_value() -> None:
    assert canonical_arguments('{"n":1e999999999}') == '{"n":1E+999999999}'
    assert canonical_arguments('{"n": 10e999999998}') == canonical_arguments('{"n":1e999999999}')
    assert canonical_arguments("[-1e999999999]") == "[-1E+999999999]"
    assert canonical_arguments('{"n":1e999999999}') != canonical_arguments('{"n":1e999999998}')


def test_a_number_too_large_to_normalise_is_kept_as_its_text() -> None:
    text = '{"n": 1e9999999999999999999, "q": "x"}'
    assert canonical_arguments(text) == '{"n":1e9999999999999999999,"q":"x"}'
    assert arguments_key(text) == arguments_key('{"q":"x","n":1e9999999999999999999}') is not None
    assert arguments_key(text) != arguments_key('{"n": 1e9999999999999999998, "q": "x"}')
    assert canonical_arguments("[1e" + "9" * 10_000 + "]") == "[1e" + "9" * 10_000 + "]"


def test_every_digit_of_a_number_past_the_float_range_is_kept() -> None:
    long = "1." + "0" * 40 + "1e400"
    assert canonical_arguments(f"[{long}]") == f"[1.{'0' * 40}1E+400]"
    assert canonical_arguments(f"[{long}]") != canonical_arguments("[1e400]")  # 28 digits once made them one


def test_a_number_past_the_float_range_never_shares_a_form_with_the_integer_of_its_digits() -> None:
    digits = "12345678" * 50
    assert canonical_arguments(f"[{digits}.0, {digits}e0, {digits}]") == f"[{digits}.0,{digits}.0,{digits}]"
    assert canonical_arguments(f"[{digits}5e-1]") == f"[{digits}.5]"


def test_the_thread_s_decimal_context_never_changes_a_canonical_form() -> None:
    expected = canonical_arguments("[1.2345e400, 1e999999999, 1e9999999999999999999, 7, 1.5]")
    with decimal.localcontext() as context:
        context.prec, context.Emax, context.capitals = 3, 999, 0
        context.traps[decimal.InvalidOperation] = False
        assert canonical_arguments("[1.2345e400, 1e999999999, 1e9999999999999999999, 7, 1.5]") == expected
    assert expected == "[1.2345E+400,1E+999999999,1e9999999999999999999,7,1.5]"


def test_a_number_of_a_million_digits_has_a_form_that_ends_in_its_value() -> None:
    digits = "3" * 1_000_000
    assert canonical_arguments(f"[{digits}.5]") == f"[{digits}.5]"  # past the float range: a value, in full
    assert canonical_arguments(f"[{digits}e999999999]") == f"[3.{digits[1:]}E+1000999998]"


def test_an_integer_past_the_conversion_limit_is_written_in_full_as_its_text_is() -> None:
    for number in (7**6000, -(7**6000), 3**200_000 + 1):
        written = str(decimal.Decimal(number))  # Decimal converts integers exactly, in any context
        assert canonical_bytes([number]) == f"[{written}]".encode()
        assert arguments_key({"n": number}) == arguments_key('{"n": ' + written + "}")
    for number in (10**4300, 2**16384, 2**16384 - 1, 2**16385 + 1):  # where the halves split
        assert canonical_bytes([number]) == f"[{decimal.Decimal(number)}]".encode()


def test_spellings_of_non_finite_numbers_that_are_not_json_are_their_own_text() -> None:
    forms = [canonical_arguments(text) for text in ("[NaN]", "[-NaN]", "[nan]", "[Infinity]", "[inf]", "[+1]")]
    assert forms == ["[NaN]", "[-NaN]", "[nan]", "[Infinity]", "[inf]", "[+1]"]
    assert len({arguments_key(text) for text in ("[NaN]", "[-NaN]", "[nan]", "[Infinity]", "[inf]")}) == 5


class _Incomparable:
    def __lt__(self, other: object) -> bool:
        raise RuntimeError("an application's own type, failing in its own method")


def test_a_value_that_is_not_json_like_has_no_form_whatever_it_raises() -> None:
    assert canonical_or_none([decimal.Decimal("1e400")]) is None  # a Decimal object is no JSON value
    assert arguments_key({"n": decimal.Decimal("NaN")}) is None
    assert canonical_or_none({_Incomparable(): 1, _Incomparable(): 2}) is None
    assert arguments_key([{_Incomparable(): 1, _Incomparable(): 2}]) is None


def test_identical_calls_with_a_huge_number_make_a_run_and_a_different_one_breaks_it() -> None:
    h = make_harness()
    with h.agent_run("a", "agent-1"):
        for arguments in (
            '{"n":1e999999999}',
            '{"n": 1e999999999}',
            '{"n":10e999999998}',
            '{"n":1e9999999999999999999}',
        ):
            h.call("grep", arguments)
        for _ in range(2):
            h.call("grep", '{"n": 1e9999999999999999999}')
    assert h.run_lengths() == [1, 2, 3, 1, 2, 3]
    h.provider.shutdown()


# -- fuzz: numbers of every size and exponent, spelt several ways ---------------------------------

_EXPONENTS = st.one_of(
    st.integers(-30, 30),
    st.integers(280, 420),
    st.integers(-420, -280),
    st.sampled_from([999_999, 1_000_000, 999_999_999, 1_000_000_000, -999_999_999, -1_000_000_000]),
    st.sampled_from([decimal.MAX_EMAX - 2, decimal.MAX_EMAX, decimal.MAX_EMAX + 1, 10**19, 10**30, -(10**30)]),
)
_COEFFICIENTS = st.one_of(st.integers(1, 10**40), st.sampled_from([10**5000 + 7, 7**6000]))


@st.composite
def number_spellings(draw: st.DrawFn) -> tuple[str, str]:
    """Two JSON spellings of one value ``coefficient x 10**exponent``, as float syntax."""
    coefficient, exponent = draw(_COEFFICIENTS), draw(_EXPONENTS)
    sign = draw(st.sampled_from(["", "-"]))
    digits = str(decimal.Decimal(coefficient))
    zeros = draw(st.integers(0, 3))
    plain = f"{sign}{digits}e{exponent}"
    moved = f"{sign}{digits[0]}.{digits[1:] or '0'}{'0' * zeros}E{exponent + len(digits) - 1:+d}"
    return plain, moved


def _oracle(text: str) -> tuple[str, Any]:
    """What a JSON float's form must depend on: its float, if it has a finite one; else its exact value
    if a Decimal can hold it; else (no context can) its text."""
    number = float(text)
    if math.isfinite(number):
        return "float", repr(number)  # repr tells -0.0 from 0.0, as JSON does
    try:
        return "exact", _WIDEST.create_decimal(text)
    except ArithmeticError:
        return "text", text


@settings(max_examples=300, deadline=None)
@given(number_spellings(), number_spellings())
@example(("1e9999999999999999999", "1.0E+9999999999999999999"), ("1e400", "1.0E+400"))
@example(("1e999999999", "1.00E+999999999"), ("-1e-400", "-1.0E-400"))
def test_numbers_of_any_size_compare_as_their_values(a: tuple[str, str], b: tuple[str, str]) -> None:
    """Identical texts always give one key; two spellings of a value give one key unless no Decimal can hold
    it; two different values never do."""
    for plain, moved in (a, b):
        document = '{"n": ' + plain + ', "ok": [true, null]}'
        key = arguments_key(document)
        assert key is not None and key == arguments_key('{"ok":[true,null],"n":' + plain + "}")
        kind, value = _oracle(plain)
        if kind != "text":
            assert arguments_key(f"[{plain}]") == arguments_key(f"[{moved}]")
        if kind == "exact":  # the form is the value itself, every digit of it
            assert json.loads(canonical_arguments(f"[{plain}]"), parse_float=decimal.Decimal) == [value]
            if value.adjusted() < 6000 and value == value.to_integral_value():  # a float, never that integer
                assert arguments_key(f"[{plain}]") != arguments_key(f"[{_WIDEST.to_integral_exact(value):f}]")
    if _oracle(a[0]) != _oracle(b[0]):
        assert arguments_key(f"[{a[0]}]") != arguments_key(f"[{b[0]}]")
    elif _oracle(a[0])[0] != "text":
        assert arguments_key(f"[{a[0]}]") == arguments_key(f"[{b[0]}]")


def test_parsed_numbers_no_float_or_int_holds_compare_as_their_values() -> None:
    assert parse_exactly("[1e400, 1e400]") == parse_exactly("[10e399, 1E+400]")
    assert parse_exactly("[1e400]") != parse_exactly("[1e401]") and parse_exactly("[1e400]") != [float("inf")]
    assert len({*parse_exactly(f"[1e400, 10e399, {HUGE}, {HUGE}]")}) == 2
    assert repr(parse_exactly("[1e400]")) == "[1E+400]"
    assert parse_exactly(b'{"n": 1.5}') == {"n": 1.5}
