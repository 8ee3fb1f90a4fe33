"""Run identity in W3C baggage (no Redis needed): the propagator and helpers of the agent process, and how a
worker's guard resolves spans under a remote parent. In-memory chains, ``remote_runs=True``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.setup.propagation import RunBaggagePropagator, propagate_run, run_context
from otel_repeat_guard.spans.baggage import RUN_BAGGAGE_KEY, run_in, with_run

W3C = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


class Process:
    """A tracer provider with the guard: the agent process or a worker."""

    def __init__(self, config: GuardConfig | None = None) -> None:
        self.reminders: list[Any] = []
        self.guard = RepeatGuardSpanProcessor(config or GuardConfig(remote_runs=True), self.reminders.append)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.guard)
        self.exporter = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.baggage")

    @contextmanager
    def agent_run(self, name: str = "planner") -> Iterator[trace.Span]:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes) as span:
            yield span

    def tool(self, tool: str = "grep", arguments: Any = None, parent: context.Context | None = None) -> ReadableSpan:
        with self.tracer.start_as_current_span(f"execute_tool {tool}", context=parent) as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps(arguments or {"q": 1}),
                }
            )
        finished = self.exporter.get_finished_spans()[-1]
        assert finished.name == f"execute_tool {tool}"
        return finished


def run_length(span: ReadableSpan) -> int:
    lengths = [dict(e.attributes or {}) for e in span.events if e.name == "repeat_tool_guard.repeat"]
    return int(str(lengths[0]["repeat_tool_guard.run_length"])) if lengths else 1


def test_the_propagator_adds_the_current_run_and_keeps_every_other_entry() -> None:
    agent = Process(GuardConfig())
    propagator = CompositePropagator(
        [TraceContextTextMapPropagator(), W3CBaggagePropagator(), RunBaggagePropagator(agent.guard)]
    )
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        carrier: dict[str, str] = {}
        propagator.inject(carrier)  # no span: no run, the other entries go on
        assert carrier == {"baggage": "tenant=acme"}
        with agent.agent_run() as span:
            run_key = agent.guard.current_agent_id()
            carrier = {}
            propagator.inject(carrier)
    finally:
        context.detach(token)
    assert run_key is not None and run_key.startswith("planner#")
    extracted = propagator.extract(carrier)
    assert run_in(extracted) == run_key
    assert baggage.get_baggage("tenant", extracted) == "acme"
    assert trace.get_current_span(extracted).get_span_context().span_id == span.get_span_context().span_id
    assert RunBaggagePropagator().fields == {"baggage"}


def test_the_entry_point_that_otel_propagators_names_is_the_propagator() -> None:
    """``OTEL_PROPAGATORS=...,repeat_tool_guard``: the SDK loads the entry point of that name and calls it."""
    (entry,) = entry_points(group="opentelemetry_propagator", name="repeat_tool_guard")
    assert entry.load() is RunBaggagePropagator
    assert entry.load()().fields == {"baggage"}


def test_the_installed_guard_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_repeat_guard import installed

    agent = Process(GuardConfig())
    monkeypatch.setattr(installed, "_guard", agent.guard)
    with agent.agent_run():
        carrier: dict[str, str] = {}
        RunBaggagePropagator().inject(carrier)
        assert run_in(W3C.extract(carrier)) == agent.guard.current_agent_id()
    monkeypatch.setattr(installed, "_guard", None)
    assert run_in(run_context()) is None  # no guard installed: unchanged


def test_run_context_and_propagate_run_for_code_that_injects_itself() -> None:
    agent = Process(GuardConfig())
    assert run_in(run_context(agent.guard)) is None  # no current span
    with propagate_run(agent.guard) as nothing:
        assert nothing is None
    with agent.agent_run():
        run_key = agent.guard.current_agent_id()
        assert run_in(run_context(agent.guard)) == run_key
        with propagate_run(agent.guard) as named:
            assert named == run_key
            carrier: dict[str, str] = {}
            W3C.inject(carrier)  # the application's own propagators
        assert run_in() is None  # detached again
    assert run_in(W3C.extract(carrier)) == run_key
    assert run_in(with_run("x#1")) == "x#1"


def remote_parent(run_key: str | None, span_id: int = 0xB7AD6B7169203331) -> context.Context:
    """The context a worker extracts from the agent process's headers."""
    carrier = {"traceparent": f"00-0af7651916cd43dd8448eb211c80319c-{span_id:016x}-01"}
    if run_key is not None:
        carrier["baggage"] = f"{RUN_BAGGAGE_KEY}={run_key},tenant=acme"
    return W3C.extract(carrier)


def test_a_worker_counts_calls_under_remote_parents_in_the_named_run() -> None:
    worker = Process()
    spans = [worker.tool(parent=remote_parent("planner#1", span_id=0x1000 + n)) for n in range(4)]
    assert [run_length(s) for s in spans] == [1, 2, 3, 4]
    assert [(r.agent_id, r.run_length) for r in worker.reminders] == [("planner#1", 3)]
    assert worker.guard.run_length("planner#1") == 4
    assert not worker.guard._runs._remote_parent and not worker.guard._runs._remote_open  # nothing left behind
    assert not worker.guard._runs.owned


