"""Forked while another thread is counting in Redis: the child makes a client of its own (the parent's pool may be
locked by a thread that is not in the child), counts its own run in Redis, and never hangs; the parent goes on."""

from __future__ import annotations

import time

from otel_repeat_guard import GuardConfig, Reminder
from otel_repeat_guard.decide.inbox import RedisReminderInbox
from otel_repeat_guard.state.redis import RedisChainStore
from tests.distributed.servers import RedisServer
from tests.guard.test_fork import Agent, busy, fork_once, pytestmark

__all__ = ["pytestmark"]

FORKS = 50


def test_a_fork_while_another_thread_counts_in_redis_leaves_the_child_its_own_client_and_its_own_counts(
    redis_server: RedisServer,
) -> None:
    # a deadline a loaded CI machine cannot miss: this test is about forks, not a slow store (test_outage's)
    agent = Agent(GuardConfig(chain_store=redis_server.url, thresholds=(3,), store_timeout_ms=2000))
    with busy(agent) as lengths:
        while len(lengths) < 5:
            time.sleep(0.001)  # it is inside the guard, and in redis-py's pool
        problems = [problem for _ in range(FORKS) if (problem := fork_once(agent))]
    assert problems == []
    assert len(lengths) > 5 and set(lengths) == {3}  # the parent's runs, counted in Redis, are unaffected
    assert agent.repeated_calls() == 3 * len(lengths)
    chains = agent.guard._chains
    assert isinstance(chains, RedisChainStore) and not chains.health.down  # counted in Redis, never the fallback


def test_a_forked_child_drains_the_shared_inbox_with_a_client_of_its_own(redis_server: RedisServer) -> None:
    agent = Agent(GuardConfig())
    shared = RedisReminderInbox(redis_server.url)
    shared.put(Reminder("parent-run", None, "poll", 3, 3, "gentle", "t", "{}", "0" * 32, "0" * 16))

    def child(_: Agent) -> str:
        shared.put(Reminder("child-run", None, "poll", 3, 3, "gentle", "t", "{}", "0" * 32, "0" * 16))
        drained = [r.agent_id for r in shared.drain("child-run")]
        return "" if drained == ["child-run"] and not shared.health.down else f"drained {drained}"

    assert fork_once(agent, child) == ""
    assert [r.agent_id for r in shared.drain("parent-run")] == ["parent-run"]  # the parent's client, unaffected
    assert shared.drain("child-run") == []  # the child drained its own
