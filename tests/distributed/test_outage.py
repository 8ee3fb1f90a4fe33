"""Redis killed mid-run, or too slow: the agent goes on, nothing raises, the failures are counted and logged
once; when Redis is back, the chains continue where it has them."""

from __future__ import annotations

import json
import logging
import time

import pytest

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.state.connection import RETRY_AFTER_SECONDS
from tests.distributed.fleet import AgentProcess
from tests.distributed.servers import RedisServer

ARGUMENTS = json.dumps({"q": "status"})


def call(agent: AgentProcess, tool: str = "poll") -> float:
    """One tool call in the current run; how long it took."""
    started = time.perf_counter()
    with agent.tracer.start_as_current_span(f"execute_tool {tool}") as span:
        span.set_attributes(
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": ARGUMENTS}
        )
    return time.perf_counter() - started


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "otel_repeat_guard" and "chain store" in r.getMessage()]


def test_killing_redis_mid_run_never_reaches_the_agent_and_the_chain_continues_after(
    durable_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "otel_repeat_guard")
    # A generous timeout: this test is about an outage, and on a loaded machine the first command after the
    # restart (a new connection, an fsync'd append) can take longer than the default 50 ms.
    agent = AgentProcess(GuardConfig(chain_store=durable_redis.url, thresholds=(3, 6), store_timeout_ms=2000))
    with agent.agent_run("poller"):
        run_key = agent.guard.current_agent_id()
        assert run_key is not None
        for _ in range(3):
            call(agent)
        assert agent.guard.run_length(run_key) == 3
        assert [r.run_length for r in agent.drain()] == [3]

        durable_redis.kill()
        slowest = max(call(agent) for _ in range(5))  # the agent keeps running: each call falls back here
        assert slowest < 0.5
        assert agent.store_failures() >= 5  # the first failed, the rest were not tried: all counted
        # Nothing raised. The outage's calls were counted in this process's own chain (1..5), whose reminder
        # went to this process's own inbox, which the drain reads too.
        assert [r.run_length for r in agent.drain()] == [3]
        assert len(outage_warnings(caplog)) == 1  # logged once for the outage
        assert "failed" in outage_warnings(caplog)[0]

        durable_redis.start()  # the same port and files: what Redis had survives (fsync'd append-only file)
        time.sleep(RETRY_AFTER_SECONDS + 0.2)  # the pause after the last failure
        call(agent)
        assert agent.guard.run_length(run_key) == 4  # the chain continues where Redis had it
        call(agent)
        call(agent)
        assert [r.run_length for r in agent.drain()] == [6]  # and reminds again, from the shared inbox
        warnings = outage_warnings(caplog)
        assert len(warnings) == 2 and "back" in warnings[1]
    assert agent.store_failures() >= 5  # the counter only rises


def test_a_redis_that_answers_nothing_costs_each_call_the_timeout_at_most(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "otel_repeat_guard")
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, store_timeout_ms=50))
    with agent.agent_run("poller"):
        call(agent)  # connected
        redis_server.pause()
        try:
            timings = [call(agent) for _ in range(20)]
        finally:
            redis_server.resume()
        assert max(timings) < 0.4  # the first waits for its 50 ms timeout; the rest skip Redis for a second
        assert sum(timings) < 1.0
        assert agent.store_failures() >= 20
        assert len(outage_warnings(caplog)) == 1


def test_an_unreachable_redis_from_the_start_is_an_outage_too(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listens on the port: the guard counts in this process, reminders stay in this process's inbox."""
    from tests.distributed.servers import free_port, require_redis

    require_redis()
    caplog.set_level(logging.WARNING, "otel_repeat_guard")
    agent = AgentProcess(GuardConfig(chain_store=f"redis://127.0.0.1:{free_port()}/0", thresholds=(3,)))
    with agent.agent_run("offline"):
        for _ in range(4):
            call(agent)
        run_key = agent.guard.current_agent_id()
        assert run_key is not None
        assert agent.guard.run_length(run_key) == 4
        assert [r.run_length for r in agent.drain()] == [3]
    assert agent.store_failures() > 0
    assert len(outage_warnings(caplog)) == 1
