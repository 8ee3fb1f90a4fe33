"""Progress-aware repeats (``progress: results``) and a policy per tool (``tools``), through a real guard."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import Status, StatusCode

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.decide.blind_spots import NO_RESULT, explain, fix_for

from .conftest import Harness, make_harness, reminder_outcomes

PROGRESS = GuardConfig(progress="results")
POLL = {"job": "42"}
# (the marks of a tool span in each vocabulary, the attribute of its arguments, the attribute of its result)
VOCABULARIES = {
    "genai": (
        {"gen_ai.operation.name": "execute_tool"},
        "gen_ai.tool.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ),
    "openinference": ({"openinference.span.kind": "TOOL"}, "tool.name", "input.value", "output.value"),
    "openllmetry": (
        {"traceloop.span.kind": "tool"},
        "traceloop.entity.name",
        "traceloop.entity.input",
        "traceloop.entity.output",
    ),
}


def poll(
    harness: Harness,
    result: str | None,
    *,
    tool: str = "poll_job",
    vocabulary: str = "genai",
    scope: str = "tests",
    failed: str | None = None,
) -> None:
    """One tool span of ``tool`` with the same arguments every time, recording ``result`` (None: no result)."""
    marks, name_key, arguments_key, result_key = VOCABULARIES[vocabulary]
    tracer = harness.provider.get_tracer(scope)
    with tracer.start_as_current_span(f"execute_tool {tool}") as span:
        span.set_attributes({**marks, name_key: tool, arguments_key: json.dumps(POLL)})
        if result is not None:
            span.set_attribute(result_key, result)
        if failed is not None:
            span.set_attribute("error.type", "JobError")
            span.set_status(Status(StatusCode.ERROR, failed))


def reminded(harness: Harness) -> list[tuple[str, int, str]]:
    return [(r.tool_name, r.run_length, r.tier) for r in harness.reminders]


def unguarded(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    data = reader.get_metrics_data()
    return {
        (p.attributes["reason"], p.attributes["gen_ai.tool.name"]): p.value
        for r in (data.resource_metrics if data else ())
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.unguarded_calls"
        for p in m.data.data_points
    }


TODAY = [("poll_job", 3, "gentle"), ("poll_job", 5, "detailed"), ("poll_job", 8, "detailed")]


@pytest.mark.parametrize("vocabulary", sorted(VOCABULARIES))
def test_a_poll_whose_result_changes_every_call_is_no_loop_under_progress_results(vocabulary: str) -> None:
    for config, expected in ((PROGRESS, []), (GuardConfig(), TODAY)):
        harness = make_harness(config)
        with harness.agent_run("poller"):
            for n in range(10):
                poll(harness, json.dumps({"state": "running", "done": n * 10}), vocabulary=vocabulary)
        assert reminded(harness) == expected, config
        assert harness.run_lengths() == ([1] * 10 if expected == [] else list(range(1, 11)))


@pytest.mark.parametrize("vocabulary", sorted(VOCABULARIES))
def test_once_the_poll_result_stops_changing_it_reminds_at_3_5_and_8(vocabulary: str) -> None:
    harness = make_harness(PROGRESS)
    with harness.agent_run("poller"):
        for n in range(4):
            poll(harness, f"running {n * 25}%", vocabulary=vocabulary)
        for _ in range(8):
            poll(harness, "done", vocabulary=vocabulary)
    assert reminded(harness) == TODAY
    assert harness.run_lengths() == [1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8]
    repeat = next(e for e in harness.tool_spans()[-1].events if e.name == "repeat_tool_guard.repeat")
    assert len(str(repeat.attributes["repeat_tool_guard.arguments_digest"])) == 32  # the arguments' digest, as ever


def test_a_failed_call_compares_its_error_type_and_message() -> None:
    harness = make_harness(PROGRESS)
    with harness.agent_run("poller"):
        for n in range(4):
            poll(harness, None, failed=f"job 42 not ready ({n})")  # the message moves: no loop
        for _ in range(3):
            poll(harness, None, failed="job 42 was deleted")
    assert reminded(harness) == [("poll_job", 3, "gentle")]
    assert harness.run_lengths()[-4:] == [1, 1, 2, 3]


def test_a_call_with_no_result_counts_as_today_and_is_a_no_result_blind_spot(caplog: pytest.LogCaptureFixture) -> None:
    reader = InMemoryMetricReader()
    harness = make_harness(PROGRESS, meter_provider=MeterProvider(metric_readers=[reader]))
    with caplog.at_level(logging.WARNING, "otel_repeat_guard"), harness.agent_run("poller"):
        for _ in range(8):
            poll(harness, None, vocabulary="openinference", scope="openinference.instrumentation.langchain")
    assert reminded(harness) == TODAY
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 8}  # each call once
    for span in harness.tool_spans():
        reasons = [e.attributes["repeat_tool_guard.reason"] for e in span.events if e.name.endswith(".unguarded")]
        assert reasons == [NO_RESULT]
    warnings = [r.getMessage() for r in caplog.records if NO_RESULT in r.getMessage()]
    assert len(warnings) == 1  # once per scope
    assert "OPENINFERENCE_HIDE_OUTPUTS=false" in warnings[0] and explain(NO_RESULT) in warnings[0]
    assert "TRACELOOP_TRACE_CONTENT=true" in fix_for(NO_RESULT, "opentelemetry.instrumentation.langchain")


def test_without_progress_a_call_with_no_result_is_no_blind_spot() -> None:
    reader = InMemoryMetricReader()
    harness = make_harness(GuardConfig(), meter_provider=MeterProvider(metric_readers=[reader]))
    with harness.agent_run("poller"):
        for _ in range(3):
            poll(harness, None)
    assert unguarded(reader) == {}
    assert reminded(harness) == TODAY[:1]


def test_a_reminder_is_broken_when_the_next_result_moves_and_ignored_when_it_does_not() -> None:
    reader = InMemoryMetricReader()
    harness = make_harness(PROGRESS, meter_provider=MeterProvider(metric_readers=[reader]))
    with harness.agent_run("one"):
        for result in ("done", "done", "done", "running again"):  # the reminder at 3, then the poll moved
            poll(harness, result)
    with harness.agent_run("two"):
        for _ in range(4):  # the reminder at 3, then the same result again
            poll(harness, "done")
    assert reminder_outcomes(reader) == {("broken", "repeat", "gentle"): 1, ("ignored", "repeat", "gentle"): 1}


def test_a_tools_policy_applies_per_pattern_the_first_match_winning() -> None:
    config = GuardConfig(
        tools={
            "poll_*": {"thresholds": [10, 20]},
            "write_*": {"stop_at": 6},
            "write_log": {"thresholds": [2]},  # after write_*: never applies
        }
    )
    harness = make_harness(config)
    with harness.agent_run("policies"):
        for tool in ("poll_job", "write_log", "read_file"):
            for _ in range(20):
                poll(harness, "same", tool=tool)
    assert reminded(harness) == [
        ("poll_job", 10, "gentle"),
        ("poll_job", 20, "detailed"),
        ("write_log", 3, "gentle"),
        ("write_log", 5, "detailed"),
        ("write_log", 6, "stop"),  # the global 8 is past its stop
        ("read_file", 3, "gentle"),
        ("read_file", 5, "detailed"),
        ("read_file", 8, "detailed"),
    ]


def test_progress_may_be_a_tool_s_own() -> None:
    harness = make_harness(GuardConfig(tools={"poll_*": {"progress": "results"}}))
    with harness.agent_run("mixed"):
        for tool in ("poll_job", "read_file"):
            for n in range(3):
                poll(harness, f"line {n}", tool=tool)
    assert reminded(harness) == [("read_file", 3, "gentle")]  # only the poll compares its results


def test_calls_counted_from_the_model_s_request_show_no_result() -> None:
    """No tool span, no result seen: counted as today, each a ``no_result`` blind spot."""
    reader = InMemoryMetricReader()
    harness = make_harness(PROGRESS, meter_provider=MeterProvider(metric_readers=[reader]))
    tracer = harness.tracer
    with harness.agent_run("no_tool_spans"):
        for n in range(4):
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
                part = {"type": "tool_call", "id": f"c{n}", "name": "poll_job", "arguments": POLL}
                span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))
    assert reminded(harness) == TODAY[:1]
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 4}


def test_a_framework_s_envelope_with_a_call_id_of_its_own_is_unwrapped_before_results_are_compared() -> None:
    """LangGraph's ToolMessage under OpenInference carries each call's own id: the content alone is the result."""
    harness = make_harness(PROGRESS)
    with harness.agent_run("langgraph"):
        for n in range(3):
            envelope = {"type": "tool", "data": {"content": "job 42: done", "tool_call_id": f"call_{n}"}}
            poll(harness, json.dumps(envelope), vocabulary="openinference")
        poll(harness, "job 42: done", vocabulary="openinference")  # the same content, as plain text
    assert reminded(harness) == TODAY[:1]
    assert harness.run_lengths() == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "result",
    ["done", "  job 42: done\n", "é\ud83d", '"done"', "42", "[1, 2]", '{"b": 1, "a": 2}', "null", "NaN", "no jobs", ""],
)
def test_a_result_s_digest_is_the_no_progress_detector_s_whatever_its_text(result: str) -> None:
    """The shortcut for plain text gives the digest the full reading gives (the same result is the same result)."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_repeat_guard.conventions.outcomes import outcome_digest, unwrap_envelope
    from otel_repeat_guard.decide.decision import CountedCall
    from otel_repeat_guard.decide.progress import Results
    from otel_repeat_guard.spans.run import Run

    span = TracerProvider().get_tracer("t").start_span("execute_tool poll")
    span.end()
    call = CountedCall(Run("run#1", "poller"), "poll", "{}", span, {"gen_ai.tool.call.result": result})
    assert Results.digest(call) == outcome_digest(unwrap_envelope(result))
