"""Issue 39, item 1: under ``progress: results``, a tool span that records no result takes it from the ``tool``
message of its run's next model request, where the guard reads the run's requests (MCP's server span, in-process).
The call is counted when its span ends with the run's last known result; the next request's answer restarts the run
at it when its own result differs. See docs/semantics.md, "Results from the next request"."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.chains import ChainTracker
from otel_repeat_guard.core.policy import with_result
from otel_repeat_guard.decide.blind_spots import NO_RESULT
from otel_repeat_guard.decide.late_results import MAX_AWAITING

from .conftest import Harness, make_harness

PROGRESS = GuardConfig(progress="results")
POLL = {"job": "42"}
TODAY = [("poll_job", 3, "gentle"), ("poll_job", 5, "detailed"), ("poll_job", 8, "detailed")]


def loop(
    h: Harness, results: list[str | None], *, ids: bool = True, answer: bool = True, tool: str = "poll_job"
) -> None:
    """An agent loop under one agent span: each model call asks for one ``tool`` call (id ``c<n>``) and carries
    back, as ``tool_call_response`` parts, every result so far (a None result is never sent back); each tool span
    records the call's arguments (and its call id with ``ids``) but no result. With ``answer`` a last model call
    carries the last result back."""
    with h.agent_run("poller"):
        sent: list[tuple[str, str]] = []
        for n, result in enumerate(results):
            chat(h, sent, (f"c{n}", tool))
            with h.tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps(POLL),
                    }
                )
                if ids:
                    span.set_attribute("gen_ai.tool.call.id", f"c{n}")
            if result is not None:
                sent.append((f"c{n}", result))
        if answer:
            chat(h, sent, None)


def chat(h: Harness, sent: list[tuple[str, str]], asks: tuple[str, str] | None) -> None:
    """A model call whose request carries ``sent`` back (call id, result) and which asks for ``asks``."""
    with h.tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}) as span:
        messages: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": "Is job 42 done?"}]}]
        for call_id, result in sent:
            part = {"type": "tool_call_response", "id": call_id, "response": result}
            messages.append({"role": "tool", "parts": [part]})
        span.set_attribute("gen_ai.input.messages", json.dumps(messages))
        if asks is not None:
            call_id, name = asks
            part = {"type": "tool_call", "id": call_id, "name": name, "arguments": POLL}
            span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))


def reminded(h: Harness) -> list[tuple[str, int, str]]:
    return [(r.tool_name, r.run_length, r.tier) for r in h.reminders]


def unguarded(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    data = reader.get_metrics_data()
    return {
        (str(p.attributes["reason"]), str(p.attributes["gen_ai.tool.name"])): int(p.value)
        for r in (data.resource_metrics if data else ())
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.unguarded_calls"
        for p in m.data.data_points
    }


def unguarded_events(h: Harness) -> list[tuple[str, str]]:
    return [
        (span.name, str(event.attributes["repeat_tool_guard.reason"]))  # type: ignore[index]
        for span in h.exporter.get_finished_spans()
        for event in span.events
        if event.name == "repeat_tool_guard.unguarded"
    ]


def measured(config: GuardConfig) -> tuple[Harness, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return make_harness(config, meter_provider=MeterProvider(metric_readers=[reader])), reader


def test_a_poll_whose_result_moves_in_every_next_request_makes_no_reminder_under_progress_results() -> None:
    h, reader = measured(PROGRESS)
    loop(h, [f"running, {n * 10}% done" for n in range(10)])
    assert reminded(h) == []
    # each call is counted on its tool and arguments when its span ends (2); the next request restarts the run
    assert h.run_lengths() == [1] + [2] * 9
    assert unguarded(reader) == {} and unguarded_events(h) == []  # every result came with the next request


def test_without_progress_the_same_poll_reminds_as_today() -> None:
    h, reader = measured(GuardConfig())
    loop(h, [f"running, {n * 10}% done" for n in range(10)])
    assert reminded(h) == TODAY
    assert h.run_lengths() == list(range(1, 11))
    assert unguarded(reader) == {}


def test_once_the_tool_message_stops_moving_the_poll_reminds_at_3_5_and_8() -> None:
    h, reader = measured(PROGRESS)
    loop(h, [f"running {n * 25}%" for n in range(4)] + ["done"] * 8)
    assert reminded(h) == TODAY
    assert h.run_lengths() == [1, 2, 2, 2, 2, 2, 3, 4, 5, 6, 7, 8]  # calls 4 to 11 say "done"
    assert unguarded(reader) == {}


def test_a_result_that_never_moves_reminds_at_3_5_and_8_as_today() -> None:
    h, _ = measured(PROGRESS)
    loop(h, ["done"] * 8)
    assert reminded(h) == TODAY
    assert h.run_lengths() == list(range(1, 9))


def test_tool_spans_without_a_call_id_take_the_request_s_last_tool_messages() -> None:
    h, reader = measured(PROGRESS)
    loop(h, [f"running {n}%" for n in range(6)], ids=False)
    assert reminded(h) == []
    h, reader = measured(PROGRESS)
    loop(h, ["done"] * 5, ids=False)
    assert reminded(h) == TODAY[:2]
    assert unguarded(reader) == {}


def test_a_call_the_next_request_does_not_answer_is_a_no_result_blind_spot_then() -> None:
    """Results that never come back (say, a loop that drops them) count as today: on tool and arguments."""
    h, reader = measured(PROGRESS)
    loop(h, [None, None, None])
    assert reminded(h) == TODAY[:1]
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 3}  # each call once
    # said on the model call that did not carry it back, not on the tool span
    assert unguarded_events(h) == [("chat gpt-4o", NO_RESULT)] * 3


def test_a_run_that_ends_before_the_next_request_counts_its_last_call_as_no_result() -> None:
    h, reader = measured(PROGRESS)
    loop(h, ["running", "done", "done"], answer=False)
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 1}  # the last: its result was never seen
    assert unguarded_events(h) == []  # no span of the run was left to say it on


def test_a_reminder_given_when_the_poll_moved_at_a_threshold_stays_and_the_run_restarts() -> None:
    h, _ = measured(PROGRESS)
    loop(h, ["done", "done", "running again", "running again"])
    assert reminded(h) == TODAY[:1]  # the third call was counted before its result: reminders are not taken back
    assert h.run_lengths() == [1, 2, 3, 2]  # the fourth repeats the third's result: 2, not 4


def test_a_result_recorded_on_the_tool_span_is_not_waited_for() -> None:
    h, reader = measured(PROGRESS)
    with h.agent_run("poller"):
        for n in range(4):
            chat(h, [], (f"c{n}", "poll_job"))
            with h.tracer.start_as_current_span("execute_tool poll_job") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "poll_job",
                        "gen_ai.tool.call.id": f"c{n}",
                        "gen_ai.tool.call.arguments": json.dumps(POLL),
                        "gen_ai.tool.call.result": f"running {n}%",
                    }
                )
        chat(h, [], None)  # carries nothing back: no call waited for it
    assert reminded(h) == [] and h.run_lengths() == [1, 1, 1, 1]
    assert unguarded(reader) == {}


def test_a_tool_that_does_not_compare_results_waits_for_nothing() -> None:
    h, reader = measured(GuardConfig(tools={"other_*": {"progress": "results"}}))
    loop(h, [f"running {n}%" for n in range(3)])
    assert reminded(h) == TODAY[:1]
    assert unguarded(reader) == {}


def test_past_the_bound_a_run_s_oldest_awaiting_call_is_let_go_as_no_result() -> None:
    """A step that asks for more calls than the bound: the oldest are let go, each counted once."""
    h, reader = measured(PROGRESS)
    with h.agent_run("wide"):
        chat(h, [], ("c0", "poll_job"))
        for n in range(MAX_AWAITING + 2):
            with h.tracer.start_as_current_span("execute_tool poll_job") as span:
                arguments = json.dumps({"job": str(n)})
                span.set_attributes(
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll_job"}
                    | {"gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.id": f"c{n}"}
                )
        chat(h, [(f"c{n}", "ok") for n in range(MAX_AWAITING + 2)], None)
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 2}


# -- the chain's side: a rekeyed last call ------------------------------------------------------------------


def test_a_rekeyed_last_call_restarts_its_run_and_records_the_run_that_ended() -> None:
    ended: list[tuple[str, int]] = []
    chains = ChainTracker(10, lambda tool, run: ended.append((tool, run)))
    assumed, moved = with_result(b"k", b"r1"), with_result(b"k", b"r2")
    for _ in range(3):
        chains.observe("run", "poll", assumed)
    chains.rekey("run", "poll", assumed, moved)
    assert (chains.run_length("run"), ended) == (1, [("poll", 3)])
    assert chains.observe("run", "poll", moved) == 2  # the next call, with the result that came


def test_a_rekey_that_changes_nothing_or_comes_too_late_is_a_no_op() -> None:
    ended: list[tuple[str, int]] = []
    chains = ChainTracker(10, lambda tool, run: ended.append((tool, run)))
    chains.rekey("none", "poll", b"a", b"b")  # no run
    chains.observe("run", "poll", b"a")
    chains.observe("run", "poll", b"a")
    chains.rekey("run", "poll", b"a", b"a")  # the result assumed was the one
    chains.rekey("run", "other", b"a", b"b")  # not the run's last call
    chains.rekey("run", "poll", b"x", b"b")
    assert (chains.run_length("run"), ended) == (2, [])
    chains.observe("one", "poll", b"a")
    chains.rekey("one", "poll", b"a", b"b")  # a run of one: rekeyed, nothing ended
    assert (chains.run_length("one"), chains.observe("one", "poll", b"b"), ended) == (1, 2, [])


def test_past_max_agents_the_least_recent_run_s_awaiting_calls_are_let_go_as_no_result() -> None:
    reader = InMemoryMetricReader()
    h = make_harness(PROGRESS, meter_provider=MeterProvider(metric_readers=[reader]), max_agents=1)
    with h.agent_run("outer"):
        chat(h, [], ("c0", "poll_job"))
        with h.tracer.start_as_current_span("execute_tool poll_job") as span:
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll_job", "gen_ai.tool.call.id": "c0"}
                | {"gen_ai.tool.call.arguments": json.dumps(POLL)}
            )
        loop(h, ["done"])  # an inner agent run of its own: its awaiting call takes the only place
        assert unguarded(reader) == {(NO_RESULT, "poll_job"): 1}  # the outer run's call, let go


def test_a_run_whose_spans_sometimes_record_the_result_compares_both_alike() -> None:
    """Calls 1 and 3 take their result from the next request, call 2 records it on its span: all say "done"."""
    h, reader = measured(PROGRESS)
    with h.agent_run("poller"):
        sent: list[tuple[str, str]] = []
        for n in range(3):
            chat(h, sent, (f"c{n}", "poll_job"))
            with h.tracer.start_as_current_span("execute_tool poll_job") as span:
                span.set_attributes(
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll_job"}
                    | {"gen_ai.tool.call.arguments": json.dumps(POLL), "gen_ai.tool.call.id": f"c{n}"}
                )
                if n == 1:
                    span.set_attribute("gen_ai.tool.call.result", "done")
            sent.append((f"c{n}", "done"))
        chat(h, sent, None)
    assert reminded(h) == TODAY[:1]
    assert h.run_lengths() == [1, 2, 3]
    assert unguarded(reader) == {}


def test_a_model_call_open_while_the_tool_ran_does_not_answer_it() -> None:
    """The Vercel AI SDK's streamed step runs its tools while it is open: the step that asked for the call ends after
    the call, yet its request cannot carry the call's result; the run's next step is the one to look in."""
    h, reader = measured(PROGRESS)
    tracer = h.tracer
    asked = json.dumps([{"toolCallId": "c0", "toolName": "poll_job", "input": json.dumps(POLL)}])
    with tracer.start_as_current_span("ai.streamText"):
        step = {"ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-4o"}
        first = tracer.start_span("ai.streamText.doStream", attributes=step)
        tool = {"ai.toolCall.name": "poll_job", "ai.toolCall.args": json.dumps(POLL), "ai.toolCall.id": "c0"}
        tracer.start_span("ai.toolCall", attributes=tool).end()  # recordOutputs: false, so no result
        first.set_attribute("ai.response.toolCalls", asked)
        first.end()
        assert unguarded(reader) == {}  # still awaited
        # the run's next step: no tool messages are read from this shape, so none came back
        tracer.start_span("ai.streamText.doStream", attributes=step).end()
    steps = [s for s in h.exporter.get_finished_spans() if s.name == "ai.streamText.doStream"]
    said = [
        [e.attributes["repeat_tool_guard.reason"] for e in s.events if e.name.endswith(".unguarded")] for s in steps
    ]  # type: ignore[index]
    assert said == [[], [NO_RESULT]]
    assert unguarded(reader) == {(NO_RESULT, "poll_job"): 1}
