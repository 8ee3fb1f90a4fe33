"""Every chain rule of the guard, each as its own test, through a real TracerProvider."""

from __future__ import annotations

import json

import xxhash
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, use_span

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.canonical import RAW_KEY_MIN_CHARS, arguments_digest, canonical_bytes

from .conftest import Harness, make_harness

PARIS = {"city": "Paris", "units": "metric"}


def test_identical_calls_increment_and_a_different_call_resets(harness: Harness) -> None:
    with harness.agent_run("planner"):
        for _ in range(3):
            harness.call("lookup", PARIS)
        harness.call("lookup", {"city": "Rome", "units": "metric"})
        harness.call("lookup", {"city": "Rome", "units": "metric"})
        harness.call("weather", {"city": "Rome", "units": "metric"})  # same arguments, other tool
    assert harness.run_lengths() == [1, 2, 3, 1, 2, 1]


def test_key_order_and_whitespace_do_not_make_a_call_different(harness: Harness) -> None:
    with harness.agent_run("planner"):
        harness.call("lookup", '{"city": "Paris", "units": "metric"}')
        harness.call("lookup", '{"units":"metric","city":"Paris"}')
        harness.call("lookup", {"units": "metric", "city": "Paris"})
    assert harness.run_lengths() == [1, 2, 3]


def test_untracked_calls_are_transparent(harness: Harness) -> None:
    with harness.agent_run("planner"):
        harness.call("grep", {"q": "X"})
        harness.call("todo_write", {"todos": ["a"]})
        harness.call("grep", {"q": "X"})
        harness.call("todo_write", {"todos": ["b"]})
        harness.call("grep", {"q": "X"})
    grep_runs = [n for n, s in zip(harness.run_lengths(), harness.tool_spans(), strict=True) if "grep" in s.name]
    assert grep_runs == [1, 2, 3]
    assert len(harness.reminders) == 1
    assert all(not s.events for s in harness.tool_spans() if "todo_write" in s.name)


def test_include_limits_tracking_to_matching_tools() -> None:
    h = make_harness(GuardConfig(include=["read_*"], exclude=[]))
    with h.agent_run("a"):
        for _ in range(3):
            h.call("read_file", {"path": "a"})
            h.call("bash", {"cmd": "ls"})
    assert [r.tool_name for r in h.reminders] == ["read_file"]


def test_denied_and_failed_calls_count_and_are_flagged(harness: Harness) -> None:
    with harness.agent_run("planner"):
        harness.call("rm", {"path": "/"}, error=True)
        harness.call("rm", {"path": "/"}, error=True)
        with harness.tracer.start_as_current_span("execute_tool rm") as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "rm",
                    "gen_ai.tool.call.arguments": '{"path": "/"}',
                    "error.type": "PermissionDenied",
                }
            )
        harness.call("rm", {"path": "/"})
    assert harness.run_lengths() == [1, 2, 3, 4]
    flags = [
        e.attributes["repeat_tool_guard.error"]
        for s in harness.tool_spans()
        for e in s.events
        if e.name.endswith("repeat")
    ]  # type: ignore[index]
    assert flags == [True, True, False]
    assert harness.reminders[0].tool_name == "rm"


def test_calls_without_an_agent_are_ignored(harness: Harness) -> None:
    for _ in range(5):
        harness.call("grep", {"q": "X"})  # no parent at all
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with use_span(NonRecordingSpan(remote)):  # a parent in another process: no local ancestor
        for _ in range(5):
            harness.call("grep", {"q": "X"})
    assert harness.reminders == []
    assert all(not s.events for s in harness.exporter.get_finished_spans())


def test_without_an_agent_span_the_local_root_stands_for_the_run(harness: Harness) -> None:
    """Issue 3: when no ancestor is an agent run, the top of the live ancestor chain is."""
    tracer = harness.tracer
    with tracer.start_as_current_span("LangGraph") as root, tracer.start_as_current_span("tools"):
        for _ in range(3):
            harness.call("grep", {"q": "X"})
    with tracer.start_as_current_span("LangGraph"):  # the next run: a new root, a fresh chain
        harness.call("grep", {"q": "X"})
    assert harness.run_lengths() == [1, 2, 3, 1]
    (reminder,) = harness.reminders
    assert reminder.agent_name == "LangGraph"
    assert reminder.agent_id == f"LangGraph#{root.get_span_context().span_id:016x}"
    assert len(harness.guard._chains) == 0  # each root owned its chain and dropped it at its end


def test_chains_are_per_agent_even_when_interleaved(harness: Harness) -> None:
    for _ in range(4):
        harness.call("grep", {"q": "X"}, agent_id="alice")
        harness.call("grep", {"q": "X"}, agent_id="bob")
        harness.call("read", {"p": 1}, agent_id="carol")
        harness.call("read", {"p": 2}, agent_id="carol")
    assert harness.guard.run_length("alice") == 4
    assert harness.guard.run_length("bob") == 4
    assert harness.guard.run_length("carol") == 1
    assert sorted((r.agent_id, r.run_length) for r in harness.reminders) == [("alice", 3), ("bob", 3)]


