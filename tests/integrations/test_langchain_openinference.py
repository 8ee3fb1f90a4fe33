"""LangChain/LangGraph with openinference-instrumentation-langchain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from .scenario import Guarded, Switchboard, make_guarded, require

require("openinference.instrumentation.langchain")
from openinference.instrumentation.langchain import LangChainInstrumentor  # noqa: E402

from .langchain_cases import (  # noqa: E402, F401
    test_a_second_agent_running_concurrently_has_its_own_chain,
    test_a_second_prompt_gets_a_fresh_chain,
    test_one_run_and_the_reminders_reach_the_model,
    test_two_concurrent_runs_of_one_agent_have_separate_chains,
)


@pytest.fixture(scope="module")
def board() -> Iterator[Switchboard]:
    """Instrumented once per module: re-instrumenting does not reliably move the instrumentor to a new provider."""
    switchboard = Switchboard()
    provider = TracerProvider()
    provider.add_span_processor(switchboard)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield switchboard
    instrumentor.uninstrument()


@pytest.fixture
def g(board: Switchboard) -> Iterator[Guarded]:
    guarded = make_guarded()
    board.targets = guarded.processors
    yield guarded
    board.targets = []
