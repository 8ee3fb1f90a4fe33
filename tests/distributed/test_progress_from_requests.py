"""Issue 39, item 1, on the Redis store: a result that comes with the next model request restarts the run in Redis
(its ``REKEY`` script) as it does in memory; a Redis that cannot answer leaves the restart to this process's chain."""

from __future__ import annotations

import time
from typing import Any

import redis

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.policy import with_result
from otel_repeat_guard.state.connection import RETRY_AFTER_SECONDS
from otel_repeat_guard.state.redis import RedisChainStore
from tests.distributed.servers import RedisServer
from tests.guard.test_progress_from_requests import loop, measured, reminded, unguarded


def _run(config: GuardConfig, results: list[str | None]) -> tuple[Any, ...]:
    h, reader = measured(config)
    loop(h, results)
    h.provider.shutdown()
    return reminded(h), h.run_lengths(), unguarded(reader)


def test_results_from_the_next_request_answer_on_redis_as_in_memory(redis_server: RedisServer) -> None:
    for results in ([f"running {n}%" for n in range(6)], ["running", "running 2"] + ["done"] * 7, [None] * 3):
        memory = _run(GuardConfig(progress="results"), results)
        shared = _run(GuardConfig(progress="results", chain_store=redis_server.url, store_timeout_ms=2000), results)
        assert shared == memory, results
    assert memory == ([("poll_job", 3, "gentle")], [1, 2, 3], {("no_result", "poll_job"): 3})


def test_a_rekey_restarts_the_run_redis_holds_and_records_the_run_that_ended(redis_server: RedisServer) -> None:
    ended: list[tuple[str, int]] = []
    store = RedisChainStore(redis_server.url, 10, lambda tool, run: ended.append((tool, run)), timeout_ms=2000)
    assumed, moved = with_result(b"k", b"r1"), with_result(b"k", b"r2")
    for _ in range(3):
        store.observe("run", "poll", assumed)
    store.rekey("run", "poll", assumed, assumed)  # the result assumed was the one
    store.rekey("run", "other", assumed, moved)  # not the run's last call
    assert (store.run_length("run"), ended) == (3, [])
    store.rekey("run", "poll", assumed, moved)
    assert (store.run_length("run"), ended) == (1, [("poll", 3)])
    assert redis.Redis.from_url(redis_server.url).hget("repeat_tool_guard:run:run", "k") == moved
    assert store.observe("run", "poll", moved) == 2


def test_a_rekey_redis_cannot_answer_restarts_this_process_s_chain(redis_server: RedisServer) -> None:
    ended: list[tuple[str, int]] = []
    store = RedisChainStore(redis_server.url, 10, lambda tool, run: ended.append((tool, run)), timeout_ms=50)
    redis_server.pause()
    try:
        for _ in range(2):
            store.observe("run", "poll", b"a")  # counted here: Redis does not answer
        time.sleep(RETRY_AFTER_SECONDS + 0.2)  # the pause after the failure: Redis is tried again, and fails
        store.rekey("run", "poll", b"a", b"b")
        assert store.health.down
        store.rekey("run", "poll", b"b", b"c")  # during the pause: not tried, this process's chain at once
    finally:
        redis_server.resume()
    assert ended == [("poll", 2)]
    assert store.observe("run", "poll", b"c") == 2  # still in the pause: this process's chain, rekeyed twice
