"""The whole chain (issue 21) for the model-client adapters: the openai (chat, Responses), anthropic and
LiteLLM clients, sync and async, each on its adapter, against the fake servers of :mod:`test_client_adapters`.

Each SDK is instrumented with OpenInference's instrumentor for it (the model spans, with the model's
tool calls and usage), the guard writes the store, and the harness loop makes nine identical calls
(``LOOP``) on a guarded client. With no agent framework, one run is what the harness opens around its
loop, an ``invoke_agent`` span, as a hand-written agent would: the model spans and the ``execute_tool``
spans are its children, so they share its key. Streamed requests are in too: the openai SDK reports a chat
stream's usage only when asked (``stream_options={"include_usage": True}``), so those requests ask, as an
application that counts its tokens does; the Responses and Messages streams carry their usage unasked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

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


def with_usage(variant: Variant) -> Variant:
    """``variant``, its chat streams asking for their usage (the last chunk), as an application that counts
    its tokens asks; every other variant reports its usage unasked."""
    if not (variant.stream and variant.name.startswith("openai-chat")):
        return variant
    send = variant.send

    def asking(client: Any, kwargs: dict[str, Any]) -> Any:
        return send(client, {**kwargs, "stream_options": {"include_usage": True}})

    return replace(variant, send=asking)


@pytest.mark.parametrize("variant", [with_usage(v) for v in VARIANTS], ids=str)
def test_the_whole_chain_agrees(variant: Variant, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes,
    streamed or not."""
    with with_store(tmp_path) as gs, variant.server(LOOP) as server:
        provider = provider_for(gs)
        with model_spans(variant, provider):
            run_scenario(variant, server, gs, True, [PARIS_PROMPT], provider)
        requests = [variant.api.pairs(body) for body in server.requests]
    assert len(requests) == len(LOOP) + 1
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(gs, expected_whole_chain())
