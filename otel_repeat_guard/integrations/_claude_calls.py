"""When a Claude Code tool call counts: the one rule of both integrations (the Agent SDK hooks keep their open
calls in :class:`~otel_repeat_guard.integrations._claude.Unanswered`, the command hook in SQLite rows).

Claude Code runs a call's PreToolUse hook, the tool, then PostToolUse (or PostToolUseFailure); a call its
permissions refuse gets no hook after PreToolUse (seen with 2.1.337 under ``-p``: a PermissionRequest hook
without a ``tool_use_id``, then nothing). It runs the calls of one assistant message that are safe to run
together (Read, Grep, Glob, read-only Bash) concurrently, so their PostToolUse hooks come in the order they
finish, not the order Claude asked for them in. A call still unanswered when a later one is answered may be
running or refused: only the session's transcript (``transcript_path``, a JSONL file) tells which. Claude
Code writes a call's ``tool_result`` there once its PostToolUse hook has returned, and a refused call's
(``is_error``, ``toolDenialKind``, ``permissionDecision.decision: reject``) shortly after the refusal.

The rule, for the open calls of one chain:

- They count in the order Claude asked for them: the order of their ``tool_use`` blocks in the transcript
  when it holds them all, else the order their PreToolUse hooks reached the guard (concurrent hook processes
  may swap two calls of one message there; in process it is the message's order).
- From the first on, a call counts once it is answered (its PostToolUse input), or once the transcript holds
  its result with no PostToolUse seen (refused: counted as a failed ``PermissionDenied`` call whose reason is
  the result's text), or when the chain's turn is over (Stop, SubagentStop, a new prompt: no call runs
  then, so one still unanswered was refused, with :data:`DENIED` as its reason). The first call that is
  none of these is still running: it and every call after it wait, so a batch is counted in one stable
  order whichever call finishes first, and its reminders come with the answer of the call that completes
  it (Claude gets every result of a message together, so none comes later for that).

Claude Code writes the transcript behind the conversation: a refusal's result was seen there 0.1 to 0.15 s
after the refusal, while the in-process hooks of a fast call after it had already run. So a PostToolUse that
finds a call asked for before it unanswered and without a result waits up to :data:`RESULT_WAIT_S` for that
result first (:func:`wait_for_results`): a refused call then counts before the answered one, in order, and
its reminder comes at once. A call really running costs the answered one that wait, no more: its batch's
results reach Claude only when the running call is done.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from otel_repeat_guard.store.path_text import is_file, joined, path_text, without_suffix


def warn(message: str, *args: object) -> None:
    """A warning of the ``otel_repeat_guard`` logger: :mod:`logging` is imported only when one is said, as the
    command hook's calls seldom say any (its import cost them a twentieth of a call)."""
    import logging

    logging.getLogger("otel_repeat_guard").warning(message, *args, stacklevel=2)


DENIED = "denied: no PostToolUse followed its PreToolUse (a permission rule, or the user, refused it)"
TAIL_BYTES = 2 << 20
"""How much of the transcript's end is read: the latest message's calls and results, large results among them."""
RESULT_CHARS = 4_096
RESULT_WAIT_S = 0.5
"""How long an answered call waits for the transcript to show the result of a call asked for before it."""
POLL_S = 0.02


class OpenCall:
    """A call whose PreToolUse came (``opened``: its input) and, once it is answered, its PostToolUse or
    PostToolUseFailure input (``answer``) and when that came (``answered_ns``). This module's records are plain
    classes: a dataclass's or a ``NamedTuple``'s definition cost each Claude Code hook call about a hundredth of it."""

    __slots__ = ("answer", "answered_ns", "call_id", "opened")

    def __init__(
        self,
        call_id: str,
        opened: Mapping[str, Any],
        answer: Mapping[str, Any] | None = None,
        answered_ns: int | None = None,
    ) -> None:
        self.call_id = call_id
        self.opened = opened
        self.answer = answer
        self.answered_ns = answered_ns

    def copy(self) -> OpenCall:
        return OpenCall(self.call_id, self.opened, self.answer, self.answered_ns)


class Result:
    """A ``tool_result`` the transcript holds: whether it is an error, and its text."""

    __slots__ = ("is_error", "text")

    def __init__(self, is_error: bool, text: str) -> None:
        self.is_error = is_error
        self.text = text


class Transcript:
    """What the transcript tells of some calls: where Claude asked for each, and the results written."""

    __slots__ = ("positions", "results")

    def __init__(self, positions: Mapping[str, tuple[int, int]], results: Mapping[str, Result]) -> None:
        self.positions = positions
        self.results = results


NO_TRANSCRIPT = Transcript({}, {})


class Due:
    """What a chain's open calls give now: the hook inputs to count, in order, each with the time it ended
    (None: now); the ids no longer open; and which of those were counted without a PostToolUse."""

    __slots__ = ("closed", "counted", "refused")

    def __init__(self, counted: list[tuple[dict[str, Any], int | None]], closed: list[str], refused: list[str]) -> None:
        self.counted = counted
        self.closed = closed
        self.refused = refused


_SAID: set[str] = set()
"""The transcripts said once in this process not to be regular files."""


