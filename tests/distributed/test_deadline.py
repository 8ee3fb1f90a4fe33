"""A deadline per call to the shared store: a Redis that trickles its replies, one byte within every read's
timeout, costs a span ``store_timeout_ms`` at most (and a little for the machine), falls back, is counted as a
timeout, and leaves no half-read reply behind: when the server is quick again, the chain goes on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis

from otel_repeat_guard import GuardConfig, Reminder
from otel_repeat_guard.decide.inbox import RedisReminderInbox
from otel_repeat_guard.state.connection import RETRY_AFTER_SECONDS, STORE_FAILURES
from tests.distributed.fleet import AgentProcess
from tests.distributed.servers import RedisServer, TrickleProxy

TIMEOUT_MS = 250
"""The store's deadline: wide enough that the calls after the trickle, on a loaded machine, finish within it."""
MARGIN = 0.15
"""What a span may wait beyond the timeout on a loaded machine (the trickle alone took 2.45 s before)."""
ARGUMENTS = json.dumps({"q": "status"})


@pytest.fixture
def trickle(redis_server: RedisServer) -> Iterator[TrickleProxy]:
    proxy = TrickleProxy(redis_server.port, delay=0.1)  # a reply of 4 bytes or more: 400 ms or more
    try:
        yield proxy
    finally:
        proxy.close()


def end_one_call(agent: AgentProcess) -> float:
    """One tool call in the current run: how long its ``span.end()`` took (where the guard counts it)."""
    span = agent.tracer.start_span(
        "execute_tool poll",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "poll",
            "gen_ai.tool.call.arguments": ARGUMENTS,
        },
    )
    started = time.perf_counter()
    span.end()
    return time.perf_counter() - started


def failures_by_reason(agent: AgentProcess) -> dict[tuple[str, str], int]:
    data = agent.metrics.get_metrics_data()
    found: dict[tuple[str, str], int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == STORE_FAILURES:
                    for point in metric.data.data_points:
                        attributes = point.attributes or {}
                        key = (str(attributes["operation"]), str(attributes["reason"]))
                        found[key] = int(point.value)  # type: ignore[union-attr]
    return found


def scripts_run(server: RedisServer) -> int:
    """How many scripts the real server has run (``EVALSHA``: each ``observe`` is one), read past the proxy."""
    stats = redis.Redis(port=server.port).info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_redis_that_trickles_its_reply_costs_a_span_the_timeout_at_most_and_the_chain_goes_on(
    trickle: TrickleProxy, redis_server: RedisServer
) -> None:
    agent = AgentProcess(GuardConfig(chain_store=trickle.url, thresholds=(4,), store_timeout_ms=TIMEOUT_MS))
    with agent.agent_run("poller"):
        run_key = agent.guard.current_agent_id()
        assert run_key is not None
        end_one_call(agent)  # connected, the scripts loaded: run 1, in Redis
        assert agent.guard.run_length(run_key) == 1

        before = scripts_run(redis_server)
        trickle.trickling = True  # one byte every 100 ms: each read within 250 ms, no reply within 250 ms
        took = end_one_call(agent)
        assert took < TIMEOUT_MS / 1000 + MARGIN, f"span.end() took {took:.3f} s"
        assert failures_by_reason(agent) == {("observe", "timeout"): 1}  # fell back, counted as a timeout
        assert agent.guard.run_length(run_key) == 1  # counted here meanwhile (the pause after a failure)
        assert failures_by_reason(agent)[("run_length", "unavailable")] == 1

        trickle.trickling = False
        time.sleep(RETRY_AFTER_SECONDS + 0.2)
        # The trickled call's script ran in Redis if its request got through before the client gave up (only
        # the reply was slow); on a loaded machine the proxy may not have passed it on by then. Redis says which.
        ran = scripts_run(redis_server) - before
        assert ran in (0, 1)
        end_one_call(agent)
        # Redis counted the trickled call once if it ran it, and this one next. Nothing of the abandoned reply
        # was read as this call's: its connection was dropped.
        assert agent.guard.run_length(run_key) == 2 + ran
        assert trickle.connections == 2
        for _ in range(2 - ran):
            end_one_call(agent)
        assert [r.run_length for r in agent.drain()] == [4]  # the reminder, from the shared inbox


def reminder(agent_id: str) -> Reminder:
    return Reminder(agent_id, "poller", "poll", 3, 3, "gentle", "text", "{}", "0" * 32, "0" * 16)


def test_a_redis_that_trickles_its_reply_costs_the_shared_inbox_the_timeout_at_most(
    trickle: TrickleProxy, redis_server: RedisServer
) -> None:
    inbox = RedisReminderInbox(trickle.url, timeout_ms=TIMEOUT_MS)
    inbox.put(reminder("run-0"))  # connected, both scripts loaded
    assert [r.agent_id for r in inbox.drain("run-0")] == ["run-0"]
    before = scripts_run(redis_server)
    trickle.trickling = True
    started = time.perf_counter()
    inbox.put(reminder("run-1"))  # its reply never came in time
    took = time.perf_counter() - started
    assert took < TIMEOUT_MS / 1000 + MARGIN, f"put took {took:.3f} s"
    assert inbox.health.down
    assert [r.agent_id for r in inbox.drain("run-1")] == ["run-1"]  # kept here instead

    trickle.trickling = False
    time.sleep(RETRY_AFTER_SECONDS + 0.2)
    ran = scripts_run(redis_server) - before  # whether the trickled put got through before the client gave up
    assert ran in (0, 1)
    inbox.put(reminder("run-2"))
    # A trickled put that reached Redis (its reply was slow, not its command) is in the box, and the reply
    # read now is this drain's own, not the abandoned one's.
    assert [r.agent_id for r in inbox.drain("run-1")] == ["run-1"] * ran
    assert [r.agent_id for r in inbox.drain("run-2")] == ["run-2"]
    assert not inbox.health.down
