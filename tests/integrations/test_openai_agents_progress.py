"""Issue 39, items 1 and 2, on the OpenAI Agents SDK (OpenInference's instrumentor, the SDK's Chat Completions
model on the real ``openai`` client against the local fake server): a job-status poll whose result moves is no
loop under ``progress: results``, one whose result stopped moving is, and a ``tools`` policy applies per pattern."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from otel_repeat_guard import GuardConfig, RepeatGuardStop

from .fake_openai import FakeOpenAI
from .scenario import FINAL_ANSWER, Guarded, make_guarded, openai_messages, provider_for, require

require("agents")
from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_trace_processors,
)
from openai import AsyncOpenAI  # noqa: E402
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402

from otel_repeat_guard.integrations.openai_agents import repeat_guard_input_filter  # noqa: E402

JOB = {"job": "42"}
TODAY = [("job_status", 3, "gentle"), ("job_status", 5, "detailed"), ("job_status", 8, "detailed")]


def job_tools(states: Callable[[int], str]) -> list[Any]:
    """``job_status``, whose n-th call returns ``states(n)``, and ``write_note``, which always says the same."""
    calls = itertools.count()

    def job_status(job: str) -> str:
        """The state of a job."""
        return f"job {job}: {states(next(calls))}"

    def write_note(text: str) -> str:
        """Write a note."""
        return "saved"

    return [function_tool(job_status), function_tool(write_note)]


@contextlib.contextmanager
def guarded(config: GuardConfig) -> Iterator[Guarded]:
    """A guard with ``config``, the SDK instrumented for the block (no upload to the OpenAI backend)."""
    g = make_guarded(config=config)
    set_trace_processors([])
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider_for(g))
    try:
        yield g
    finally:
        instrumentor.uninstrument()
        set_trace_processors([])


def poll(g: Guarded, script: Any, tools: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
    with FakeOpenAI(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        config = RunConfig(call_model_input_filter=repeat_guard_input_filter(guard=g.guard, inbox=g.inbox))
        agent = Agent(name="poller", model=model, tools=tools)
        result = asyncio.run(Runner.run(agent, "Is job 42 done?", run_config=config, max_turns=30))
    return result, server.requests


def reminded(g: Guarded) -> list[tuple[str, int, str]]:
    return [(r.tool_name, r.run_length, r.tier) for r in g.reminders]


@pytest.mark.parametrize(("config", "expected"), [(GuardConfig(progress="results"), []), (GuardConfig(), TODAY)])
def test_a_poll_whose_result_moves_every_call_reminds_only_without_progress_results(
    config: GuardConfig, expected: list[tuple[str, int, str]]
) -> None:
    with guarded(config) as g:
        result, requests = poll(g, (("job_status", JOB),) * 10, job_tools(lambda n: f"running, {n * 10}% done"))
        assert result.final_output == FINAL_ANSWER
        assert len(requests) == 11
        assert reminded(g) == expected
        assert g.unguarded() == {}  # the SDK's tool spans record their results (output.value)


def test_once_the_poll_result_stops_moving_it_reminds_at_3_5_and_8() -> None:
    with guarded(GuardConfig(progress="results")) as g:
        states = lambda n: f"running, {n * 30}% done" if n < 3 else "done"  # noqa: E731
        result, requests = poll(g, (("job_status", JOB),) * 11, job_tools(states))
        assert result.final_output == FINAL_ANSWER
        assert reminded(g) == TODAY
        texts = [" ".join(text for _, text in openai_messages(body)) for body in requests]
        first = next(i for i, text in enumerate(texts) if "identical arguments 3 times" in text)
        assert first == 6  # the request after the third "done" (calls 4 to 6): the reminder reached the model


def test_a_tools_policy_applies_per_pattern() -> None:
    config = GuardConfig(tools={"job_*": {"thresholds": [10, 20], "progress": "results"}, "write_*": {"stop_at": 6}})
    with guarded(config) as g:
        result, _ = poll(g, (("job_status", JOB),) * 12, job_tools(lambda n: "done"))
        assert result.final_output == FINAL_ANSWER
        assert reminded(g) == [("job_status", 10, "gentle")]  # not at 3, 5 and 8
        with pytest.raises(RepeatGuardStop) as stopped:
            poll(g, (("write_note", {"text": "hi"}),) * 9, job_tools(lambda n: "done"))
        assert reminded(g)[1:] == [
            ("write_note", 3, "gentle"),
            ("write_note", 5, "detailed"),
            ("write_note", 6, "stop"),
        ]
        assert stopped.value.reminder.run_length == 6