def transcript_of(hook_input: Mapping[str, Any]) -> str | None:
    """The transcript a call's results are written to: the session's, or for a subagent's call its own
    (``<session transcript without .jsonl>/subagents/agent-<agent_id>.jsonl``, as 2.1.337 writes it). None for
    a path that is there and no regular file (a named pipe would block its reader): said once, in one line.
    Paths as ``str(pathlib.Path(...))`` gives them (:mod:`otel_repeat_guard.store.path_text`)."""
    path = hook_input.get("transcript_path")
    if not path or not isinstance(path, str):
        return None
    found = path_text(path)
    agent = hook_input.get("agent_id")
    if agent:
        own = joined(without_suffix(found), "subagents", f"agent-{agent}.jsonl")
        if is_file(own):
            return own
    try:
        regular = stat.S_ISREG(os.stat(found).st_mode)
    except (OSError, ValueError):  # not there yet (Claude Code writes it behind the conversation), or no path
        return found
    if not regular:
        _not_regular(found)
        return None
    return found


def _not_regular(path: str) -> None:
    if str(path) not in _SAID:
        _SAID.add(str(path))
        warn("repeat guard: the transcript %s is not a regular file; it is not read", path)


def read_transcript(path: str | None, ids: Sequence[str]) -> Transcript:
    """The ``tool_use`` positions and ``tool_result`` blocks of ``ids`` in the transcript's last
    :data:`TAIL_BYTES`; nothing of what cannot be read (the transcript is evidence, never a requirement). Opened
    without blocking: a path that became a named pipe or a device is not read (said once)."""
    if path is None or not ids:
        return NO_TRANSCRIPT
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return NO_TRANSCRIPT
    try:
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                _not_regular(path)
                return NO_TRANSCRIPT
            size = file.seek(0, 2)
            file.seek(max(0, size - TAIL_BYTES))
            data = file.read()
    except OSError:
        return NO_TRANSCRIPT
    wanted = [call_id.encode() for call_id in ids]
    positions: dict[str, tuple[int, int]] = {}
    results: dict[str, Result] = {}
    for number, line in enumerate(data.split(b"\n")):
        if not any(call_id in line for call_id in wanted):
            continue
        try:
            entry = orjson.loads(line)
            content = entry["message"]["content"]
        except (ValueError, TypeError, KeyError):
            continue
        if not isinstance(content, list):
            continue
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and str(block.get("id")) in ids:
                positions.setdefault(str(block["id"]), (number, index))
            elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in ids:
                results[str(block["tool_use_id"])] = Result(bool(block.get("is_error")), _text(block.get("content")))
    return Transcript(positions, results)


def _text(content: Any) -> str:
    if isinstance(content, list):
        content = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")[:RESULT_CHARS]


def in_order(calls: Sequence[OpenCall], transcript: Transcript) -> list[OpenCall]:
    """The calls in the order Claude asked for them: the transcript's, when it holds every one; else as opened."""
    if len(calls) > 1 and all(call.call_id in transcript.positions for call in calls):
        return sorted(calls, key=lambda call: transcript.positions[call.call_id])
    return list(calls)


def refused(call: OpenCall, result: Result | None) -> dict[str, Any]:
    """What a call no PostToolUse answered counts as: its result, as the transcript has it (an error is a
    refusal, as Claude Code writes one; a success means its hook was missed), else a denial."""
    if result is None:
        return {**call.opened, "hook_event_name": "PermissionDenied", "reason": DENIED}
    if result.is_error:
        return {**call.opened, "hook_event_name": "PermissionDenied", "reason": result.text or DENIED}
    return {**call.opened, "hook_event_name": "PostToolUse", "tool_response": result.text}


def due(calls: Sequence[OpenCall], turn_over: bool) -> Due:
    """Which of one chain's open calls (as opened) count now, by the rule of this module's docstring. Their
    transcript is read only when it can tell something: more than one call is open, or the first is unanswered."""
    if not calls:
        return Due([], [], [])
    if len(calls) > 1 or calls[0].answer is None:
        seen = read_transcript(transcript_of(calls[0].opened), [call.call_id for call in calls])
    else:
        seen = NO_TRANSCRIPT
    counted: list[tuple[dict[str, Any], int | None]] = []
    closed: list[str] = []
    refusals: list[str] = []
    for call in in_order(calls, seen):
        if call.answer is not None:
            counted.append((dict(call.answer), call.answered_ns))
        elif call.call_id in seen.results or turn_over:
            counted.append((refused(call, seen.results.get(call.call_id)), None))
            refusals.append(call.call_id)
        else:
            break  # still running: the calls after it wait for it
        closed.append(call.call_id)
    return Due(counted, closed, refusals)


def blocking(calls: Sequence[OpenCall], transcript: Transcript) -> list[str]:
    """The unanswered calls, without a result in the transcript, that an answered call waits for (in order)."""
    ordered = in_order(calls, transcript)
    last = max((i for i, call in enumerate(ordered) if call.answer is not None), default=-1)
    return [c.call_id for c in ordered[:last] if c.answer is None and c.call_id not in transcript.results]


def wait_for_results(calls: Sequence[OpenCall], seconds: float = RESULT_WAIT_S) -> None:
    """Wait, up to ``seconds``, until the transcript holds the result of every call an answered one waits for
    (:func:`blocking`); at once when there is none. Never raises: the transcript is evidence only."""
    if len(calls) < 2:
        return
    path = transcript_of(calls[0].opened)
    if path is None:  # none, or no regular file: nothing will show there
        return
    ids = [call.call_id for call in calls]
    deadline = time.monotonic() + seconds
    size = -1
    while time.monotonic() < deadline:
        grown = _size(path)
        if grown != size:  # read again only what changed
            size = grown
            if not blocking(calls, read_transcript(path, ids)):
                return
        time.sleep(POLL_S)


def _size(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path is not None else -1
    except OSError:
        return -1
