"""The span-shape matrix in instructions: ``python -m benchmarks.matrix_instructions``.

The timed matrix (:mod:`benchmarks.matrix`) swings by ±0.2-0.5 between rounds on this shared machine;
instruction counts do not. Each shape of :mod:`benchmarks.shapes` runs under cachegrind with and without
the guard (non-tool spans: against the live-span floor), at two segment sizes after a warm-up, and the
difference per tool span is its cost, as in :mod:`benchmarks.instructions`. It counts work, not time: what
it cannot see (cache misses, the allocator) the timed matrix does. Report only, no goal. Set
``OTEL_REPEAT_GUARD_BENCH_BUILD`` to pick the build; needs ``valgrind``; takes about six minutes pure.
``--no-facts`` measures the guard with ``record_facts=False`` (the default before facts were on by default).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from benchmarks import shapes
from benchmarks import workloads as w
from benchmarks.instructions import instructions_of
from otel_repeat_guard import RepeatGuardSpanProcessor, build_mode

_COUNTS = (640, 1_920)  # tool spans per segment: whole rounds of the 64 runs
_NON_TOOL = -1  # the shape index of the non-tool spans


def _child(processor: str, shape: int, count: int) -> None:
    fronts: dict[str, Callable[[], Any]] = {
        "guard": RepeatGuardSpanProcessor,
        "guard-no-facts": partial(RepeatGuardSpanProcessor, record_facts=False),
        "floor": shapes.LiveSpanFloor,
    }
    front = fronts.get(processor)
    p = w.pipeline(*([front()] if front is not None else []))
    if shape == _NON_TOOL:
        for n in (200, count):  # a warm-up, then the counted segment
            shapes.non_tool_segment(p, n)
        return
    for n in (256, count):
        shapes.segment(p, shapes.plan(shapes.TOOL_SHAPES[shape], n))


def _per_span(job: tuple[str, int]) -> float:
    processor, shape = job
    low, high = (instructions_of("benchmarks.matrix_instructions", processor, str(shape), str(n)) for n in _COUNTS)
    return (high - low) / (_COUNTS[1] - _COUNTS[0])


def main(guard: str = "guard") -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    rows = [(shape.label, index, "none") for index, shape in enumerate(shapes.TOOL_SHAPES)]
    rows.append(("non-tool spans (chat, HTTP), against the live-span floor", _NON_TOOL, "floor"))
    jobs = [(kind, index) for _, index, base in rows for kind in (guard, base)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(jobs, pool.map(_per_span, jobs), strict=True))
    facts = ", record_facts=False" if guard == "guard-no-facts" else ""
    print(f"Instructions per tool span (with its step span, if any), {build_mode()} build{facts}:\n")
    print("| shape | guard | without | ratio |\n|---|---|---|---|")
    for label, index, base in rows:
        guarded, bare = counts[(guard, index)], counts[(base, index)]
        print(f"| {label} | {guarded / 1000:,.1f}k | {bare / 1000:,.1f}k | {guarded / bare:.3f} |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(main("guard-no-facts" if "--no-facts" in sys.argv[1:] else "guard"))
