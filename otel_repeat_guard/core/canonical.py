"""Canonical tool-call arguments: equal arguments give equal bytes, distinct arguments never do.

msgspec parses (it keeps integers of any size exact, where orjson would silently turn
integers beyond 64 bits into floats) and orjson writes with sorted keys. Values neither
can carry exactly take the exact path, which is iterative (no input reaches a recursion
limit) and keeps every number as written:

- NaN and ±Infinity are written ``NaN``, ``Infinity``, ``-Infinity``;
- integers of any size are written in full, past Python's 4,300-digit conversion limit too;
- numbers beyond a float's range (``1e400``) keep their value, normalized (``1E+400``) with
  every digit and whatever the exponent (``1E+999999999``), so they never share a form with
  each other or with ``Infinity``; one even :mod:`decimal` cannot hold (an exponent past
  10**18) is kept as its text;
- ``bytes`` are the text they encode (UTF-8; undecodable bytes kept as escapes), so
  ``b'{"a":1}'`` is the same call as ``'{"a":1}'``;
- text nested too deeply to parse (``[[[…]]]`` thousands deep) is compared as raw text.
"""

from __future__ import annotations

import decimal
import json
import math
from typing import Any, Final

import msgspec
import orjson
import xxhash

# Final: the compiled build keeps these in C statics, not the module dict looked up on every call.
_SORT_KEYS: Final = orjson.OPT_SORT_KEYS
_dumps: Final = orjson.dumps
_decode: Final = msgspec.json.Decoder().decode
_digest: Final = xxhash.xxh3_128_digest
_EXACT: Final = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    capitals=1,
    traps=[decimal.InvalidOperation, decimal.Overflow, decimal.Inexact],
)
"""Decimal arithmetic that never rounds and never depends on the thread's context: what it cannot
do exactly, it raises (an :class:`ArithmeticError`), never answers NaN or a rounded value."""
RAW_KEY_MIN_CHARS: Final = 1024
"""From this length on, arguments text also gets a :func:`raw_key`: hashing it is then far
cheaper than canonicalizing it again when it arrives unchanged."""


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 canonical form of tool-call arguments (see :func:`canonical_arguments`)."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        if value.__class__ is not str:  # a subclass (a StrEnum member, markupsafe's Markup): its text; the parsers
            value = str.__str__(value)  # take an exact str only, and str.__str__ is str's own, never the subclass's
        try:
            value = _decode(value)
        except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
            return _from_text_exactly(value)
        try:
            return orjson.dumps(value, option=_SORT_KEYS)  # msgspec yields no NaN or Infinity
        except TypeError:  # integers beyond 64 bits, lone surrogates
            return _exact_dumps(value)
    try:
        out = orjson.dumps(value, option=_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits, lone surrogates, nesting past 255, non-JSON types
        return _exact_dumps(value)
    # orjson writes NaN and Infinity as null: look closer only when a null is there.
    return _exact_dumps(value) if b"null" in out and _has_non_finite(value) else out


def canonical_or_none(value: Any) -> bytes | None:
    """:func:`canonical_bytes`, or None for a value that is not JSON-like (nothing can be identical to it),
    whatever it raises: a value of the application's own type may fail in its own methods (a key whose
    comparison raises), and one odd value costs only itself."""
    try:
        return canonical_bytes(value)
    except Exception:
        return None


def arguments_key(value: Any) -> bytes | None:
    """What a chain compares: the 128-bit digest of the canonical form, whose hex is the
    :func:`arguments_digest` of events and the store. None for a value that is not JSON-like."""
    if type(value) is str:  # the hot path: JSON text that msgspec and orjson carry exactly
        try:
            return _digest(_dumps(_decode(value), option=_SORT_KEYS))
        except (msgspec.DecodeError, UnicodeEncodeError, TypeError, RecursionError):
            return _exact_key(value)
    return _exact_key(value)


def decoded_json(text: str) -> Any:
    """``text`` read as JSON by the parser :func:`arguments_key` uses (``msgspec``): raises ``ValueError`` (msgspec's
    ``DecodeError``), ``UnicodeEncodeError`` or ``RecursionError`` for a text it cannot read."""
    return _decode(text)


def key_of_decoded(text: str, decoded: Any) -> bytes | None:
    """:func:`arguments_key` of ``text``, whose :func:`decoded_json` the caller holds: the text is not read twice."""
    try:
        return _digest(_dumps(decoded, option=_SORT_KEYS))
    except (TypeError, RecursionError):  # integers beyond 64 bits, nesting past 255: as arguments_key falls back
        return _exact_key(text)


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


class _Number:
    """A number kept as its canonical text: past the float range, or past the int conversion limit.

    It holds the text rather than being a ``str`` subclass: mypyc compiles no subclass of ``str``.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:  # as the values they stand for do, in parsed messages
        return isinstance(other, _Number) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def _exact_int(text: str) -> int | _Number:
    try:
        return int(text)
    except (
        ValueError
    ):  # more digits than Python converts: JSON integers have no leading zeros, so the text is canonical
        return _Number(text)


def _exact_float(text: str) -> float | _Number:
    number = float(text)
    if math.isfinite(number):
        return number
    return _Number(_normalized(text))  # 1e400: a value, not Infinity


def _normalized(text: str) -> str:
    """A JSON number past a float's range as its normalized decimal (``10e399`` is ``1E+400``), exactly:
    every digit kept, in time linear in the text whatever its exponent (the exponent is never spelt
    out in digits). A number :mod:`decimal` cannot hold (its exponent past 10**18) is its own text:
    no other value's form is that text, so it is told apart from every other number still. One whose
    last digit is a unit (``1234…5.0``, 309 digits or more) is written with ``.0``, as floats are: it
    never shares a form with the integer of the same digits."""
    try:
        written = _EXACT.to_sci_string(_EXACT.normalize(_EXACT.create_decimal(text)))
    except (ArithmeticError, ValueError):
        return text
    return written if "E" in written or "." in written else written + ".0"


_EXACT_DECODER: Final = json.JSONDecoder(parse_int=_exact_int, parse_float=_exact_float)
"""Built once: :func:`json.loads` with these hooks builds a decoder per call, which costs more than
parsing a short message."""


def parse_exactly(text: str | bytes) -> Any:
    """JSON text parsed as canonicalization reads it, for readers that take values out of a larger text
    (a model's messages): a number no float or int can hold costs only itself, never the whole text.
    Such a number becomes a value only the functions of this module read (and write exactly); every
    other value is what :func:`json.loads` gives. Raises ValueError (RecursionError when nested past
    the recursion limit) for text that is not JSON."""
    if isinstance(text, bytes):  # as json.loads reads bytes
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    return _EXACT_DECODER.decode(text)


def _from_text_exactly(text: str) -> bytes:
    """Text msgspec rejects: JSON with NaN, Infinity, numbers past a float's range or integers past
    msgspec's, nesting too deep, lone surrogates, or not JSON at all (compared as raw text)."""
    try:
        value = parse_exactly(text)
    except (ValueError, RecursionError):
        return text.encode("utf-8", "surrogatepass")
    return _exact_dumps(value)


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


_CONSTANTS: Final = {None: "null", True: "true", False: "false"}


def _scalar(value: Any) -> str:
    """One JSON scalar, exactly."""
    if value is None or value is True or value is False:
        return _CONSTANTS[value]
    if isinstance(value, _Number):
        return value.text
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        try:
            return int.__repr__(value)
        except ValueError:  # past the conversion limit: Decimal writes every digit
            return _decimal_digits(value)
    if isinstance(value, float):
        return json.dumps(value, allow_nan=True)
    raise TypeError(f"not JSON-like: {type(value).__name__}")


_DIRECT_BITS: Final = 4096
"""Integers up to this many bits (about 1,200 digits) become a Decimal in one conversion."""


def _decimal_digits(number: int) -> str:
    """Every digit of an integer past Python's conversion limit, in subquadratic time: one conversion
    of a million digits takes over 15 s, splitting it in halves by powers of two (whose products
    :mod:`decimal` computes fast) about half a second."""
    magnitude = -number if number < 0 else number
    digits = _EXACT.to_sci_string(_to_decimal(magnitude, magnitude.bit_length(), {}))
    return "-" + digits if number < 0 else digits


def _to_decimal(number: int, bits: int, powers: dict[int, decimal.Decimal]) -> decimal.Decimal:
    """``number`` (non-negative, at most ``bits`` bits) as an exact Decimal."""
    if bits <= _DIRECT_BITS:
        return decimal.Decimal(number)
    low_bits = bits >> 1
    high = number >> low_bits
    low = number - (high << low_bits)
    shifted = _EXACT.multiply(_to_decimal(high, bits - low_bits, powers), _power_of_two(low_bits, powers))
    return _EXACT.add(shifted, _to_decimal(low, low_bits, powers))


def _power_of_two(bits: int, powers: dict[int, decimal.Decimal]) -> decimal.Decimal:
    """2**bits as an exact Decimal, each power computed once per conversion."""
    power = powers.get(bits)
    if power is None:
        if bits <= _DIRECT_BITS:
            power = decimal.Decimal(1 << bits)
        else:
            half = bits >> 1
            power = _EXACT.multiply(_power_of_two(half, powers), _power_of_two(bits - half, powers))
        powers[bits] = power
    return power


def _exact_dumps(value: Any) -> bytes:
    """Compact JSON with sorted keys, written without recursion, so no input is too deep for it."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Close):
            out.append(item.text)
        elif isinstance(item, dict):
            keys = sorted(item)
            if not all(isinstance(key, str) for key in keys):
                raise TypeError("object keys must be strings")
            out.append("{")
            stack.append(_Close("}"))
            for index in range(len(keys) - 1, -1, -1):
                stack.append(item[keys[index]])
                stack.append(_Close(("," if index else "") + json.dumps(keys[index], ensure_ascii=False) + ":"))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Close("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Close(","))
        else:
            out.append(_scalar(item))
    return "".join(out).encode("utf-8", "surrogatepass")


class _Close:
    """Punctuation waiting on the stack of :func:`_exact_dumps`."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
