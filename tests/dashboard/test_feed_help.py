"""The empty store's page tells how to feed the store; its code, run as written, keeps one run key per run."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from otel_repeat_guard.dashboard.app import FEED_HELP


def test_the_empty_stores_code_runs_as_written_and_stores_one_run_key_per_run(tmp_path: Path) -> None:
    db = tmp_path / "repeat-guard.db"
    code = FEED_HELP.format(db=db).split("```python\n")[1].split("```")[0]
    scope: dict[str, Any] = {}
    exec(compile(code, "FEED_HELP", "exec"), scope)  # the page's own snippet, as a user pastes it
    provider, inbox = scope["provider"], scope["inbox"]
    tracer = provider.get_tracer("agent")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": "{}"}
    with tracer.start_as_current_span("LangGraph"):  # a graph's run: no agent span of its own
        for _ in range(4):
            tracer.start_span("execute_tool grep", attributes=tool).end()
    provider.shutdown()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT agent_key, run_length FROM tool_calls ORDER BY end_ns").fetchall()
    finally:
        conn.close()
    assert [n for _, n in rows] == [1, 2, 3, 4]
    assert len({key for key, _ in rows}) == 1, rows  # without the guard's facts, the first call's key was another
    assert [r.run_length for r in inbox.drain(rows[0][0])] == [3]
