"""The guard never breaks the application, across threads, failing callbacks and huge payloads."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from otel_repeat_guard import GuardConfig, Reminder, ToolCall
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, AgentRun, EventLike
from otel_repeat_guard.core.canonical import canonical_or_none
from otel_repeat_guard.decide.blind_spots import CallAudit

from .conftest import Harness, make_harness


def _script(agent: int, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """A per-agent call sequence with loops of several lengths."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(12):
        tool = rng.choice(["grep", "read", "todo_write"])
        calls.extend([(tool, {"q": rng.randint(0, 2), "agent": agent})] * rng.randint(1, 6))
    return calls


def _outcome(h: Harness) -> tuple[dict[str, list[int]], list[tuple[str, int, str]]]:
    runs: dict[str, list[int]] = {}
    for span in h.tool_spans():
        agent = str((span.attributes or {})["gen_ai.agent.id"])
        repeat = [e for e in span.events if e.name == "repeat_tool_guard.repeat"]
        runs.setdefault(agent, []).append(int(repeat[0].attributes["repeat_tool_guard.run_length"]) if repeat else 1)  # type: ignore[index]
    reminders = sorted((r.agent_id, r.run_length, r.tier) for r in h.reminders)
    return runs, reminders


def test_eight_threads_of_interleaved_agents_match_sequential_runs() -> None:
    scripts = {f"agent-{i}": _script(i, random.Random(i)) for i in range(16)}

    sequential = make_harness()
    for agent, calls in scripts.items():
        for tool, arguments in calls:
            sequential.call(tool, arguments, agent_id=agent)

    threaded = make_harness()
    barrier = threading.Barrier(8)

    def worker(agents: list[str]) -> None:
        barrier.wait()
        cursors = dict.fromkeys(agents, 0)
        rng = random.Random(len(agents))
        while cursors:
            agent = rng.choice(sorted(cursors))  # interleave this thread's agents
            tool, arguments = scripts[agent][cursors[agent]]
            threaded.call(tool, arguments, agent_id=agent)
            cursors[agent] += 1
            if cursors[agent] == len(scripts[agent]):
                del cursors[agent]

    names = list(scripts)
    threads = [threading.Thread(target=worker, args=(names[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    expected = _outcome(sequential)
    assert _outcome(threaded) == expected
    assert len(expected[1]) > 10  # the scripts do loop


def test_a_raising_callback_never_reaches_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    delivered: list[Reminder] = []

    def callback(reminder: Reminder) -> None:
        delivered.append(reminder)
        if len(delivered) == 1:
            raise RuntimeError("harness bug")

    h = make_harness(on_reminder=callback)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"), h.agent_run("a"):
        for _ in range(8):
            h.call("grep", {"q": "X"})  # would raise here if the guard let it through
    assert [r.run_length for r in delivered] == [3, 5, 8]
    assert len(h.tool_spans()) == 8  # every span reached the SimpleSpanProcessor registered after the guard
    assert h.exporter.get_finished_spans()[-1].name == "invoke_agent a"
    assert "on_reminder callback raised" in caplog.text
    assert "harness bug" in caplog.text


def test_an_audit_callable_that_raises_costs_only_its_record(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def audit(call: CallAudit) -> None:
        seen.append(call.tool)
        raise RuntimeError("audit sink down")

    h = make_harness(audit=audit)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"), h.agent_run("a"):
        for _ in range(5):
            h.call("grep", {"q": "X"})
    assert seen == ["grep"] * 5
    assert [r.run_length for r in h.reminders] == [3, 5]  # every call counted all the same
    assert caplog.text.count("audit= callable failed for 'grep'; the call is counted all the same") == 5


class _ExplodingConvention:
    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        raise KeyError("broken convention")

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        raise KeyError("broken convention")


def test_an_internal_failure_is_logged_and_the_span_still_exported(caplog: pytest.LogCaptureFixture) -> None:
    h = make_harness(conventions=[_ExplodingConvention(), *DEFAULT_CONVENTIONS])
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"), h.agent_run("a"):
        h.call("grep", {"q": "X"})
    assert [s.name for s in h.exporter.get_finished_spans()] == ["execute_tool grep", "invoke_agent a"]
    assert "failed in on_start" in caplog.text
    assert "failed at the end of span 'execute_tool grep'" in caplog.text


def test_reset_and_forget_never_raise(caplog: pytest.LogCaptureFixture) -> None:
    def broken_metrics(tool: str, run: int) -> None:
        raise RuntimeError("metrics backend down")

    h = make_harness()
    h.guard._chains._on_run_ended = broken_metrics
    for agent in ("a", "b"):
        h.call("grep", {"q": "X"}, agent_id=agent)
        h.call("grep", {"q": "X"}, agent_id=agent)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        h.guard.reset("a")
        h.guard.forget("b")
    assert h.guard.run_length("a") == h.guard.run_length("b") == 0
    assert "failed in reset('a')" in caplog.text
    assert "failed in forget('b')" in caplog.text


def test_a_200kb_payload_is_previewed_briefly_and_compared_in_full() -> None:
    h = make_harness(GuardConfig(thresholds=(2,), arguments_preview_chars=100))
    payload = {"data": "x" * 200_000}
    almost = {"data": "x" * 199_999 + "y"}
    with h.agent_run("a"):
        h.call("upload", payload)
        h.call("upload", almost)  # differs only in the last byte: a different call
        h.call("upload", almost)
    assert h.run_lengths() == [1, 1, 2]
    (reminder,) = h.reminders
    omitted = len('{"data":""}') + 200_000 - 100
    assert reminder.arguments_preview == '{"data":"' + "x" * 91 + f"… [{omitted} more characters omitted]"
    assert len(reminder.arguments_preview) <= 100 + len(f"… [{omitted} more characters omitted]")
    assert len(reminder.text) < 1_000


def test_unusable_arguments_count_as_unknown() -> None:
    h = make_harness(GuardConfig(thresholds=(2,)))
    with h.agent_run("a"):
        for _ in range(3):
            h.call("grep", ["a", "b"], raw=True)  # a structured attribute value is fine
    assert h.run_lengths() == [1, 2, 3]
    assert canonical_or_none({"set": {1}}) is None  # what the guard makes of a value that is not JSON-like


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_arguments_too_deep_to_parse_still_form_and_break_runs(depth: int, caplog: pytest.LogCaptureFixture) -> None:
    """Compared as raw text: three identical deep calls are a run; a deep call between two greps breaks theirs."""
    deep = "[" * depth + "]" * depth
    h = make_harness()
    with caplog.at_level(logging.ERROR), h.agent_run("coder"):
        for _ in range(3):
            h.call("grep", deep)
        h.call("grep", {"q": "X"})
        h.call("grep", deep)
        h.call("grep", {"q": "X"})
    assert h.run_lengths() == [1, 2, 3, 1, 1, 1]
    assert [r.run_length for r in h.reminders] == [3]
    assert not caplog.records  # no RecursionError logged


def test_numbers_beyond_limits_compare_exactly() -> None:
    digits = "9" * 5_000
    h = make_harness()
    with h.agent_run("coder"):
        h.call("calc", '{"a": ' + digits + ', "b": 1}')
        h.call("calc", '{"b":1,"a":' + digits + "}")  # the same call: key order does not matter
        h.call("calc", "1e400")
        h.call("calc", "Infinity")  # a different value
        h.call("calc", "1e400")
    assert h.run_lengths() == [1, 2, 1, 1, 1]


def test_a_reminder_quoting_a_lone_surrogate_is_text_every_exporter_can_write() -> None:
    """'{"text": "\\ud83d"}' is plain ASCII, but its canonical form holds a lone surrogate: quoted as it is, the
    reminder and its event could not be encoded as UTF-8 (OTLP dropped the attribute, with a traceback)."""
    h = make_harness()
    with h.agent_run("a"):
        for _ in range(5):
            h.call("echo", '{"text": "\\ud83d"}')
    detailed = h.reminders[-1]
    assert detailed.tier == "detailed"
    assert detailed.text.encode("utf-8") and detailed.arguments_preview == '{"text":"\\ud83d"}'


def test_a_live_span_map_past_its_bound_says_why_calls_then_have_no_run(caplog: pytest.LogCaptureFixture) -> None:
    """Spans that leak push the run's own span out of the bounded map: its calls then have no run. The warning
    used to blame a missing agent span ('wrap your agent loop in a span') for a loop that was wrapped."""
    h = make_harness(max_live_spans=3)
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"), h.agent_run("a"):
        for i in range(5):
            h.tracer.start_span(f"leaked {i}")  # never ended
        for _ in range(3):
            h.call("grep", {"q": "X"})
    said = [r.getMessage() for r in caplog.records if "max_live_spans" in r.getMessage()]
    assert said == [
        "repeat guard tracks at most max_live_spans=3 open spans and dropped the oldest: spans that start and never "
        "end, or more open at once. A tool call whose agent-run span was dropped has no run, and is counted as "
        "no_agent. To fix it: end the spans that leak, or raise max_live_spans."
    ]
