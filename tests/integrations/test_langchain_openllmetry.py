"""LangChain/LangGraph with OpenLLMetry's opentelemetry-instrumentation-langchain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scenario import Switchboard, hand_wired, require, stored  # noqa: F401  (fixtures)

require("opentelemetry.instrumentation.langchain")
from opentelemetry.instrumentation.langchain import LangchainInstrumentor  # noqa: E402

from .langchain_cases import (  # noqa: E402, F401
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
    yield from instrumented_board(LangchainInstrumentor())
