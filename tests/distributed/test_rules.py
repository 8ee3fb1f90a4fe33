"""The Lua script that counts the exact repeat inside Redis is held to the one Python rule, ``rules.same_call``.

Any two calls, one after the other in a fresh run: Redis extends the run exactly when ``same_call`` says the
second repeats the first, and so does the in-memory chain. Against a real ``redis-server``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_repeat_guard.core.canonical import arguments_key, raw_key
from otel_repeat_guard.core.chains import ChainTracker
from otel_repeat_guard.core.rules import same_call
from tests.distributed.servers import RedisServer

TOOLS = st.sampled_from(["read_file", "grep", "Read_file", "read_file ", "", "é", "工具"]) | st.text(
    st.characters(blacklist_categories=("Cs",)), max_size=8
)
ARGUMENT_KEYS = st.sampled_from(["path", "q", "Path", "", "é"])
ARGUMENTS = st.dictionaries(ARGUMENT_KEYS, st.sampled_from([1, "x", None, [1]]), max_size=3)
KEYS = (
    st.none()
    | st.just(b"")
    | ARGUMENTS.map(arguments_key)
    | st.text(max_size=6).map(raw_key)
    | st.binary(min_size=1, max_size=4)
)
CALL = st.tuples(TOOLS, KEYS)


def test_the_lua_script_and_the_memory_chain_follow_same_call(tmp_path: Path) -> None:
    from otel_repeat_guard.state.redis import RedisChainStore

    server = RedisServer(tmp_path).start()
    try:
        store = RedisChainStore(server.url, 10, timeout_ms=2000)
        memory = ChainTracker(10)
        runs = itertools.count()

        @settings(max_examples=300, deadline=None)
        @given(first=CALL, second=CALL)
        def check(first: tuple[str, bytes | None], second: tuple[str, bytes | None]) -> None:
            run = f"run-{next(runs)}"
            repeats = same_call(second[0], second[1], first[0], first[1])
            assert store.observe(run, *first) == 1
            assert store.observe(run, *second) == (2 if repeats else 1)
            assert not store.health.down, "a call fell back: the rule was not tested in Redis"
            assert memory.observe(run, *first) == 1
            assert memory.observe(run, *second) == (2 if repeats else 1)
            memory.forget(run)

        check()
        # The rule's own cases, named: known arguments only, and both tool and digest.
        assert same_call("t", b"k", "t", b"k")
        assert not same_call("t", None, "t", None)
        assert not same_call("t", b"", "t", b"")
        assert not same_call("u", b"k", "t", b"k")
        assert not same_call("t", b"k", "t", b"j")
    finally:
        server.kill()