def test_concurrent_runs_of_one_agent_keep_separate_chains(harness: Harness) -> None:
    """Two open runs of the same named agent, tool spans alternating between them."""
    tracer = harness.tracer
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    run_a = tracer.start_span("invoke_agent researcher", attributes=attrs)
    run_b = tracer.start_span("invoke_agent researcher", attributes=attrs)
    for _ in range(3):
        for run in (run_a, run_b):
            with use_span(run):
                harness.call("search", {"q": "same"})
    run_a.end()
    run_b.end()
    assert [r.run_length for r in harness.reminders] == [3, 3]
    assert len({r.agent_id for r in harness.reminders}) == 2
    assert {r.agent_name for r in harness.reminders} == {"researcher"}
    assert all(r.agent_id.startswith("researcher#") for r in harness.reminders)


def test_reset_starts_the_chain_afresh(harness: Harness) -> None:
    for _ in range(2):
        harness.call("grep", {"q": "X"}, agent_id="alice")
    harness.guard.reset("alice")
    assert harness.guard.run_length("alice") == 0
    harness.call("grep", {"q": "X"}, agent_id="alice")
    assert harness.guard.run_length("alice") == 1


def test_a_new_agent_run_for_the_same_agent_resets(harness: Harness) -> None:
    with harness.agent_run("planner", agent_id="agent-7"):
        harness.call("grep", {"q": "X"}, agent_id="agent-7")
        harness.call("grep", {"q": "X"}, agent_id="agent-7")
    assert harness.guard.run_length("agent-7") == 2  # an explicit id outlives the run span
    with harness.agent_run("planner", agent_id="agent-7"):  # the next user prompt
        assert harness.guard.run_length("agent-7") == 0
        harness.call("grep", {"q": "X"}, agent_id="agent-7")
    assert harness.run_lengths() == [1, 2, 1]


def test_forget_drops_the_agent_state(harness: Harness) -> None:
    for _ in range(2):
        harness.call("grep", {"q": "X"}, agent_id="alice")
    harness.guard.forget("alice")
    assert harness.guard.run_length("alice") == 0
    assert len(harness.guard._chains) == 0


def test_state_is_bounded_by_max_agents_and_holds_no_payload() -> None:
    h = make_harness(max_agents=3)
    payload = {"blob": "x" * 10_000}
    for agent in ("a", "b", "c", "d"):
        h.call("put", payload, agent_id=agent)
    assert len(h.guard._chains) == 3
    assert h.guard.run_length("a") == 0  # least recently active, evicted
    stored = [(chain.key, chain.keyed_raw) for chain in h.guard._chains._chains.values()]
    # 16-byte digests of the canonical form and of the raw text, never the 10 KB payload
    assert all(
        key is not None and len(key) == 16 and keyed_raw is not None and keyed_raw[:16] == key and len(keyed_raw) == 32
        for key, keyed_raw in stored
    )


def test_a_chain_keyed_to_an_agent_run_span_ends_with_it(harness: Harness) -> None:
    with harness.agent_run("planner"):
        harness.call("grep", {"q": "X"})
        harness.call("grep", {"q": "X"})
        (agent_id,) = {r for r in harness.guard._chains._chains}
        assert harness.guard.run_length(agent_id) == 2
    assert harness.guard.run_length(agent_id) == 0
    assert len(harness.guard._chains) == 0


def test_an_agent_run_without_a_name_is_keyed_by_its_span_name() -> None:
    h = make_harness(GuardConfig(thresholds=(2,)))
    with h.tracer.start_as_current_span("invoke_agent"):  # recognized by name alone
        h.call("grep", {"q": "X"})
        h.call("grep", {"q": "X"})
    (reminder,) = h.reminders
    assert reminder.agent_name == "invoke_agent"
    assert reminder.agent_id.startswith("invoke_agent#")


def test_thresholds_fire_at_exact_counts_then_go_silent() -> None:
    h = make_harness(GuardConfig(thresholds=(2, 4)))
    with h.agent_run("a"):
        for _ in range(9):
            h.call("grep", {"q": "X"})
    assert [(r.run_length, r.threshold, r.tier) for r in h.reminders] == [(2, 2, "gentle"), (4, 4, "detailed")]


def test_detection_reads_attributes_set_after_start_in_end_order(harness: Harness) -> None:
    tracer = harness.tracer
    with harness.agent_run("a"):
        first = tracer.start_span("execute_tool grep")
        second = tracer.start_span("execute_tool grep")
        for span, q in ((first, "A"), (second, "B")):
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": q}
            )
        second.end()  # B ends first
        first.end()
        harness.call("grep", "A")
    assert [s.attributes["gen_ai.tool.call.arguments"] for s in harness.tool_spans()] == ["B", "A", "A"]
    assert harness.run_lengths() == [1, 1, 2]


