"""One run's tool calls executed by three worker processes: one chain, one inbox, in Redis.

The agent process injects the W3C headers (``traceparent`` and ``baggage``, the run added by
:class:`~otel_repeat_guard.setup.propagation.RunBaggagePropagator`); each worker extracts them and runs the call
as a tool span with a remote parent. Calls go round-robin, so no worker sees two in a row.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.spans.baggage import RUN_BAGGAGE_KEY
from tests.distributed.fleet import AgentProcess, workers
from tests.distributed.servers import RedisServer

ARGUMENTS = json.dumps({"pattern": "TODO", "path": "src/"})


def test_three_workers_count_one_chain_and_the_agent_drains_each_reminder_once(redis_server: RedisServer) -> None:
    # A generous timeout: this test counts on no call falling back, and on a loaded machine a first call (connect,
    # handshake, script load: one deadline for them all) can take longer than the default 50 ms.
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, thresholds=(3, 5), store_timeout_ms=2000))
    with (
        workers(3, redis_server.url, thresholds="3,5", store_timeout_ms="2000") as fleet,
        agent.agent_run("researcher"),
    ):
        run_key = agent.guard.current_agent_id()
        assert run_key is not None
        lengths, drained = [], []
        for call in range(6):
            headers = agent.headers()
            assert "traceparent" in headers and f"{RUN_BAGGAGE_KEY}=" in headers["baggage"]
            answer = fleet.ask(call % 3, {"headers": headers, "tool": "grep", "arguments": ARGUMENTS})
            lengths.append(answer["run_length"])
            assert all(name != "repeat_tool_guard.unguarded" for name, _ in answer["events"])
            drained.append([(r.run_length, r.tier, r.agent_id) for r in agent.drain()])  # before the next request
            assert agent.guard.run_length(run_key) == call + 1  # the agent process sees the shared chain
        assert lengths == [1, 2, 3, 4, 5, 6]
        assert drained == [[], [], [(3, "gentle", run_key)], [], [(5, "detailed", run_key)], []]
        assert agent.drain() == []  # delivered once
    assert agent.store_failures() == 0


def test_a_tool_span_straight_under_the_remote_parent_counts_too(redis_server: RedisServer) -> None:
    """No activity span in between: the tool span's own parent is the remote one."""
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
    with workers(2, redis_server.url) as fleet, agent.agent_run("coder"):
        answers = [
            fleet.ask(call % 2, {"headers": agent.headers(), "tool": "ls", "arguments": "{}", "activity": False})
            for call in range(4)
        ]
    assert [a["run_length"] for a in answers] == [1, 2, 3, 4]


def test_without_the_baggage_entry_a_workers_call_is_not_in_the_run(redis_server: RedisServer) -> None:
    """Only ``traceparent``: a tool span straight under the remote parent has no run (``no_agent``); under an
    activity span, the activity is its local root, a run of one call each time. No chain forms either way."""
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
    with workers(1, redis_server.url) as fleet, agent.agent_run("researcher"):
        for activity in (False, True):
            for _ in range(3):
                headers = agent.headers()
                headers.pop("baggage")  # the run is not named
                request = {"headers": headers, "tool": "grep", "arguments": ARGUMENTS, "activity": activity}
                answer = fleet.ask(0, request)
                assert answer["run_length"] == 1
                assert answer["events"] == []  # no repeat, ever (a no_agent call is counted on the metric only)


def test_two_concurrent_runs_over_the_same_workers_keep_separate_chains(redis_server: RedisServer) -> None:
    """Runs A and B, open at once, send the very same call through the same three workers, interleaved."""
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, thresholds=(3,), store_timeout_ms=2000))
    tracer = agent.tracer
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "twin"}
    run_a = tracer.start_span("invoke_agent twin", attributes=attributes)
    run_b = tracer.start_span("invoke_agent twin", attributes=attributes)
    from opentelemetry.trace import use_span

    lengths: dict[str, list[int]] = {"a": [], "b": []}
    keys = {}
    with workers(3, redis_server.url, thresholds="3") as fleet:
        for call in range(8):
            for name, run in (("a", run_a), ("b", run_b)):
                with use_span(run, end_on_exit=False):
                    keys[name] = agent.guard.current_agent_id()
                    headers = agent.headers()
                answer = fleet.ask(
                    (call + (name == "b")) % 3, {"headers": headers, "tool": "grep", "arguments": ARGUMENTS}
                )
                lengths[name].append(answer["run_length"])
        with use_span(run_a, end_on_exit=False):
            reminders_a = agent.drain()
        with use_span(run_b, end_on_exit=False):
            reminders_b = agent.drain()
    run_a.end()
    run_b.end()
    assert keys["a"] != keys["b"]
    assert lengths == {"a": list(range(1, 9)), "b": list(range(1, 9))}
    assert [(r.agent_id, r.run_length) for r in reminders_a] == [(keys["a"], 3)]
    assert [(r.agent_id, r.run_length) for r in reminders_b] == [(keys["b"], 3)]


def test_workers_answering_concurrently_never_lose_or_double_a_call(redis_server: RedisServer) -> None:
    """Parallel tool calls of one run, in flight on three workers at once: the counts are still 1..n once each."""
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, thresholds=(3,), store_timeout_ms=2000))
    with workers(3, redis_server.url, thresholds="3") as fleet, agent.agent_run("fanout"):
        requests = [{"headers": agent.headers(), "tool": "fetch", "arguments": ARGUMENTS} for _ in range(30)]
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda worker: [fleet.ask(worker, r) for r in requests[worker::3]], range(3)))
        lengths = sorted(a["run_length"] for batch in answers for a in batch)
        assert lengths == list(range(1, 31))
        assert [r.run_length for r in agent.drain()] == [3]
