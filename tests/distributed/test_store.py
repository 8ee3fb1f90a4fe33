"""The Redis store in one process: the same answers as the in-memory guard, every detector on; the inbox."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.decide.inbox import RedisReminderInbox, ReminderInbox, reminder_inbox
from otel_repeat_guard.state.connection import wire
from tests.distributed.servers import RedisServer

RANDOM = (
    "repeat_tool_guard.agent_id",
    "repeat_tool_guard.span_id",
    "repeat_tool_guard.trace_id",
    "repeat_tool_guard.run",  # the facts (on by default) name the run's span and the model call's too
    "repeat_tool_guard.issuer",
)
"""Event attributes that name the run's span or a model call's: a new random id in each run of the script."""
LOOPS = GuardConfig(
    thresholds=(3, 5), cycle_thresholds=(2, 3), no_progress_thresholds=(3,), collapse_parallel=True, stop_at=7
)


def reminder(agent_id: str, run_length: int = 3) -> Reminder:
    return Reminder(agent_id, "agent", "grep", run_length, run_length, "gentle", "text", "{}", "ab" * 16, "cd" * 8)


def script(seed: int, calls: int) -> list[tuple[str, str, str, bool]]:
    """(tool, arguments, result, parallel with the previous call) for a loopy agent: repeats, cycles, no progress."""
    rng = random.Random(seed)
    out = []
    for _ in range(calls):
        if out and rng.random() < 0.4:  # the very same call again
            out.append((*out[-1][:3], rng.random() < 0.15))
            continue
        tool = rng.choice(["grep", "grep", "read", "ls"])
        arguments = json.dumps({"q": rng.choice(["a", "b", "c"])})
        result = rng.choice(["same", "same", "other"])
        out.append((tool, arguments, result, rng.random() < 0.15))
    return out


def run_script(
    config: GuardConfig, steps: list[tuple[str, str, str, bool]]
) -> tuple[list[Any], list[Any], dict[Any, int]]:
    reader = InMemoryMetricReader()
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(config, reminders.append, meter_provider=MeterProvider(metric_readers=[reader]))
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.distributed")
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "loopy", "gen_ai.agent.id": "loopy"}
    with tracer.start_as_current_span("invoke_agent loopy", attributes=attributes):
        open_span = None
        for tool, arguments, result, parallel in steps:
            span = tracer.start_span(f"execute_tool {tool}")
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": arguments,
                    "gen_ai.tool.call.result": result,
                }
            )
            if parallel and open_span is not None:
                open_span.end()  # the two overlapped: a parallel pair of one step
                span.end()
                open_span = None
                continue
            if open_span is not None:
                open_span.end()
            open_span = span
        if open_span is not None:
            open_span.end()
    events = [
        [(e.name, {k: v for k, v in (e.attributes or {}).items() if k not in RANDOM}) for e in s.events]
        for s in exporter.get_finished_spans()
    ]
    found = [(r.kind, r.tool_name, r.run_length, r.threshold, r.tier, r.period) for r in reminders]
    outcomes: dict[Any, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name in ("repeat_tool_guard.reminder_outcomes", "repeat_tool_guard.run_length"):
                    for point in metric.data.data_points:  # type: ignore[union-attr]
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)  # type: ignore[attr-defined]
                        outcomes[(metric.name, tuple(sorted(point.attributes.items())))] = value
    return events, found, outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_detector_answers_as_in_memory(redis_server: RedisServer, seed: int) -> None:
    """The detectors' state makes the round trip through Redis after every call: events, reminders, reminder
    outcomes and run lengths all come out exactly as from the in-memory guard."""
    steps = script(seed, 300)
    memory = run_script(LOOPS, steps)
    # the state's round trip, not the deadline (test_deadline.py, test_outage.py): a busy CI machine once took
    # over the default 50 ms, and the call counted in this process instead
    shared_config = {**_fields(LOOPS), "chain_store": redis_server.url, "store_timeout_ms": 2000}
    shared = run_script(GuardConfig(**shared_config), steps)
    assert shared[1] == memory[1]
    assert shared[0] == memory[0]
    assert shared[2] == memory[2]
    assert {kind for kind, *_ in memory[1]} == {"repeat", "cycle", "no_progress"}  # the script loops every way
    assert any(name == "repeat_tool_guard.parallel_duplicate" for span in memory[0] for name, _ in span)
    assert {key[0] for key in memory[2]} == {"repeat_tool_guard.reminder_outcomes", "repeat_tool_guard.run_length"}


def _fields(config: GuardConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_the_inbox_delivers_each_reminder_once_oldest_first_bounded(redis_server: RedisServer) -> None:
    putter = RedisReminderInbox(redis_server.url, per_agent=3)
    drainer = RedisReminderInbox(redis_server.url)  # another process's, as far as Redis knows
    for n in range(5):
        putter.put(reminder("run#1", n))
    putter.put(reminder("run#2"))
    assert sorted(drainer.pending()) == ["run#1", "run#2"]
    assert [r.run_length for r in drainer.peek("run#1")] == [2, 3, 4]  # at most per_agent, the oldest dropped
    drained = drainer.drain("run#1")
    assert drained == [reminder("run#1", n) for n in (2, 3, 4)]  # a Reminder comes back equal to itself
    assert putter.drain("run#1") == []
    assert drainer.pending() == ["run#2"]
    assert isinstance(drainer, ReminderInbox)  # what the framework adapters accept


def test_the_inbox_that_goes_with_a_configuration() -> None:
    assert type(reminder_inbox(GuardConfig())) is ReminderInbox
    assert type(reminder_inbox(GuardConfig(chain_store="redis://127.0.0.1:1/0"))) is RedisReminderInbox


def test_a_password_never_reaches_a_log_line_or_the_configurations_repr() -> None:
    assert safe_url("redis://user:s3cret@host:6379/0") == "redis://***@host:6379/0"
    assert safe_url("redis://:s3cret@host/0") == "redis://***@host/0"
    assert safe_url("redis://host:6379/0") == "redis://host:6379/0"
    assert "s3cret" not in repr(GuardConfig(chain_store="redis://:s3cret@host/0"))
    # redis-py's query form, and an @ in the query, which is no password's end
    assert safe_url("redis://host:6379/0?password=s3cret&db=1") == "redis://host:6379/0?password=***&db=1"
    assert safe_url("redis://u:s3cret@10.0.0.1:6379/0?client_name=me@host") == (
        "redis://***@10.0.0.1:6379/0?client_name=me@host"
    )
    assert safe_url("unix://:s3cret@/run/redis.sock?db=2") == "unix://***@/run/redis.sock?db=2"
    with pytest.raises(ValueError, match="disagree") as refused:
        GuardConfig.from_env(
            {"OTEL_REPEAT_GUARD_STORE": "redis://:s3cret@h/0", "OTEL_REPEAT_GUARD_CHAIN_STORE": "redis://:s3cret@h/1"}
        )
    assert "s3cret" not in str(refused.value) and "'redis://***@h/1' vs 'redis://***@h/0'" in str(refused.value)


def _late_outcomes(config: GuardConfig) -> tuple[list[Any], list[Any]]:
    """CrewAI's shape: no tool spans; each model call asks for one call and carries the earlier ones' results."""
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(config, reminders.append)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.distributed")
    answered: list[dict[str, Any]] = []
    with tracer.start_as_current_span("invoke_agent late", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(5):
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
                span.set_attribute("gen_ai.input.messages", json.dumps([{"role": "tool", "parts": answered}]))
                part = {"type": "tool_call", "id": f"c{i}", "name": "grep", "arguments": {"q": i}}
                span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))
            answered = [*answered, {"type": "tool_call_response", "id": f"c{i}", "response": "no match"}]
    provider.shutdown()
    events = [
        (e.name, {k: v for k, v in (e.attributes or {}).items() if k not in RANDOM})
        for span in exporter.get_finished_spans()
        for e in span.events
    ]
    return events, [(r.kind, r.tool_name, r.run_length, r.tier) for r in reminders]


def test_calls_awaiting_their_outcomes_wait_in_redis_as_in_memory(redis_server: RedisServer) -> None:
    memory = _late_outcomes(LOOPS)
    assert memory[1] == [("no_progress", "grep", 3, "gentle")]
    assert _late_outcomes(GuardConfig(**{**_fields(LOOPS), "chain_store": redis_server.url})) == memory


def test_a_shared_store_keeps_its_chains_itself(redis_server: RedisServer) -> None:
    """A harness that carries chains between processes (the Claude Code hook) has nothing to carry with Redis."""
    guard = RepeatGuardSpanProcessor(GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
    guard.restore_chain("run", ["grep", b"k", 2, []])
    assert guard.chain_state("run") is None
    assert RepeatGuardSpanProcessor().chain_state("run") is None  # in memory: none for a run it never saw


def test_a_lone_surrogate_in_one_runs_names_costs_no_other_run_its_shared_state(redis_server: RedisServer) -> None:
    """A Python string may hold a lone surrogate (a model's cut output, a Node JSON escape). redis-py refused to
    encode it, the failure took the store down, and every other run of the process counted only locally."""
    inbox = RedisReminderInbox(redis_server.url, timeout_ms=2000)
    config = GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000, thresholds=(3,))
    reader = InMemoryMetricReader()
    guard = RepeatGuardSpanProcessor(config, inbox.put, meter_provider=MeterProvider(metric_readers=[reader]))
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("tests.distributed")

    def run(name: str) -> Any:
        return tracer.start_span(
            f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        )

    good, odd = run("good"), run("odd\ud800name")
    keys = {span: guard.current_agent_id(set_span_in_context(span)) for span in (good, odd)}
    for _ in range(3):
        for span, tool in ((odd, "grep\udc00"), (good, "grep")):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": "{}",
            }
            tracer.start_span("execute_tool", context=set_span_in_context(span), attributes=attributes).end()
    client = redis.Redis.from_url(redis_server.url)
    assert client.hget(f"repeat_tool_guard:run:{keys[good]}", "n") == b"3"
    assert client.hget(wire(f"repeat_tool_guard:run:{keys[odd]}"), "n") == b"3"
    assert guard.run_length(keys[odd]) == 3
    assert [(r.tool_name, r.run_length) for r in inbox.drain(keys[odd])] == [("grep\udc00", 3)]
    assert [(r.tool_name, r.run_length) for r in inbox.drain(keys[good])] == [("grep", 3)]
    assert inbox.pending() == []
    assert not guard._chains.health.down  # type: ignore[attr-defined]
    provider.shutdown()


def test_a_run_length_redis_holds_that_is_no_count_is_read_as_this_processs(redis_server: RedisServer) -> None:
    guard = RepeatGuardSpanProcessor(GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
    redis.Redis.from_url(redis_server.url).hset(
        "repeat_tool_guard:run:odd", mapping={"t": "grep", "k": "x", "n": "3.5"}
    )
    assert guard.run_length("odd") == 0


def test_listing_the_inboxes_of_a_large_keyspace_answers_and_leaves_the_store_up(redis_server: RedisServer) -> None:
    """A scan of every key takes longer than one call's 50 ms: it used to answer [] and take the store down, so
    every run of the process counted only locally for a second."""
    client = redis.Redis.from_url(redis_server.url)
    pipe = client.pipeline(transaction=False)
    for chunk in range(40):
        pipe.mset({f"other:{chunk}:{n}": "x" for n in range(5_000)})
    pipe.execute()
    inbox = RedisReminderInbox(redis_server.url)  # the default 50 ms per call
    for run in ("run#1", "run#2", "run#3"):
        inbox.put(reminder(run))
    assert sorted(inbox.pending()) == ["run#1", "run#2", "run#3"]
    assert not inbox.health.down

    redis_server.pause()  # a scan that cannot finish: this process's answer, and the store still up
    try:
        assert RedisReminderInbox(redis_server.url).pending() == []
        assert not inbox.health.down
    finally:
        redis_server.resume()


def test_a_tools_policy_and_progress_results_answer_on_redis_as_in_memory(redis_server: RedisServer) -> None:
    """The thresholds and stop of each tool's policy word the run lengths Redis keeps; under progress: results the
    chain key Redis compares holds the result's digest, so a poll that moves is no loop there either."""
    config = GuardConfig(
        thresholds=(3, 5),
        stop_at=7,
        tools={"grep": {"thresholds": [2, 4], "stop_at": 6}, "read": {"progress": "results"}},
    )
    same = json.dumps({"q": "a"})
    steps = [("grep", same, "x", False)] * 7
    steps += [("read", same, f"line {n}", False) for n in range(5)] + [("read", same, "eof", False)] * 4
    steps += [("ls", same, f"{n} files", False) for n in range(3)]
    memory = run_script(config, steps)
    shared = run_script(GuardConfig(**{**_fields(config), "chain_store": redis_server.url}), steps)
    assert shared == memory
    assert memory[1] == [
        ("repeat", "grep", 2, 2, "gentle", 1),
        ("repeat", "grep", 4, 4, "detailed", 1),
        ("repeat", "grep", 6, 6, "stop", 1),
        ("repeat", "read", 3, 3, "gentle", 1),  # the third "eof": the five lines before were progress
        ("repeat", "ls", 3, 3, "gentle", 1),  # ls compares no results: its changing counts are a loop
    ]