def test_a_tool_span_without_arguments_resets_and_never_triggers() -> None:
    h = make_harness(GuardConfig(thresholds=(2,)))
    with h.agent_run("a"):
        h.call("grep", {"q": "X"})
        h.call("grep")
        h.call("grep")
        h.call("grep", {"q": "X"})
    assert h.run_lengths() == [1, 1, 1, 1]
    assert h.reminders == []


def test_tool_name_falls_back_to_the_span_name(harness: Harness) -> None:
    with harness.agent_run("a"):
        for _ in range(3):
            with harness.tracer.start_as_current_span("execute_tool fetch_page") as span:
                span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "u"})
        with harness.tracer.start_as_current_span("execute_tool") as span:  # no name at all: ignored
            span.set_attribute("gen_ai.operation.name", "execute_tool")
    assert [r.tool_name for r in harness.reminders] == ["fetch_page"]


def _three_denied_rm_calls(harness: Harness) -> None:
    with harness.agent_run("a"):
        for _ in range(3):
            with harness.tracer.start_as_current_span("execute_tool rm") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "rm",
                        "gen_ai.tool.call.arguments": "{}",
                    }
                )
                span.set_status(Status(StatusCode.ERROR, "denied"))


SEED_ATTRIBUTES = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "rm",
    "gen_ai.tool.call.arguments": "{}",
}


def test_with_record_facts_false_the_guard_never_changes_name_attributes_or_status() -> None:
    harness = make_harness(record_facts=False)
    _three_denied_rm_calls(harness)
    for span in harness.tool_spans():
        assert span.name == "execute_tool rm"
        assert dict(span.attributes or {}) == SEED_ATTRIBUTES
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "denied"
    agent_span = harness.exporter.get_finished_spans()[-1]
    assert agent_span.name == "invoke_agent a"
    assert agent_span.events == ()
    assert "repeat_tool_guard.run" not in (agent_span.attributes or {})


def test_by_default_the_guard_adds_its_facts_and_changes_no_name_attribute_or_status(harness: Harness) -> None:
    """Facts are on by default (issue 40, item 1): each tool span gains the run it decided, nothing else changes."""
    _three_denied_rm_calls(harness)
    for span in harness.tool_spans():
        assert span.name == "execute_tool rm"
        attributes = dict(span.attributes or {})
        assert {k: v for k, v in attributes.items() if not k.startswith("repeat_tool_guard.")} == SEED_ATTRIBUTES
        assert str(attributes["repeat_tool_guard.run"]).startswith("a#")  # the run of agent a, keyed by its span
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "denied"
    assert harness.run_lengths() == [1, 2, 3]
    assert [(r.run_length, r.tier) for r in harness.reminders] == [(3, "gentle")]


def test_repeat_event_attributes(harness: Harness) -> None:
    with harness.agent_run("a"):
        harness.call("grep", {"q": "X"})
        harness.call("grep", {"q": "X"})
    first, second = harness.tool_spans()
    assert first.events == ()
    (event,) = second.events
    assert event.name == "repeat_tool_guard.repeat"
    attributes = dict(event.attributes or {})
    assert attributes.pop("repeat_tool_guard.agent_id").startswith("a#")  # type: ignore[union-attr]
    assert attributes == {
        "repeat_tool_guard.run_length": 2,
        "gen_ai.tool.name": "grep",
        "repeat_tool_guard.arguments_digest": xxhash.xxh3_128_hexdigest(b'{"q":"X"}'),
        "repeat_tool_guard.error": False,
    }
    assert event.timestamp == second.end_time


def test_long_arguments_repeat_byte_for_byte_or_only_canonically() -> None:
    """Long texts take the raw-key shortcut when unchanged; the answer is the canonical one either way."""
    h = make_harness(GuardConfig(thresholds=(3,)))
    blob = "x" * RAW_KEY_MIN_CHARS
    same = json.dumps({"path": "a.py", "blob": blob})
    reordered = json.dumps({"blob": blob, "path": "a.py"}, indent=1)
    other = json.dumps({"path": "b.py", "blob": blob})
    for arguments in (same, same, reordered, same, other, other, "[not json " + blob):
        h.call("read", arguments, agent_id="a")
    h.call("write", other, agent_id="a")  # same arguments, another tool
    assert h.run_lengths() == [1, 2, 3, 4, 1, 2, 1, 1]
    digests = {
        e.attributes["repeat_tool_guard.arguments_digest"]  # type: ignore[index]
        for span in h.tool_spans()[:4]
        for e in span.events
        if e.name == "repeat_tool_guard.repeat"
    }
    assert digests == {arguments_digest(canonical_bytes(same))}  # one digest for the whole run
    (reminder,) = h.reminders
    assert reminder.run_length == 3 and reminder.arguments_preview.startswith('{"blob":"xxx')  # canonical, sorted


def test_raw_key_shortcut_never_crosses_agents() -> None:
    h = make_harness()
    text = json.dumps({"blob": "y" * RAW_KEY_MIN_CHARS})
    h.call("read", text, agent_id="a")
    h.call("read", text, agent_id="b")
    h.call("read", text, agent_id="a")
    assert h.run_lengths() == [1, 1, 2]
