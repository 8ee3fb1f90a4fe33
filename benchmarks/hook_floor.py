"""What any processor costs before it decides anything: ``python -m benchmarks.hook_floor [shape] [rounds]``.

On one shape of the span-shape matrix (:mod:`benchmarks.shapes`, default 0: GenAI under its run), side by side
against no processor, in the same interleaved rounds (:func:`benchmarks.timing.compare`): a processor whose
three hooks do nothing, the live-span floor (:class:`benchmarks.shapes.LiveSpanFloor`), and the guard. What the
guard costs beyond the floor is its deciding. Report only, no goal; ``OTEL_REPEAT_GUARD_BENCH_BUILD`` picks the
build.
"""

from __future__ import annotations

import sys
from functools import partial

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from benchmarks import shapes
from benchmarks import workloads as w
from benchmarks.timing import compare
from otel_repeat_guard import RepeatGuardSpanProcessor, build_mode


class EmptyHooks(SpanProcessor):
    """A processor whose hooks do nothing: what the SDK's calling one more processor costs."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def _on_ending(self, span: Span) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        pass


def main(shape: int = 0, rounds: int = 7) -> None:
    work = shapes.plan(shapes.TOOL_SHAPES[shape], 2_000)
    base = w.pipeline()
    candidates = {
        "empty hooks": w.pipeline(EmptyHooks()),
        "live-span floor": w.pipeline(shapes.LiveSpanFloor()),
        "guard": w.pipeline(RepeatGuardSpanProcessor()),
    }

    def flush() -> None:
        for p in (base, *candidates.values()):
            p.flush()

    print(f"{build_mode()} build, {shapes.TOOL_SHAPES[shape].label}, against no processor:")
    for label, p in candidates.items():
        c = compare(partial(shapes.segment, base, work), partial(shapes.segment, p, work), rounds, flush)
        low, high = c.spread
        print(f"  {label}: {c.ratio:.3f} [{low:.3f}-{high:.3f}]  ({c.baseline_us:.1f} -> {c.candidate_us:.1f} us)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
