"""The guard's metrics, read back through a real MeterProvider and InMemoryMetricReader."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import set_span_in_context

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.decide.blind_spots import NO_USAGE_WARNING

from .conftest import make_harness


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = list(metric.data.data_points)
    return found


def test_counters_and_run_length_histogram() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(thresholds=(2, 3)), meter_provider=MeterProvider(metric_readers=[reader]))
    with h.agent_run("a"):
        for _ in range(4):
            h.call("grep", {"q": "X"})
        h.call("read", {"p": 1})  # breaks the grep run of 4
        h.call("read", {"p": 1})
    # the agent run ended: the read run of 2 is recorded too
    h.call("solo", {"x": 1}, agent_id="b")  # a first call records nothing
    points = _points(reader)

    repeated = {p.attributes["gen_ai.tool.name"]: p.value for p in points["repeat_tool_guard.repeated_calls"]}
    assert repeated == {"grep": 3, "read": 1}
    for point in points["repeat_tool_guard.repeated_calls"] + points["repeat_tool_guard.run_length"]:
        assert set(point.attributes) == {"gen_ai.tool.name"}  # never the agent id

    reminders = sorted(
        (
            p.attributes["gen_ai.tool.name"],
            p.attributes["repeat_tool_guard.tier"],
            p.attributes["repeat_tool_guard.threshold"],
            p.value,
        )
        for p in points["repeat_tool_guard.reminders"]
    )
    assert reminders == [("grep", "detailed", 3, 1), ("grep", "gentle", 2, 1), ("read", "gentle", 2, 1)]

    runs = {p.attributes["gen_ai.tool.name"]: (p.count, p.sum, p.max) for p in points["repeat_tool_guard.run_length"]}
    assert runs == {"grep": (1, 4, 4), "read": (1, 2, 2)}


def test_nothing_is_recorded_without_repeats() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(meter_provider=MeterProvider(metric_readers=[reader]))
    with h.agent_run("a"):
        for i in range(5):
            h.call("grep", {"q": i})
    assert _points(reader) == {}


def test_tools_past_the_series_limit_share_the_overflow_series() -> None:
    from otel_repeat_guard.decide.metrics import MAX_SERIES, GuardMetrics

    reader = InMemoryMetricReader()
    metrics = GuardMetrics(MeterProvider(metric_readers=[reader]))
    for i in range(MAX_SERIES + 5):
        metrics.repeated_call(f"tool{i}")
        metrics.reminder(f"tool{i}", "gentle", 3)
        metrics.run_ended(f"tool{i}", 2)
    points = _points(reader)
    for name in ("repeat_tool_guard.repeated_calls", "repeat_tool_guard.reminders"):
        overflow = [p for p in points[name] if p.attributes.get("otel.metric.overflow")]
        assert len(points[name]) == MAX_SERIES + 1
        assert sum(p.value for p in points[name]) == MAX_SERIES + 5
        assert [p.value for p in overflow] == [5]
    assert len(metrics._tool_attrs) == MAX_SERIES


def test_finished_runs_reach_every_reader_even_past_the_pending_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_repeat_guard.decide.metrics as guard_metrics

    monkeypatch.setattr(guard_metrics, "MAX_PENDING_RUNS", 2)
    first, second = InMemoryMetricReader(), InMemoryMetricReader()
    metrics = guard_metrics.GuardMetrics(MeterProvider(metric_readers=[first, second]))
    for length in (2, 3, 4, 5, 5):  # (grep, 4) and (grep, 5) do not fit: recorded at once
        metrics.run_ended("grep", length)
    for reader in (first, second):
        (point,) = _points(reader)["repeat_tool_guard.run_length"]
        assert (point.count, point.sum, point.max) == (5, 19, 5)
    assert metrics._pending_runs == {}


def test_repeats_logged_from_many_threads_are_all_counted() -> None:
    """The repeat log takes appends without a lock; folding (past MAX_REPEAT_LOG, or at collection) loses none."""
    import threading

    from otel_repeat_guard.decide.metrics import MAX_REPEAT_LOG, GuardMetrics

    reader = InMemoryMetricReader()
    metrics = GuardMetrics(MeterProvider(metric_readers=[reader]))
    per_thread = MAX_REPEAT_LOG + 1_000

    def repeat(tool: str) -> None:
        for _ in range(per_thread):
            metrics.repeated_call(tool)

    threads = [threading.Thread(target=repeat, args=(f"tool{i % 2}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(metrics._repeat_log) <= MAX_REPEAT_LOG  # folded along the way, not only at collection
    repeated = {p.attributes["gen_ai.tool.name"]: p.value for p in _points(reader)["repeat_tool_guard.repeated_calls"]}
    assert repeated == {"tool0": 2 * per_thread, "tool1": 2 * per_thread}
    metrics.repeated_call("tool0")
    again = {p.attributes["gen_ai.tool.name"]: p.value for p in _points(reader)["repeat_tool_guard.repeated_calls"]}
    assert again == {"tool0": 2 * per_thread + 1, "tool1": 2 * per_thread}  # cumulative


def test_wasted_time_and_tokens_count_repeats_and_the_model_calls_that_asked_for_them() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(cycle_thresholds=(2,)), meter_provider=MeterProvider(metric_readers=[reader]))
    clock = iter(range(1_000_000_000, 10**12, 1_000_000_000))  # one second per tick

    def model_call(input_tokens: int, output_tokens: int | None) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.response.finish_reasons": ("tool_calls",),  # it asked for a tool
            "gen_ai.usage.input_tokens": input_tokens,
        }
        if output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = output_tokens
        h.tracer.start_span("chat gpt-4o", attributes=attributes).end()

    def tool_call(tool: str, seconds: int, query: str) -> None:
        start = next(clock)
        span = h.tracer.start_span(
            f"execute_tool {tool}",
            start_time=start,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": f'{{"q": "{query}"}}',
            },
        )
        span.end(end_time=start + seconds * 1_000_000_000)

    with h.agent_run("coder"):
        model_call(100, 10)
        tool_call("grep", 2, "x")  # first call: nothing wasted
        model_call(200, 20)
        tool_call("grep", 3, "x")  # a repeat: 3 s, and the 200 + 20 tokens that asked for it
        tool_call("grep", 4, "x")  # a repeat asked for by the same model call: its tokens count once
        model_call(300, 30)
        tool_call("read", 1, "a")  # breaks the run: nothing wasted
        model_call(400, None)  # output tokens unknown: only the input counts
        tool_call("grep", 5, "b")
        model_call(500, 50)
        tool_call("read", 6, "a")
        model_call(600, 60)
        tool_call("grep", 7, "b")  # completes a second copy of the cycle read, grep: a loop, not a repeat
    points = _points(reader)

    seconds = {p.attributes["gen_ai.tool.name"]: p.value for p in points["repeat_tool_guard.wasted_time"]}
    assert seconds == {"grep": pytest.approx(7.0)}
    tokens = {
        (p.attributes["gen_ai.tool.name"], p.attributes["gen_ai.token.type"]): p.value
        for p in points["repeat_tool_guard.wasted_tokens"]
    }
    assert tokens == {("grep", "input"): 200 + 600, ("grep", "output"): 20 + 60}


def test_wasted_tokens_come_only_from_model_calls_that_asked_for_tools_and_recorded_usage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model call that asked for a repeated call but recorded no usage adds no tokens, and its scope is warned
    of once, with the fix: its wasted tokens are unknown, not 0."""
    reader = InMemoryMetricReader()
    h = make_harness(meter_provider=MeterProvider(metric_readers=[reader]))
    asked = {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ("tool_calls",)}
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"), h.agent_run("coder"):
        for _ in range(2):  # two model calls without usage, each asking for a repeat
            h.tracer.start_span("chat", attributes=asked).end()
            h.call("grep", {"q": 1})
            h.call("grep", {"q": 1})
        answered = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 9}  # a text answer
        h.tracer.start_span("chat", attributes=answered).end()
        h.call("grep", {"q": 1})
    points = _points(reader)
    assert "repeat_tool_guard.wasted_tokens" not in points
    assert [p.attributes["gen_ai.tool.name"] for p in points["repeat_tool_guard.wasted_time"]] == ["grep"]
    (warning,) = [r.getMessage() for r in caplog.records if r.msg == NO_USAGE_WARNING]
    assert "instrumentation scope 'tests'" in warning
    assert "stream_options={'include_usage': True}" in warning


