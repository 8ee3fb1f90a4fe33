"""Interleaved A/B timing: ABBA rounds, GC frozen, medians and spreads, never absolute claims."""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Segment = Callable[[], float]
"""Runs one timed segment and returns seconds per operation."""


@dataclass(frozen=True)
class Comparison:
    """Per-round ratios of a candidate against its baseline, measured in the same rounds."""

    baseline: list[float]
    candidate: list[float]

    @property
    def ratios(self) -> list[float]:
        return [c / b for b, c in zip(self.baseline, self.candidate, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.ratios), max(self.ratios)

    @property
    def baseline_us(self) -> float:
        return statistics.median(self.baseline) * 1e6

    @property
    def candidate_us(self) -> float:
        return statistics.median(self.candidate) * 1e6


@contextmanager
def quiet_gc() -> Iterator[None]:
    """No collector pauses inside a timed segment.

    Collects only the young generations first: a full collection would walk every object
    the scaling case keeps alive (a million chains) before each segment.
    """
    gc.collect(1)
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def compare(
    baseline: Segment, candidate: Segment, rounds: int, between: Callable[[], None] = lambda: None
) -> Comparison:
    """ABBA-interleaved rounds; each round's ratio uses the mean of its two A and two B segments."""
    baseline()  # warm both paths
    candidate()
    between()
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        times = {"A": 0.0, "B": 0.0}
        for which in "ABBA":
            with quiet_gc():
                times[which] += (baseline if which == "A" else candidate)()
            between()
        a.append(times["A"] / 2)
        b.append(times["B"] / 2)
    return Comparison(a, b)
