"""The real Claude Code CLI (bundled in ``claude-agent-sdk``'s wheel), offline, against the fake Messages API.

The CLI streams every request (SSE) from :class:`~tests.integrations.fake_anthropic.FakeAnthropic` on
127.0.0.1; with ``--allowedTools Bash`` it runs the scripted Bash calls for real, in a temporary HOME.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .fake_anthropic import Batch, FakeAnthropic

ECHO = {"command": "echo looping", "description": "Print a word"}
LOOP9 = (("Bash", ECHO),) * 9
"""Nine identical Bash calls, then the answer: the reminders are due after calls 3, 5 and 8."""
GENTLE = "You have called `Bash` with identical arguments 3 times in a row."
DETAILED_5 = "You have called `Bash` 5 times in a row with identical arguments"
DETAILED_8 = "You have called `Bash` 8 times in a row with identical arguments"

SLOW = {"command": "sleep 3; echo slow", "description": "Wait, then print a word"}
ALPHA = "1\talpha\n2\t"
"""What Claude Code's Read gives of ``a.txt``."""


def parallel_script(home: Path, outside: Path) -> tuple[Batch, Batch]:
    """Two messages of calls Claude Code runs concurrently (a read-only Bash, Reads), the slow Bash asked for
    first: three successes, then a Read outside the working directory (``home``), which the permissions refuse
    under ``-p``, beside two successes. Each message's first call ends last."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "a.txt").write_text("alpha\n")
    outside.write_text("outside\n")
    read = ("Read", {"file_path": str(home / "a.txt")})
    return (
        Batch(("Bash", SLOW), read, read),
        Batch(("Read", {"file_path": str(outside)}), ("Bash", SLOW), read),
    )


PARALLEL_CALLS = [("Bash", False), ("Read", False), ("Read", False), ("Read", True), ("Bash", False), ("Read", False)]
"""The calls of :func:`parallel_script` as they must count: in the order asked for, whichever ended first,
each once, only the refused one failed."""
PARALLEL_RUNS = [1, 1, 2, 1, 1, 1]


def cli_path() -> str:
    """The CLI the SDK's wheel bundles."""
    import claude_agent_sdk

    return str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")


def offline_env(server: FakeAnthropic, home: Path) -> dict[str, str]:
    """What the CLI needs to run here: the fake API, any key, no telemetry nor other traffic, its own HOME."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "test",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }


def texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A Messages request as (role or block kind, text): text blocks by their message's role, tool results as
    ``tool_result`` with their content's text, so a reminder is found wherever the CLI puts it."""
    out: list[tuple[str, str]] = []
    system = body.get("system")
    for message in body.get("messages") or ():
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner or ())
                out.append(("tool_result", text))
            elif block.get("type") == "text":
                out.append((str(message.get("role")), str(block.get("text", ""))))
    del system  # the system prompt is the CLI's own; reminders never go there
    return out


def reminder_positions(requests: Sequence[dict[str, Any]], needle: str) -> list[int]:
    """The indices of the requests that carry ``needle`` outside every tool result."""
    return [
        i
        for i, body in enumerate(requests)
        if any(needle in text for kind, text in texts(body) if kind != "tool_result")
    ]


def in_tool_results(requests: Sequence[dict[str, Any]], needle: str) -> bool:
    return any(needle in text for body in requests for kind, text in texts(body) if kind == "tool_result")


def tool_results(body: dict[str, Any]) -> list[str]:
    return [text for kind, text in texts(body) if kind == "tool_result"]


def loop_conversation(server: FakeAnthropic, marker: str) -> list[dict[str, Any]]:
    """The requests of the conversation whose first user message holds ``marker``."""
    found = [bodies for prompt, bodies in server.conversations().items() if marker in prompt]
    assert len(found) == 1, list(server.conversations())
    return found[0]


DOCS = Path(__file__).resolve().parents[2] / "docs" / "claude-code.md"
DOCUMENTED_COMMAND = "OTEL_REPEAT_GUARD_DB=$HOME/.claude/repeat-guard.db otel-repeat-guard-claude-code-hook"


def documented_settings() -> dict[str, Any]:
    """The settings block of docs/claude-code.md, as written (its one ``json`` block)."""
    (block,) = re.findall(r"^```json\n(.*?)^```", DOCS.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)
    settings: dict[str, Any] = json.loads(block)
    return settings


def documented_self_test() -> str:
    """The one-line self-test of docs/claude-code.md, as written (its one ``bash`` block: run by a test, where
    tests/test_docs.py only checks the commands of ``sh`` blocks)."""
    (block,) = re.findall(r"^```bash\n(.*?)^```", DOCS.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)
    (line,) = block.splitlines()
    return line


def settings_file(path: Path, command: str) -> Path:
    """The documented settings block, each hook's command replaced by ``command``."""
    settings = documented_settings()
    for matchers in settings["hooks"].values():
        for matcher in matchers:
            for hook in matcher["hooks"]:
                assert hook == {"type": "command", "command": DOCUMENTED_COMMAND}, hook
                hook["command"] = command
    path.write_text(json.dumps(settings))
    return path