def test_a_parallel_duplicate_wastes_no_tokens() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(collapse_parallel=True), meter_provider=MeterProvider(metric_readers=[reader]))
    asked = {
        "gen_ai.operation.name": "chat",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 50,
    }
    with h.agent_run("coder") as agent:
        h.tracer.start_span("chat", attributes=asked).end()
        step = h.tracer.start_span("step", context=set_span_in_context(agent))
        context = set_span_in_context(step)
        h.overlapping_calls("grep", '{"q": 1}', 2, context)
        step.end()
    names = [[e.name for e in s.events] for s in h.tool_spans()]
    assert names == [[], ["repeat_tool_guard.parallel_duplicate"]]
    assert "repeat_tool_guard.wasted_tokens" not in _points(reader)


def test_wasted_tokens_are_broken_down_as_the_conventions_do_only_where_the_parts_fit_their_count() -> None:
    from otel_repeat_guard.conventions.usage import Usage
    from otel_repeat_guard.decide.metrics import token_parts

    assert token_parts(Usage(1000, 100, cache_read=300, cache_write=50, reasoning=20)) == [
        ("input", "none", 650),
        ("input", "read", 300),
        ("input", "creation", 50),
        ("output", "response", 80),
        ("output", "reasoning", 20),
    ]
    assert token_parts(Usage(1000, 100, cache_read=0, reasoning=0)) == [("input", "", 1000), ("output", "", 100)]
    # cache tokens reported apart from the input (more than it), reasoning past the output: no breakdown, the
    # counts as reported, so the sum by gen_ai.token.type is the same figure as before either way
    assert token_parts(Usage(100, 10, cache_read=300, reasoning=11)) == [("input", "", 100), ("output", "", 10)]
    assert token_parts(Usage(500, None, cache_read=500)) == [("input", "read", 500)]
    assert token_parts(Usage(None, None, cache_read=5, reasoning=1)) == []


def test_the_conventions_breakdown_counters_get_a_part_only_where_the_span_reports_it_and_it_fits() -> None:
    from otel_repeat_guard.conventions.usage import Usage
    from otel_repeat_guard.decide.metrics import token_breakdowns

    cache, phase = "gen_ai.token.cache", "gen_ai.token.phase"
    assert token_breakdowns(Usage(1000, 100, cache_read=300, cache_write=50, reasoning=20)) == [
        (cache, "none", 650),
        (cache, "read", 300),
        (cache, "creation", 50),
        (phase, "response", 80),
        (phase, "reasoning", 20),
    ]
    # reported as none (0): all of the direction is uncached / response, a known part
    assert token_breakdowns(Usage(1000, 100, cache_read=0, reasoning=0)) == [
        (cache, "none", 1000),
        (phase, "response", 100),
    ]
    assert token_breakdowns(Usage(1000, 100)) == []  # not reported: unknown, no part
    assert token_breakdowns(Usage(100, 10, cache_read=300, reasoning=11)) == []  # past their count: no part
    assert token_breakdowns(Usage(None, None, cache_read=5, reasoning=1)) == []
