"""The Claude Code command hook on a Redis chain store that does not answer: one process per event, so the guard's
own fallback (its process's memory) counted every call as a run of one and saw no loop. The chains go to SQLite
beside the store instead, until Redis answers, and each call says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_repeat_guard.cli.claude_code_hook import HOOK_STORE_TIMEOUT_MS, hook_config
from tests.distributed.servers import RedisServer, free_port
from tests.guard.test_claude_code_hook_input import _answer, _event


def test_a_redis_that_does_not_answer_leaves_the_chains_to_sqlite_and_the_loop_is_seen(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.setenv("OTEL_REPEAT_GUARD_STORE", url)
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "repeat-guard.db"))
    said = [_answer(_event("ls"), monkeypatch, capsys) for _ in range(3)]
    assert said[:2] == ["", ""]
    assert "You have called `Bash` with identical arguments 3 times in a row" in said[2]
    chains = tmp_path / "repeat-guard.chains.db"
    warned = [r.getMessage() for r in caplog.records if r.name == "otel_repeat_guard"]
    assert len(warned) == 3, warned  # one line a call (on the hook's stderr), and no other
    for line in warned:
        assert line.startswith(f"repeat guard: the chain store {url} does not answer (ConnectionError")
        assert line.endswith(f"; this call is counted in {chains}")
    assert chains.exists()


def test_a_hook_process_waits_longer_for_redis_than_a_long_lived_guard(redis_server: RedisServer) -> None:
    assert hook_config({"OTEL_REPEAT_GUARD_STORE": redis_server.url}).store_timeout_ms == HOOK_STORE_TIMEOUT_MS
    env = {"OTEL_REPEAT_GUARD_STORE": redis_server.url, "OTEL_REPEAT_GUARD_STORE_TIMEOUT_MS": "80"}
    assert hook_config(env).store_timeout_ms == 80  # as the command sets it
    assert hook_config({}).store_timeout_ms == 50  # no Redis: unchanged
