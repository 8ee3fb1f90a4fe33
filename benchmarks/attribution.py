"""Where the guard's time goes on a tool span, measured in place: ``python -m benchmarks.attribution``.

Wraps each step of the guard's decision in a timer and runs the realistic 200 B workload
through a real pipeline. The timers add about 0.3 us each, so read the figures as shares;
``python -m benchmarks.instructions`` counts instructions instead, free of noise.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import otel_repeat_guard.processor as guard_module
from benchmarks import workloads as w
from otel_repeat_guard import RepeatGuardSpanProcessor, build_mode
from otel_repeat_guard.conventions import GenAIConvention
from otel_repeat_guard.core.chains import ChainTracker

STEPS: dict[str, tuple[Any, str]] = {
    "read the tool call (conventions)": (GenAIConvention, "read"),
    "canonicalize and digest arguments": (guard_module, "arguments_key"),
    "update the chain": (ChainTracker, "observe"),
    "build repeat events and metrics": (RepeatGuardSpanProcessor, "_record_repeat"),
    "read failure signals (repeats only)": (guard_module, "failed"),
    "append events to the span": (guard_module, "append_to_ending_span"),
    "whole decision (_on_ending)": (RepeatGuardSpanProcessor, "_on_ending"),
    "live-span bookkeeping (on_start)": (RepeatGuardSpanProcessor, "on_start"),
    "live-span bookkeeping (on_end)": (RepeatGuardSpanProcessor, "on_end"),
}


def _timed(owner: Any, name: str, totals: dict[str, list[float]], label: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            entry = totals.setdefault(label, [0.0, 0])
            entry[0] += time.perf_counter() - start
            entry[1] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    if build_mode() == "compiled":  # compiled code calls its functions directly, past any wrapper set here
        raise SystemExit(
            "attribution wraps Python-level steps: run it on the pure build (OTEL_REPEAT_GUARD_BENCH_BUILD=pure)"
        )
    calls = w.tool_arguments(200, 2_000, 0.2)
    totals: dict[str, list[float]] = {}
    for label, (owner, name) in STEPS.items():
        _timed(owner, name, totals, label)
    pipeline = w.pipeline(RepeatGuardSpanProcessor())
    best: dict[str, tuple[float, float]] = {}
    lifecycle = float("inf")
    for _ in range(7):
        totals.clear()
        gc.disable()
        lifecycle = min(lifecycle, w.tool_segment(pipeline, calls) * 1e6)
        gc.enable()
        pipeline.flush()
        for label, (seconds, count) in totals.items():
            per_call = seconds / count * 1e6
            if label not in best or per_call < best[label][0]:
                best[label] = (per_call, count)
    print(f"tool-span lifecycle with the guard: {lifecycle:.1f} us (200 B arguments, 20% repeats)")
    print(f"{'step':36} {'us per call':>12} {'calls':>7} {'us per span':>12}")
    for label in STEPS:
        per_call, count = best[label]
        print(f"{label:36} {per_call:12.2f} {count:7.0f} {per_call * count / len(calls):12.2f}")


if __name__ == "__main__":
    main()
