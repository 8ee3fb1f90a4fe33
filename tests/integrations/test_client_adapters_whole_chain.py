"""The whole chain (issue 21) for the model-client adapters: the openai (chat, Responses), anthropic and
LiteLLM clients, sync and async, each on its adapter, against the fake servers of :mod:`test_client_adapters`.

Each SDK is instrumented with OpenInference's instrumentor for it (the model spans, with the model's
tool calls and usage), the guard writes the store, and the harness loop makes nine identical calls
(``LOOP``) on a guarded client. With no agent framework, one run is what the harness opens around its
loop, an ``invoke_agent`` span, as a hand-written agent would: the model spans and the ``execute_tool``
spans are its children, so they share its key. Streamed requests are left out: the openai SDK reports
no usage on a stream unless asked (``stream_options``), so the wasted tokens could not be read there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from .scenario import (
    LOOP,
    assert_reminders_reached_model,
    assert_whole_chain,
    expected_whole_chain,
    provider_for,
    require,
    with_store,
)

require("openinference.instrumentation.openai")
require("openinference.instrumentation.anthropic")
require("openinference.instrumentation.litellm")
from openinference.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402
from openinference.instrumentation.litellm import LiteLLMInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

from .test_client_adapters import PARIS_PROMPT, VARIANTS, Variant, run_scenario  # noqa: E402

INSTRUMENTORS = {"openai": OpenAIInstrumentor, "anthropic": AnthropicInstrumentor, "litellm": LiteLLMInstrumentor}
"""The OpenInference instrumentor of each client library, by the first word of a variant's name."""


@contextmanager
def model_spans(variant: Variant, provider: TracerProvider) -> Iterator[None]:
    """The variant's client library instrumented (its model calls as spans on ``provider``) for the block."""
    instrumentor = INSTRUMENTORS[variant.name.split("-")[0]]()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.stream], ids=str)
def test_the_whole_chain_agrees(variant: Variant, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with with_store(tmp_path) as gs, variant.server(LOOP) as server:
        provider = provider_for(gs)
        with model_spans(variant, provider):
            run_scenario(variant, server, gs, True, [PARIS_PROMPT], provider)
        requests = [variant.api.pairs(body) for body in server.requests]
    assert len(requests) == len(LOOP) + 1
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(gs, expected_whole_chain())