def test_under_an_activity_span_and_deeper_too_and_the_worker_can_resolve_the_run() -> None:
    worker = Process()
    lengths = []
    for n in range(3):
        activity = worker.tracer.start_as_current_span("RunActivity", context=remote_parent("planner#2", 0x2000 + n))
        with activity, worker.tracer.start_as_current_span("step"):
            assert worker.guard.current_agent_id() == "planner#2"
            lengths.append(run_length(worker.tool()))
    assert lengths == [1, 2, 3]


def test_parallel_children_of_one_remote_parent_share_it_until_the_last_ends() -> None:
    worker = Process()
    parent = remote_parent("planner#3")
    first = worker.tracer.start_span("RunActivity 1", context=parent)
    second = worker.tracer.start_span("RunActivity 2", context=parent)
    first.end()
    assert run_length(worker.tool(parent=trace.set_span_in_context(second))) == 1
    assert run_length(worker.tool(parent=parent)) == 2  # the remote parent is still known: one child is open
    second.end()
    assert not worker.guard._runs.owned


def test_a_nearer_agent_run_span_in_the_worker_keeps_its_own_run() -> None:
    """A worker that runs a whole subagent: its tool calls are the subagent's run, not the remote one's."""
    worker = Process()
    with worker.tracer.start_as_current_span(
        "invoke_agent sub", context=remote_parent("planner#4"), attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        sub = worker.guard.current_agent_id()
        worker.tool()
        worker.tool()
    assert sub is not None and sub.startswith("sub#")
    assert worker.guard.run_length("planner#4") == 0


def test_the_baggage_run_outranks_a_span_that_encloses_model_calls() -> None:
    worker = Process()
    lengths = []
    for n in range(2):
        with worker.tracer.start_as_current_span("RunActivity", context=remote_parent("planner#5", 0x5000 + n)):
            with worker.tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass  # the activity now encloses a model call
            lengths.append(run_length(worker.tool()))
    assert lengths == [1, 2]


def test_without_the_entry_or_without_opting_in_a_remote_parent_names_no_run() -> None:
    worker = Process()
    assert [run_length(worker.tool(parent=remote_parent(None))) for _ in range(3)] == [1, 1, 1]
    not_following = Process(GuardConfig())  # memory store: remote runs are not followed unless asked
    assert [run_length(not_following.tool(parent=remote_parent("planner#6"))) for _ in range(3)] == [1, 1, 1]
    assert not_following.guard.run_length("planner#6") == 0
    assert GuardConfig(chain_store="redis://h/0").follows_remote_runs
    assert not GuardConfig(chain_store="redis://h/0", remote_runs=False).follows_remote_runs


def test_the_store_settings_from_the_environment_and_a_mapping() -> None:
    env = {
        "OTEL_REPEAT_GUARD_STORE": " redis://cache:6379/2 ",
        "OTEL_REPEAT_GUARD_STORE_TIMEOUT_MS": "20",
        "OTEL_REPEAT_GUARD_STORE_EXPIRY_SECONDS": "600",
        "OTEL_REPEAT_GUARD_REMOTE_RUNS": "false",
    }
    config = GuardConfig.from_env(env)
    assert (config.chain_store, config.store_timeout_ms, config.store_expiry_seconds, config.remote_runs) == (
        "redis://cache:6379/2", 20, 600, False,
    )  # fmt: skip
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_CHAIN_STORE": "unix:///run/redis.sock"}).shared_store
    assert GuardConfig.from_mapping({"chainStore": "rediss://h/0", "remoteRuns": True}).remote_runs is True
    assert GuardConfig() == GuardConfig.from_env({})
    assert not GuardConfig().shared_store
    both = {"OTEL_REPEAT_GUARD_STORE": "redis://h/0", "OTEL_REPEAT_GUARD_CHAIN_STORE": " redis://h/0"}
    assert GuardConfig.from_env(both).chain_store == "redis://h/0"  # both names, one value: fine
    with pytest.raises(ValueError, match="remote_runs must be true, false or None, got 'yes'"):
        GuardConfig(remote_runs="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chain_store must be 'memory' or a Redis URL"):
        GuardConfig(chain_store=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_REPEAT_GUARD_STORE": "memcached://h"}, "chain_store must be 'memory' or a Redis URL"),
        (
            {"OTEL_REPEAT_GUARD_STORE": "redis://a/0", "OTEL_REPEAT_GUARD_CHAIN_STORE": "redis://b/0"},
            "OTEL_REPEAT_GUARD_CHAIN_STORE and OTEL_REPEAT_GUARD_STORE \\(chain_store\\) disagree",
        ),
        ({"OTEL_REPEAT_GUARD_STORE_TIMEOUT_MS": "0"}, "store_timeout_ms must be an integer from 1 to 10,000, got 0"),
        ({"OTEL_REPEAT_GUARD_STORE_TIMEOUT_MS": "fast"}, "STORE_TIMEOUT_MS \\(store_timeout_ms\\) must be an integer"),
        ({"OTEL_REPEAT_GUARD_STORE_EXPIRY_SECONDS": "0"}, "store_expiry_seconds must be an integer from 1"),
        ({"OTEL_REPEAT_GUARD_REMOTE_RUNS": "maybe"}, "OTEL_REPEAT_GUARD_REMOTE_RUNS \\(remote_runs\\) must be true"),
    ],
)
def test_bad_store_settings_are_refused_loudly(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GuardConfig.from_env(env)
