"""The Claude Agent SDK hooks never wait on a transcript that is no regular file (issue 41, item 1): a
``transcript_path`` naming a named pipe hung the PostToolUse hook that read it, and Claude with it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.inbox import ReminderInbox
from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks


def _event(event: str, call_id: str, transcript: Path) -> dict[str, Any]:
    return {
        "session_id": "S",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": call_id,
        "transcript_path": str(transcript),
    }


def _unblock(fifo: Path, after: float, done: threading.Event) -> None:
    """From ``after`` s on, until ``done``, open and close the pipe's write end whenever someone reads it, so a
    reader stuck in ``open`` goes on (the test then fails by its time, instead of hanging the test run)."""

    def release() -> None:
        if done.wait(after):
            return
        while not done.wait(0.05):
            with contextlib.suppress(OSError):  # ENXIO: nobody reads now
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=release, daemon=True).start()


def test_a_transcript_that_is_a_named_pipe_costs_the_sdk_hooks_no_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    inbox = ReminderInbox()
    guard = RepeatGuardSpanProcessor(GuardConfig(), inbox.put)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    hooks = RepeatGuardHooks(guard=guard, inbox=inbox, tracer_provider=provider)
    done = threading.Event()
    _unblock(fifo, after=10.0, done=done)

    async def go() -> float:
        for call_id in ("t0", "t1"):  # two calls of one message; the second answered first
            await hooks.pre_tool_use(_event("PreToolUse", call_id, fifo))
        start = time.perf_counter()
        await hooks.post_tool_use({**_event("PostToolUse", "t1", fifo), "tool_response": "a b"})
        await hooks.stop({"session_id": "S", "hook_event_name": "Stop", "transcript_path": str(fifo)})
        return time.perf_counter() - start

    try:
        seconds = asyncio.run(go())
    finally:
        done.set()
    assert seconds < 2.0, seconds  # before: blocked in open() until a writer came
    said = [r.getMessage() for r in caplog.records if "is not a regular file" in r.getMessage()]
    assert said == [f"repeat guard: the transcript {fifo} is not a regular file; it is not read"]
    assert guard.run_length("claude:S") == 2  # both calls counted: t0 refused at the Stop, after t1
