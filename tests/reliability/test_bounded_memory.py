"""Bounded memory under abuse, measured with tracemalloc: a million agents, and spans never ended."""

from __future__ import annotations

import gc
import time
import tracemalloc

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import set_span_in_context

from otel_repeat_guard import RepeatGuardSpanProcessor


def _traced(action: object) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        action()  # type: ignore[operator]
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_million_distinct_agents_stay_within_max_agents() -> None:
    guard = RepeatGuardSpanProcessor(max_agents=10_000)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("abuse")
    sizes: list[int] = []

    def flood(first: int, count: int) -> None:
        for i in range(first, first + count):
            span = tracer.start_span("execute_tool grep")
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "grep",
                    "gen_ai.tool.call.arguments": '{"q": "x"}',
                    "gen_ai.agent.id": f"agent-{i}",
                }
            )
            span.end()
            if i % 100_000 == 99_999:
                sizes.append(len(guard._chains))

    started = time.perf_counter()
    flood(0, 900_000)
    # The last 100,000 under tracemalloc (it slows every allocation). They replace every chain,
    # so what is still held at the end is the whole state: it must fit 10,000 agents, not 1,000,000.
    gc.collect()
    tracemalloc.start()
    try:
        flood(900_000, 100_000)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert sizes == [10_000] * 10
    assert guard.run_length("agent-999999") == 1
    assert guard.run_length("agent-0") == 0  # the oldest were evicted
    assert held < 10_000 * 400, f"{held:,} bytes held for 10,000 chains"
    print(f"1,000,000 agents in {elapsed:.0f} s: {len(guard._chains)} chains holding {held:,} bytes")


def test_state_per_agent_is_small_and_independent_of_argument_size() -> None:
    per_agent = {}
    for size in (10, 100_000):
        guard = RepeatGuardSpanProcessor(max_agents=20_000)
        provider = TracerProvider()
        provider.add_span_processor(guard)
        tracer = provider.get_tracer("size")
        arguments = '{"blob": "' + "x" * size + '"}'

        def fill(tracer: object = tracer, arguments: str = arguments) -> None:
            for i in range(5_000):
                span = tracer.start_span("execute_tool put")  # type: ignore[attr-defined]
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "put",
                        "gen_ai.tool.call.arguments": arguments,
                        "gen_ai.agent.id": f"agent-{i:05d}",
                    }
                )
                span.end()

        per_agent[size] = _traced(fill) / 5_000
        assert len(guard._chains) == 5_000
    assert per_agent[100_000] < 400, per_agent
    assert per_agent[10] < 400, per_agent
    print(f"bytes per agent: {per_agent}")


def test_spans_never_ended_stay_bounded_and_oldest_are_evicted_first() -> None:
    guard = RepeatGuardSpanProcessor(max_live_spans=1_000)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("leak")
    kept: list[object] = []

    def leak() -> None:
        for _ in range(50_000):
            kept.append(tracer.start_span("never ended"))  # the application leaks them, not the guard

    _traced(leak)
    assert len(guard._runs.live) == 1_000
    oldest_kept = kept[-1_000].get_span_context().span_id  # type: ignore[attr-defined]
    assert next(iter(guard._runs.live)) == oldest_kept
    assert kept[0].get_span_context().span_id not in guard._runs.live  # type: ignore[attr-defined]
    # released by the application: the guard must not keep 49,000 evicted spans alive
    kept.clear()
    held = _traced(lambda: None)
    assert len(guard._runs.live) == 1_000
    assert held < 2_000_000


def test_a_hundred_thousand_abandoned_spans_hold_what_resolving_needs_not_the_spans() -> None:
    guard = RepeatGuardSpanProcessor()  # max_live_spans=100,000: every one of them is kept
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("abandon")

    def abandon() -> None:  # agent runs started, a tool call started in each, none ended, all dropped
        for i in range(50_000):
            run = tracer.start_span("invoke_agent researcher", attributes=_agent(i))
            tracer.start_span("execute_tool grep", context=set_span_in_context(run), attributes=_GREP)

    held = _traced(abandon)
    assert len(guard._runs.live) == 100_000
    assert held < 64 * 2**20, f"{held:,} bytes held by 100,000 abandoned spans"
    print(f"100,000 abandoned spans hold {held:,} bytes ({held / 100_000:.0f} per span)")


_GREP = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": '{"q": 1}'}


def _agent(i: int) -> dict[str, str]:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher", "gen_ai.agent.id": f"a-{i}"}
