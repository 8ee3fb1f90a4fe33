"""LangChain/LangGraph with openinference-instrumentation-langchain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .scenario import Guarded, Switchboard, hand_wired, require, stored  # noqa: F401  (fixtures)

require("openinference.instrumentation.langchain")
from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from openinference.instrumentation.langchain import LangChainInstrumentor  # noqa: E402

from otel_repeat_guard.integrations.langchain import RepeatGuardMiddleware  # noqa: E402

from .langchain_cases import (  # noqa: E402, F401
    ScriptedChat,
    g,
    instrumented_board,
    test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures,
    test_a_request_the_adapter_fails_to_edit_goes_out_unchanged_and_the_next_carries_the_reminder,
    test_a_second_agent_running_concurrently_has_its_own_chain,
    test_a_second_prompt_gets_a_fresh_chain,
    test_a_stop_reminder_ends_the_run,
    test_one_run_and_the_reminders_reach_the_model,
    test_the_whole_chain_agrees,
    test_two_concurrent_runs_of_one_agent_have_separate_chains,
)


@pytest.fixture(scope="module")
def board() -> Iterator[Switchboard]:
    yield from instrumented_board(LangChainInstrumentor())


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "hello"


def test_the_detailed_reminder_quotes_the_arguments_the_model_sent(g: Guarded) -> None:  # noqa: F811
    """Issue 39, item 6: OpenInference's tool span records a one-argument tool's input as the bare value
    (``a.txt``); the model sent ``{"path": "a.txt"}``, and that is what the reminder quotes."""
    requests: list[Any] = []
    model = ScriptedChat(script=(("read_file", {"path": "a.txt"}),) * 5, requests=requests)
    middleware = [RepeatGuardMiddleware(guard=g.guard, inbox=g.inbox)]
    agent = create_agent(model, [read_file], name="reader_agent", middleware=middleware)
    agent.invoke({"messages": [HumanMessage(content="Read a.txt")]})
    tools = [s for s in g.exporter.get_finished_spans() if s.name == "read_file"]
    assert {str((s.attributes or {}).get("input.value")) for s in tools} == {"a.txt"}  # what the span records
    detailed = [r for r in g.reminders if r.tier == "detailed"]
    assert [r.arguments_preview for r in detailed] == ['{"path":"a.txt"}']
    sent = [text for role, text in requests[5] if role == "user" and "<system-reminder>" in text]
    assert len(sent) == 1 and '\n{"path":"a.txt"}\n' in sent[0]
