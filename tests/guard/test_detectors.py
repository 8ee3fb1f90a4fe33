"""Loop shapes beyond exact repeats (all opt-in): cycles, no progress, parallel duplicates, stop.

Scenario tables through a real TracerProvider and the guard, checked against the issue's
examples; the texts against golden files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import Status, StatusCode

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.reminders import cycle_text, no_progress_text, stop_text

from .conftest import Harness, make_harness, reminder_outcomes

GOLDEN = Path(__file__).parent / "golden"
ARGS = {c: {"q": c} for c in "ABCDX"}


def _events(h: Harness, name: str) -> list[tuple[int, dict[str, Any]]]:
    """(1-based tool-call index, attributes) of every guard event called ``name``."""
    return [
        (i, dict(e.attributes or {}))
        for i, span in enumerate(h.tool_spans(), start=1)
        for e in span.events
        if e.name == name
    ]


def _calls(h: Harness, sequence: str, *, tools: bool = False) -> None:
    """One call per letter; with ``tools`` the letter is the tool, else tool ``t`` with the letter as argument."""
    for letter in sequence:
        if letter == "-":
            with h.tracer.start_as_current_span("chat gpt-4o"):  # a non-tool span between calls
                pass
        elif tools:
            h.call(f"tool_{letter}", ARGS[letter])
        else:
            h.call("t", ARGS[letter])


# -- cycles -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sequence", "period", "fires_at"),
    [
        ("ABABAB", 2, [6]),
        ("ABCABCABC", 3, [9]),
        ("ABABCABAB", None, []),
        ("AB-AB-AB", 2, [6]),  # a non-tool span between calls changes nothing
        ("ABABABAB", 2, [6]),  # past the threshold: silent (k=4 is not configured)
        ("AAAAAA", None, []),  # a repeat, not a cycle
        ("ABAB" + "C" + "ABABAB", 2, [11]),  # broken, then again from the start
    ],
)
def test_cycle_examples(sequence: str, period: int | None, fires_at: list[int]) -> None:
    h = make_harness(GuardConfig(cycle_thresholds=(3,)))
    with h.agent_run("a"):
        _calls(h, sequence, tools=True)
    fired = [i for i, e in _events(h, "repeat_tool_guard.reminder") if e["repeat_tool_guard.kind"] == "cycle"]
    assert fired == fires_at
    cycle_reminders = [r for r in h.reminders if r.kind == "cycle"]
    assert [(r.period, r.threshold, r.run_length) for r in cycle_reminders] == [(period, 3, 3 * (period or 0))] * len(
        fires_at
    )


def test_a_longer_cycle_fires_when_no_shorter_one_does() -> None:
    """X A B A B x 3 with max_cycle_period=5: period 5 at call 15 (A B A B alone never reaches 3)."""
    h = make_harness(GuardConfig(cycle_thresholds=(3,), max_cycle_period=5))
    with h.agent_run("a"):
        _calls(h, "XABAB" * 3, tools=True)
    (reminder,) = h.reminders
    assert (reminder.kind, reminder.period, reminder.threshold, reminder.run_length) == ("cycle", 5, 3, 15)
    assert [i for i, _ in _events(h, "repeat_tool_guard.reminder")] == [15]


def test_cycle_events_go_on_each_call_completing_a_copy_from_the_second_copy() -> None:
    h = make_harness(GuardConfig(cycle_thresholds=(2, 3)))
    with h.agent_run("a"):
        _calls(h, "ABABAB", tools=True)
    assert [(i, e) for i, e in _events(h, "repeat_tool_guard.cycle")] == [
        (
            4,
            {
                "repeat_tool_guard.period": 2,
                "repeat_tool_guard.repetitions": 2,
                "repeat_tool_guard.cycle_tools": ("tool_A", "tool_B"),
            },
        ),
        (
            6,
            {
                "repeat_tool_guard.period": 2,
                "repeat_tool_guard.repetitions": 3,
                "repeat_tool_guard.cycle_tools": ("tool_A", "tool_B"),
            },
        ),
    ]
    assert [(r.tier, r.threshold, r.tool_name, r.arguments_preview) for r in h.reminders] == [
        ("gentle", 2, "tool_B", '{"q":"B"}'),  # the call that completes the copy
        ("detailed", 3, "tool_B", '{"q":"B"}'),
    ]
    assert h.reminders[1].text == cycle_text(("tool_A", "tool_B"), 3)


@pytest.mark.parametrize("position", range(1, 6))
def test_a_cycle_interrupted_at_any_position_starts_over(position: int) -> None:
    sequence = "ABABAB"
    h = make_harness(GuardConfig(cycle_thresholds=(3,)))
    with h.agent_run("a"):
        _calls(h, sequence[:position] + "C" + sequence[position:], tools=True)
    assert [r for r in h.reminders if r.kind == "cycle"] == []


def test_excluded_tools_are_transparent_and_unknown_arguments_break_cycles() -> None:
    h = make_harness(GuardConfig(cycle_thresholds=(3,)))
    with h.agent_run("a"):
        for letter in "ABABAB":
            h.call(f"tool_{letter}", ARGS[letter])
            h.call("todo_write", {"n": letter})  # excluded by default
    assert [(r.kind, r.run_length) for r in h.reminders] == [("cycle", 6)]
    h = make_harness(GuardConfig(cycle_thresholds=(3,)))
    with h.agent_run("a"):
        for _ in range(3):
            h.call("tool_A")  # no arguments recorded: never identical
            h.call("tool_B", ARGS["B"])
    assert h.reminders == []


def test_reset_mid_cycle_clears_every_detector() -> None:
    h = make_harness(GuardConfig(cycle_thresholds=(3,)))
    with h.agent_run("a", agent_id="coder"):
        for letter in "ABAB":
            h.call(f"tool_{letter}", ARGS[letter], agent_id="coder")
        h.guard.reset("coder")
        for letter in "AB":
            h.call(f"tool_{letter}", ARGS[letter], agent_id="coder")
    assert h.reminders == []


def test_a_call_may_fire_a_repeat_and_a_cycle_reminder_and_both_are_delivered() -> None:
    h = make_harness(GuardConfig(thresholds=(2,), cycle_thresholds=(3,)))
    with h.agent_run("a"):
        _calls(h, "BAA" * 3, tools=True)
    assert [(r.kind, r.tier) for r in h.reminders][-2:] == [("repeat", "gentle"), ("cycle", "gentle")]
    assert {r.span_id for r in h.reminders[-2:]} == {h.reminders[-1].span_id}  # the same call, the 9th


# -- no progress ----------------------------------------------------------------------------------


def _result_call(
    h: Harness, tool: str, arguments: Any, result: Any = None, error: tuple[str, str] | None = None
) -> None:
    with h.tracer.start_as_current_span(f"execute_tool {tool}") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", tool)
        if arguments is not None:
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
        if result is not None:
            span.set_attribute("gen_ai.tool.call.result", result if isinstance(result, str) else json.dumps(result))
        if error is not None:
            span.record_exception(RuntimeError(error[1]), attributes={"exception.type": error[0]})
            span.set_status(Status(StatusCode.ERROR, error[1]))


def test_changing_arguments_with_the_same_result_is_no_progress() -> None:
    h = make_harness(GuardConfig(no_progress_thresholds=(3, 4)))
    with h.agent_run("a"):
        for pattern in ("TODO", "todo", "To-Do", "TODO:"):
            _result_call(h, "grep", {"pattern": pattern}, "no matches")
    assert [(i, e["repeat_tool_guard.run_length"]) for i, e in _events(h, "repeat_tool_guard.no_progress")] == [
        (2, 2),
        (3, 3),
        (4, 4),
    ]
    assert [(r.kind, r.tier, r.run_length, r.threshold, r.tool_name) for r in h.reminders] == [
        ("no_progress", "gentle", 3, 3, "grep"),
        ("no_progress", "detailed", 4, 4, "grep"),
    ]
    assert h.reminders[0].text == no_progress_text("grep", 3, "no matches")  # text that is not JSON: as it is


@pytest.mark.parametrize(
    ("calls", "runs"),
    [
        # identical arguments end the run (the repeat chain's job) and may start a new one
        ([({"p": 1}, "x"), ({"p": 1}, "x"), ({"p": 2}, "x")], [2]),
        # a call with no recorded outcome ends the run
        ([({"p": 1}, "x"), ({"p": 2}, None), ({"p": 3}, "x")], []),
        # outcomes equal up to key order are the same outcome
        ([({"p": 1}, '{"a": 1, "b": 2}'), ({"p": 2}, '{"b":2,"a":1}')], [2]),
        # unknown arguments count as different arguments
        ([({"p": 1}, "x"), (None, "x"), (None, "x")], [2, 3]),
        # another tool in between ends it
        ([({"p": 1}, "x"), ("other", "x"), ({"p": 2}, "x")], []),
    ],
)
def test_no_progress_edges(calls: list[tuple[Any, Any]], runs: list[int]) -> None:
    h = make_harness(GuardConfig(no_progress_thresholds=(5,)))
    with h.agent_run("a"):
        for arguments, result in calls:
            if arguments == "other":
                _result_call(h, "ls", {"d": 1}, result)
            else:
                _result_call(h, "grep", arguments, result)
    assert [e["repeat_tool_guard.run_length"] for _, e in _events(h, "repeat_tool_guard.no_progress")] == runs


def test_errors_are_the_outcome_with_type_and_message() -> None:
    h = make_harness(GuardConfig(no_progress_thresholds=(2,)))
    with h.agent_run("a"):
        _result_call(h, "edit", {"line": 1}, "ok?", error=("SyntaxError", "line 3: bad indent"))
        _result_call(h, "edit", {"line": 2}, "different result", error=("SyntaxError", "line 3: bad indent"))
        _result_call(h, "edit", {"line": 3}, None, error=("SyntaxError", "line 4: bad indent"))  # another message
    assert [i for i, _ in _events(h, "repeat_tool_guard.no_progress")] == [2]  # the error, not the result, counts


# -- parallel duplicates ---------------------------------------------------------------------------


def test_identical_calls_of_one_step_count_once() -> None:
    h = make_harness(GuardConfig(collapse_parallel=True, thresholds=(2,)))
    tracer = h.tracer
    with h.agent_run("a"), tracer.start_as_current_span("step"):
        h.overlapping_calls("grep", '{"q": 1}', 3)  # the model asked three times at once
    assert h.run_lengths() == [1, 1, 1]
    assert [i for i, _ in _events(h, "repeat_tool_guard.parallel_duplicate")] == [2, 3]
    assert h.reminders == []


def test_identical_calls_that_do_not_overlap_or_have_other_parents_are_counted() -> None:
    h = make_harness(GuardConfig(collapse_parallel=True))
    with h.agent_run("a"):
        for _ in range(3):
            h.call("grep", {"q": 1})  # one after the other
    assert h.run_lengths() == [1, 2, 3]
    assert _events(h, "repeat_tool_guard.parallel_duplicate") == []


def test_without_the_option_parallel_calls_are_repeats_as_today() -> None:
    h = make_harness()
    tracer = h.tracer
    with h.agent_run("a"):
        spans = [tracer.start_span("execute_tool grep") for _ in range(3)]
        for span in spans:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "grep",
                    "gen_ai.tool.call.arguments": "{}",
                }
            )
            span.end()
    assert h.run_lengths() == [1, 2, 3]


# -- stop ----------------------------------------------------------------------------------------------


def test_stop_at_gives_the_firm_tier_then_silence() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(thresholds=(3, 5), stop_at=7), meter_provider=MeterProvider(metric_readers=[reader]))
    with h.agent_run("a"):
        for _ in range(9):
            h.call("grep", {"q": 1})
    assert [(r.run_length, r.tier) for r in h.reminders] == [(3, "gentle"), (5, "detailed"), (7, "stop")]
    assert h.reminders[2].text == stop_text("grep", 7)
    data = reader.get_metrics_data()
    tiers = {
        (p.attributes["repeat_tool_guard.tier"], p.attributes["repeat_tool_guard.kind"]): p.value
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.reminders"
        for p in m.data.data_points
    }
    assert tiers == {("gentle", "repeat"): 1, ("detailed", "repeat"): 1, ("stop", "repeat"): 1}


# -- reminder efficacy ---------------------------------------------------------------------------------------


def test_a_reminders_outcome_is_what_the_run_did_next() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(thresholds=(3, 5)), meter_provider=MeterProvider(metric_readers=[reader]))
    with h.agent_run("a"):
        for _ in range(4):
            h.call("grep", {"q": 1})  # gentle at 3, then the same call again: ignored
        h.call("grep", {"q": 1})  # detailed at 5
        h.call("ls", {"d": "."})  # a different call: broken
        for _ in range(3):
            h.call("ls", {"d": "/"})  # gentle at 3 ...
    # ... and the run ended before a next call
    assert reminder_outcomes(reader) == {
        ("ignored", "repeat", "gentle"): 1,
        ("broken", "repeat", "detailed"): 1,
        ("ended", "repeat", "gentle"): 1,
    }


# -- configuration and texts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cycle_thresholds": (1,)}, "cycle_thresholds must be at least 2"),
        ({"no_progress_thresholds": (3, 3)}, "no_progress_thresholds must not repeat"),
        ({"max_cycle_period": 1}, "max_cycle_period must be an integer from 2 to 8, got 1"),
        ({"max_cycle_period": 9}, "max_cycle_period must be an integer from 2 to 8, got 9"),
        ({"stop_at": 8}, r"stop_at must be an integer above every threshold \(> 8\)"),
        ({"collapse_parallel": "yes"}, "collapse_parallel must be true or false"),
    ],
)
def test_bad_options_name_the_field_and_the_value(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GuardConfig(**kwargs)


def test_options_from_mappings_and_the_environment() -> None:
    expected = GuardConfig(
        cycle_thresholds=(2, 3), max_cycle_period=5, no_progress_thresholds=(4,), collapse_parallel=True, stop_at=12
    )
    camel = {
        "cycleThresholds": [3, 2],
        "maxCyclePeriod": 5,
        "noProgressThresholds": [4],
        "collapseParallel": True,
        "stopAt": 12,
    }
    assert GuardConfig.from_mapping(camel) == expected
    env = {
        "OTEL_REPEAT_GUARD_CYCLE_THRESHOLDS": "2,3",
        "OTEL_REPEAT_GUARD_MAX_CYCLE_PERIOD": "5",
        "OTEL_REPEAT_GUARD_NO_PROGRESS_THRESHOLDS": "4",
        "OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "True",
        "OTEL_REPEAT_GUARD_STOP_AT": "12",
    }
    assert GuardConfig.from_env(env) == expected
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "0"}).collapse_parallel is False
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "yes"}).collapse_parallel is True
    with pytest.raises(ValueError, match="COLLAPSE_PARALLEL \\(collapse_parallel\\) must be true or false"):
        GuardConfig.from_env({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "maybe"})


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cycle.txt", cycle_text(("read_file", "edit_file", "run_tests"), 3)),
        ("no_progress.txt", no_progress_text("grep", 4, '"no matches found"')),
        ("stop.txt", stop_text("read_file", 12)),
    ],
)
def test_texts_match_their_golden_files(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == path.read_text(encoding="utf-8")


def test_defaults_make_no_detector_and_no_new_event() -> None:
    h = make_harness()
    with h.agent_run("a"):
        _calls(h, "ABABAB", tools=True)
        for pattern in ("a", "b", "c"):
            _result_call(h, "grep", {"pattern": pattern}, "no matches")
    names = {e.name for s in h.exporter.get_finished_spans() for e in s.events}
    assert names == set() and h.reminders == []
    assert h.guard._chains._detectors is None


def test_the_current_span_is_not_needed_for_detection() -> None:
    """Detectors read nothing but the calls: a run resolved through an explicit agent id works too."""
    h = make_harness(GuardConfig(cycle_thresholds=(2,)))
    for letter in "ABAB":
        h.call(f"tool_{letter}", ARGS[letter], agent_id="coder")
    assert [(r.kind, r.agent_id) for r in h.reminders] == [("cycle", "coder")]
    assert trace.get_current_span().get_span_context().is_valid is False


def test_a_config_makes_exactly_the_detectors_it_names_and_none_without_one() -> None:
    from otel_repeat_guard import GuardConfig
    from otel_repeat_guard.core.detectors import CycleDetector, NoProgressDetector, detectors_for

    assert detectors_for(GuardConfig()) is None
    made = {
        name: detectors_for(GuardConfig(**options))
        for name, options in {
            "cycles": {"cycle_thresholds": (3,)},
            "no_progress": {"no_progress_thresholds": (3,)},
            "both": {"cycle_thresholds": (3,), "no_progress_thresholds": (4,)},
        }.items()
    }
    kinds = {name: [type(d) for d in make()] for name, make in made.items() if make is not None}
    assert kinds == {
        "cycles": [CycleDetector],
        "no_progress": [NoProgressDetector],
        "both": [CycleDetector, NoProgressDetector],
    }
