"""Idle expiry, and ``reset`` / ``forget`` from another process, as ``docs/distributed.md`` says."""

from __future__ import annotations

import subprocess
import sys
import time

import redis

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.decide.inbox import RedisReminderInbox
from otel_repeat_guard.state.connection import INBOX_PREFIX, RUN_PREFIX
from otel_repeat_guard.state.redis import RedisChainStore
from tests.distributed.fleet import AgentProcess
from tests.distributed.servers import RedisServer

OTHER_PROCESS = """
import sys
from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
guard = RepeatGuardSpanProcessor(GuardConfig(chain_store=sys.argv[1], store_timeout_ms=2000))
getattr(guard, sys.argv[2])(sys.argv[3])
print(guard.run_length(sys.argv[3]))
"""


def in_another_process(url: str, method: str, run_key: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, url, method, run_key],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout)


def test_a_run_idle_past_the_expiry_starts_afresh_and_leaves_no_key(redis_server: RedisServer) -> None:
    store = RedisChainStore(redis_server.url, 10, expiry_seconds=1, timeout_ms=5000)
    client = redis.Redis.from_url(redis_server.url)
    assert [store.observe("run#1", "grep", b"k") for _ in range(3)] == [1, 2, 3]
    ttl = client.pttl(RUN_PREFIX + "run#1")
    assert 0 < ttl <= 1000  # every write renews the idle expiry
    time.sleep(0.6)
    assert store.observe("run#1", "grep", b"k") == 4  # still within a second of the last call
    time.sleep(1.3)
    assert client.exists(RUN_PREFIX + "run#1") == 0
    assert store.run_length("run#1") == 0
    assert store.observe("run#1", "grep", b"k") == 1


def test_the_inbox_expires_too(redis_server: RedisServer) -> None:
    inbox = RedisReminderInbox(redis_server.url, expiry_seconds=1)
    client = redis.Redis.from_url(redis_server.url)
    from tests.distributed.test_store import reminder

    inbox.put(reminder("run#9"))
    assert 0 < client.pttl(INBOX_PREFIX + "run#9") <= 1000
    time.sleep(1.3)
    assert inbox.drain("run#9") == []


def test_reset_and_forget_from_another_process_end_the_run_everywhere(redis_server: RedisServer) -> None:
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, thresholds=(3,), store_timeout_ms=2000))
    with agent.agent_run("looper"):
        run_key = agent.guard.current_agent_id()
        assert run_key is not None
        for method in ("reset", "forget"):
            for _ in range(2):
                with agent.tracer.start_as_current_span("execute_tool grep") as span:
                    span.set_attributes(
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "grep",
                            "gen_ai.tool.call.arguments": "{}",
                        }
                    )
            assert agent.guard.run_length(run_key) == 2
            assert in_another_process(redis_server.url, method, run_key) == 0
            assert agent.guard.run_length(run_key) == 0  # gone for this process too
            with agent.tracer.start_as_current_span("execute_tool grep") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "grep",
                        "gen_ai.tool.call.arguments": "{}",
                    }
                )
            assert agent.guard.run_length(run_key) == 1  # the next call starts a new run
            agent.guard.forget(run_key)
        assert agent.drain() == []  # no threshold reached: the runs were ended at 2


def test_the_end_of_the_agent_span_ends_the_shared_run(redis_server: RedisServer) -> None:
    """The agent process owns the run: when its span ends, the run's key is deleted for every worker."""
    agent = AgentProcess(GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
    client = redis.Redis.from_url(redis_server.url)
    with agent.agent_run("short"):
        run_key = agent.guard.current_agent_id()
        with agent.tracer.start_as_current_span("execute_tool ls") as span:
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls", "gen_ai.tool.call.arguments": "{}"}
            )
        assert client.exists(RUN_PREFIX + str(run_key)) == 1
    assert client.exists(RUN_PREFIX + str(run_key)) == 0


def test_zero_code_setup_with_a_shared_store_drains_a_redis_inbox(redis_server: RedisServer) -> None:
    """Under opentelemetry-instrument, an agent process's adapters drain what its workers raised."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_repeat_guard import installed
    from otel_repeat_guard.setup.zero_code import install

    previous_guard, previous_inbox = installed.installed_guard(), installed.default_inbox()
    try:
        installed.set_installed_guard(None)
        guard = install(TracerProvider(), GuardConfig(chain_store=redis_server.url, store_timeout_ms=2000))
        assert guard is not None and installed.installed_guard() is guard
        assert isinstance(installed.default_inbox(), RedisReminderInbox)
    finally:
        installed.set_installed_guard(previous_guard)
        installed.use_default_inbox(previous_inbox)
