"""How long canonicalization takes on numbers no float, int or default Decimal holds (issue 22).

Each case is one :func:`~otel_repeat_guard.core.canonical.arguments_key` (or ``canonical_bytes`` of a
Python value), best of a few runs, beside the one conversion the seed used for the same value where
that is the slow part (``str(Decimal(n))`` of an integer past Python's conversion limit).

Run: ``python -m benchmarks.extreme_numbers``.
"""

from __future__ import annotations

import decimal
import time
from collections.abc import Callable
from functools import partial

from otel_repeat_guard.core.canonical import arguments_key, canonical_bytes

REPEATS = 3


def _best(action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    million = "3" * 1_000_000
    texts = {
        '{"n": 1e999999999}': '{"n": 1e999999999}',
        '{"n": 1e9999999999999999999}': '{"n": 1e9999999999999999999}',
        "a 1,000,000-digit number past the float range": "[" + million + ".5]",
        "1e<a 1,000,000-digit exponent>": "[1e" + "9" * 1_000_000 + "]",
        "a 1,000,000-digit integer (text)": "[" + million + "]",
    }
    print("| case | time |")
    print("|---|---|")
    for label, text in texts.items():
        print(f"| {label} | {_best(partial(arguments_key, text)) * 1e3:.2f} ms |")
    for digits in (100_000, 1_000_000):
        number = 7 ** int(digits * 1.1833)  # about ``digits`` digits
        ours = _best(partial(canonical_bytes, [number]))
        start = time.perf_counter()
        str(decimal.Decimal(number))
        seed = time.perf_counter() - start
        print(
            f"| a {digits:,}-digit Python int | {ours * 1e3:.0f} ms (the seed's str(Decimal(n)): {seed * 1e3:.0f} ms) |"
        )


if __name__ == "__main__":
    main()
