"""Claude's chain keys and call arguments cannot collide (issue 41, item 4). The keys joined session and subagent
with a ``/``: session ``S/d1``'s first call was reminded as the third, because it shared a key with subagent
``d1`` of session ``S``. And any empty ``tool_input`` (``[]``, ``""``, missing) was read as ``{}``: four different
calls counted as one identical call, in the command hook and in the Agent SDK hooks' stop tier."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.cli.claude_code_hook import main
from otel_repeat_guard.inbox import ReminderInbox
from otel_repeat_guard.integrations._claude import chain_key, session_prefix
from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks

GENTLE = "with identical arguments 3 times in a row"
MISSING = object()


def _event(session: str, tool_input: Any, call_id: str, agent_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "session_id": session,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_response": {"stdout": "", "stderr": ""},
        "tool_use_id": call_id,
    }
    if tool_input is not MISSING:
        event["tool_input"] = tool_input
    if agent_id is not None:
        event["agent_id"] = agent_id
    return event


def _hook(event: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """The command hook's answer to one event (its additionalContext, or "")."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(event).encode())))
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"]) if out else ""


def _stored(store: Path) -> list[tuple[str, str | None, int]]:
    """Each stored call's key, arguments digest (None: unknown) and position in its run."""
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT agent_key, arguments_digest, COALESCE(run_length, 1) FROM tool_calls ORDER BY id")
        return [(str(key), digest, int(run)) for key, digest, run in rows]


def test_a_session_named_like_another_sessions_subagent_keeps_a_chain_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    said = [_hook(_event("S", {"command": "ls"}, f"t{i}", agent_id="d1"), monkeypatch, capsys) for i in range(2)]
    said.append(_hook(_event("S/d1", {"command": "ls"}, "t2"), monkeypatch, capsys))
    assert said == ["", "", ""]
    assert [(key, run) for key, _, run in _stored(tmp_path / "store.db")] == [
        ("claude:S/d1", 1),
        ("claude:S/d1", 2),
        ("claude:S%2Fd1", 1),  # the session's own key: its first call
    ]


def test_the_session_end_of_one_session_leaves_a_session_named_like_its_subagent_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    for i in range(2):
        _hook(_event("S/d1", {"command": "ls"}, f"t{i}"), monkeypatch, capsys)
    _hook({"session_id": "S", "hook_event_name": "SessionEnd"}, monkeypatch, capsys)
    assert GENTLE in _hook(_event("S/d1", {"command": "ls"}, "t2"), monkeypatch, capsys)  # its third call


@pytest.mark.parametrize(
    ("one", "other"),
    [("S/d1", "S"), ("S%2Fd1", "S/d1"), ("a/b/c", "a/b"), ("S", "S%")],
)
def test_no_two_sessions_or_subagents_share_a_key(one: str, other: str) -> None:
    keys = [
        chain_key({"session_id": one}),
        chain_key({"session_id": other}),
        *(chain_key({"session_id": s, "agent_id": a}) for s in (one, other) for a in ("d1", "b/c", "c")),
    ]
    assert len(set(keys)) == len(keys), keys
    for session in (one, other):
        assert chain_key({"session_id": session}) == session_prefix(session)


def test_a_uuid_session_and_a_hex_agent_id_keep_their_readable_key() -> None:
    session = "7d0c4c9e-3b1a-4f43-9d4e-1d2b7e0f5a61"
    assert chain_key({"session_id": session, "agent_id": "a4f0c9"}) == f"claude:{session}/a4f0c9"


def test_empty_tool_inputs_of_different_types_are_different_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    inputs = [[], "", {}, MISSING, None, "{}", [], [], []]
    said = [_hook(_event("S", value, f"t{i}"), monkeypatch, capsys) for i, value in enumerate(inputs)]
    assert [GENTLE in text for text in said] == [False] * 8 + [True]  # only the third `[]` in a row
    stored = _stored(tmp_path / "store.db")
    digests = [digest for _, digest, _ in stored]
    assert digests[3] is None  # no tool_input: its arguments are unknown, identical to no call
    assert len({*digests[:3], *digests[4:6]}) == 5 and digests[6:] == [digests[0]] * 3
    assert [run for _, _, run in stored] == [1, 1, 1, 1, 1, 1, 1, 2, 3]


def test_three_identical_empty_strings_are_a_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    said = [_hook(_event("S", "", f"t{i}"), monkeypatch, capsys) for i in range(3)]
    assert [GENTLE in text for text in said] == [False, False, True]


def _sdk_hooks(stop_at: int | None = None) -> tuple[RepeatGuardHooks, RepeatGuardSpanProcessor]:
    inbox = ReminderInbox()
    guard = RepeatGuardSpanProcessor(GuardConfig(stop_at=stop_at), inbox.put)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    return RepeatGuardHooks(guard=guard, inbox=inbox, tracer_provider=provider), guard


def _context(answer: Mapping[str, Any]) -> str:
    return str(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_in_the_agent_sdk_a_session_named_like_a_subagent_keeps_a_chain_of_its_own() -> None:
    hooks, guard = _sdk_hooks()

    async def go() -> list[str]:
        said = [_context(await hooks.post_tool_use(_event("S", {"c": 1}, f"t{i}", agent_id="d1"))) for i in range(2)]
        return [*said, _context(await hooks.post_tool_use(_event("S/d1", {"c": 1}, "t2")))]

    assert asyncio.run(go()) == ["", "", ""]
    assert guard.run_length("claude:S/d1") == 2 and guard.run_length("claude:S%2Fd1") == 1
    hooks.forget_session("S/d1")
    assert guard.run_length("claude:S/d1") == 2 and guard.run_length("claude:S%2Fd1") == 0


@pytest.mark.parametrize("other", [[], "", MISSING, "{}"], ids=["[]", "empty string", "missing", "string {}"])
def test_the_agent_sdk_stop_denies_only_the_identical_call_not_another_empty_input(other: Any) -> None:
    hooks, _ = _sdk_hooks(stop_at=9)

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        for i in range(9):  # the stop reminder at the ninth
            await hooks.post_tool_use(_event("S", {}, f"t{i}"))
        other_call = {**_event("S", other, "t9"), "hook_event_name": "PreToolUse"}
        del other_call["tool_response"]
        different = await hooks.pre_tool_use(other_call)
        same = await hooks.pre_tool_use({**other_call, "tool_input": {}, "tool_use_id": "t10"})
        return different, same

    different, same = asyncio.run(go())
    assert different == {}
    assert same["hookSpecificOutput"]["permissionDecision"] == "deny"
