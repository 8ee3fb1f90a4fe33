"""Each script in examples/ run as a user runs it, unmodified: ``python examples/<script>.py`` in a fresh folder.

Its model client finds the local fake server through the client's standard environment variable
(``OPENAI_BASE_URL``; ``ANTHROPIC_BASE_URL`` for the Claude Code CLI the Claude Agent SDK starts), scripted
so that the model asks for the same tool call four times, then answers. Each test asserts that the process
exits 0 and prints the answer and the dashboard line, that the model's 4th request carried the gentle
reminder (recorded by the fake server) and no earlier one did, and that the store the example wrote holds
the four calls as a run of 4 in one agent run, with the model calls and wasted tokens where the process sees
the model calls.

Each example runs in its framework's integration group (the Makefile sets
``OTEL_REPEAT_GUARD_INTEGRATION_GROUP`` for ``make integration-<group>``, and there a framework that fails to
import fails the test); run by hand, an example whose framework is not installed is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .claude_cases import offline_env, texts
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI, input_messages
from .scenario import FINAL_ANSWER, model_usage

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_LINE = "The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db"
GROUP_ENV = "OTEL_REPEAT_GUARD_INTEGRATION_GROUP"
CALLS = 4  # CrewAI ends a run itself at the 5th identical call (crewai_cases.py): four stay below that


@dataclass(frozen=True)
class Example:
    script: str
    group: str  # the integration group whose virtualenv has the framework
    module: str  # the framework's module: the example is skipped (or fails, in its group) without it
    tool: str  # the tool the example gives its agent, and the fake model asks for
    arguments: dict[str, str]
    sees_model_calls: bool  # False: the model is called outside this process (the Claude Code CLI)

    def __str__(self) -> str:
        return self.script


WEATHER = {"city": "Paris"}
EXAMPLES = [
    Example("langgraph_weather.py", "langchain", "langchain_openai", "get_weather", WEATHER, True),
    Example("openai_agents_weather.py", "agents", "agents", "get_weather", WEATHER, True),
    Example("pydantic_ai_weather.py", "agents", "pydantic_ai", "get_weather", WEATHER, True),
    Example("crewai_weather.py", "crewai", "crewai", "get_weather", WEATHER, True),
    Example("openai_client_loop.py", "clients", "openinference.instrumentation.openai", "get_weather", WEATHER, True),
    Example(
        "claude_agent_sdk_loop.py",
        "claude",
        "claude_agent_sdk",
        "Bash",
        {"command": "echo looping", "description": "Print a word"},
        False,
    ),
]


def selected() -> list[Example]:
    group = os.environ.get(GROUP_ENV)
    return [e for e in EXAMPLES if group is None or e.group == group]


def available(example: Example) -> None:
    """In the example's own group, its framework must import; run by hand elsewhere, the example is skipped."""
    if os.environ.get(GROUP_ENV) == example.group:
        __import__(example.module)
    elif not installed(example.module):
        pytest.skip(f"{example.module} is not installed here (it runs in `make integration-{example.group}`)")


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@dataclass
class Served:
    """The fake server's address for the example's process, and what reached the model, as (role, text) lists."""

    env: dict[str, str]
    requests: Callable[[], list[list[tuple[str, str]]]]


@contextmanager
def fake_model(example: Example, tmp_path: Path) -> Iterator[Served]:
    script = ((example.tool, example.arguments),) * CALLS
    offline = {  # nothing but the fake server is dialled: the frameworks' own telemetry off
        "CREWAI_DISABLE_TELEMETRY": "true",
        "CREWAI_DISABLE_TRACKING": "true",
        "CREWAI_TRACING_ENABLED": "false",
    }
    if example.tool == "Bash":
        with FakeAnthropic(script) as anthropic:
            yield Served(
                {**offline, **offline_env(anthropic, tmp_path / "home")},
                lambda: [[(kind, text) for kind, text in texts(body)] for body in anthropic.requests],
            )
        return
    with FakeOpenAI(script) as openai:
        yield Served(
            {**offline, "OPENAI_BASE_URL": openai.base_url, "OPENAI_API_KEY": "offline"},
            lambda: [[(str(m.get("role")), _text(m)) for m in input_messages(body)] for body in openai.requests],
        )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def run_example(example: Example, served: Served, folder: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **served.env}
    environment.pop("OTEL_REPEAT_GUARD_DB", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / example.script)],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def stored(db: Path) -> dict[str, Any]:
    """The store's rows and figures, through the dashboard's queries where it has one."""
    from otel_repeat_guard.store import open_for_reading, queries

    conn, _ = open_for_reading(db)
    try:
        calls = conn.execute("SELECT tool_name, run_length, reminder_tier FROM tool_calls ORDER BY end_ns").fetchall()
        keys = conn.execute("SELECT COUNT(DISTINCT agent_key) FROM tool_calls").fetchone()[0]
        (model_calls,) = conn.execute("SELECT COUNT(*) FROM model_calls").fetchone()
        every = queries.Filters()
        head = queries.headline(conn, every).iloc[0]
        wasted = queries.wasted_tokens(conn, every)
    finally:
        conn.close()
    return {
        "calls": calls,
        "run keys": keys,
        "tool calls": int(head["tool_calls"]),
        "repeated calls": int(head["repeated_calls"]),
        "longest run": int(head["longest_run"]),
        "gentle reminders": int(head["gentle_reminders"]),
        "model calls": model_calls,
        "wasted tokens": (int(wasted["input_tokens"].sum()), int(wasted["output_tokens"].sum())),
    }


def expected_store(example: Example) -> dict[str, Any]:
    """Four identical calls: runs 1 to 4, the gentle reminder at 3; calls 2-4 repeats, each wasting the usage of
    the model call that asked for it (model call k reports 1000·k input and 10+k output tokens)."""
    wasted = [model_usage(k) for k in range(2, CALLS + 1)] if example.sees_model_calls else []
    return {
        "calls": [(example.tool, n, "gentle" if n == 3 else None) for n in range(1, CALLS + 1)],
        "run keys": 1,
        "tool calls": CALLS,
        "repeated calls": CALLS - 1,
        "longest run": CALLS,
        "gentle reminders": 1,
        "model calls": CALLS + 1 if example.sees_model_calls else 0,
        "wasted tokens": (sum(u["input"] for u in wasted), sum(u["output"] for u in wasted)),
    }


@pytest.mark.parametrize("example", selected(), ids=str)
def test_the_example_runs_as_written_reminds_the_model_and_fills_the_store(example: Example, tmp_path: Path) -> None:
    available(example)
    folder = tmp_path / "work"
    folder.mkdir()
    with fake_model(example, tmp_path) as served:
        done = run_example(example, served, folder)
        requests = served.requests()
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.splitlines()[-2:] == [FINAL_ANSWER, DASHBOARD_LINE], done.stdout

    gentle = f"You have called `{example.tool}` with identical arguments 3 times in a row."
    assert len(requests) == CALLS + 1, json.dumps(requests)[-2000:]
    carrying = [i for i, request in enumerate(requests) if any(gentle in text for _, text in request)]
    assert carrying and carrying[0] == 3, carrying  # the request after the 3rd identical call, no earlier one
    in_results = [text for request in requests for role, text in request if role in {"tool", "tool_result"}]
    assert not any("You have called" in text for text in in_results)  # beside the tool results, never in one

    assert stored(folder / "repeat-guard.db") == expected_store(example)
