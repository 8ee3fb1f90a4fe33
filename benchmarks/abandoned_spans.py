"""What spans the application abandons cost the guard: ``python -m benchmarks.abandoned_spans [--runs 100000]``.

Each run is an ``invoke_agent`` span with an ``execute_tool`` span inside it, neither ever ended, both
dropped by the application; the bytes still held after ``gc.collect()`` are the guard's (tracemalloc).
The default ``max_live_spans=100,000`` keeps the newest 100,000 of them.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import RepeatGuardSpanProcessor

_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": '{"q": 1}'}


def held_by_abandoned(runs: int) -> tuple[int, int]:
    """(bytes held, spans kept) after ``runs`` abandoned runs."""
    guard = RepeatGuardSpanProcessor()
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("abandon")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(runs):
            attributes = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "r",
                "gen_ai.agent.id": f"a-{i}",
            }
            run = tracer.start_span("invoke_agent researcher", attributes=attributes)
            tracer.start_span("execute_tool grep", context=trace.set_span_in_context(run), attributes=_TOOL)
        gc.collect()
        return tracemalloc.get_traced_memory()[0], len(guard._runs.live)  # what the guard keeps
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    started = time.perf_counter()
    held, kept = held_by_abandoned(args.runs)
    print(
        f"{args.runs:,} abandoned runs ({2 * args.runs:,} spans, {kept:,} kept): {held:,} bytes held "
        f"({held / 2**20:.1f} MiB, {held / max(kept, 1):,.0f} per kept span) in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
