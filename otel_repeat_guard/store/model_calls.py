"""Reading a model-call span's model, provider, token counts, conversation and output, in three vocabularies.

Which spans are model calls is the conventions' decision (:class:`~otel_repeat_guard.conventions.SpanRouter`'s
model bits: GenAI ``chat`` / ``text_completion`` / ``generate_content``, OpenInference ``LLM``, OpenLLMetry
``llm.request.type``); this module only reads the attributes such a span carries:

============== ======================================== ============================================
what           key, in the order asked                  vocabulary
============== ======================================== ============================================
model          ``gen_ai.response.model``,               GenAI and OpenLLMetry (the answered model
               ``gen_ai.request.model``,                first: it names the version that was billed)
               ``llm.model_name``                       OpenInference
provider       ``gen_ai.provider.name``,                GenAI (``gen_ai.system`` before semconv 1.37,
               ``gen_ai.system``, ``llm.provider``,     and OpenLLMetry); OpenInference
               ``llm.system``
input and     as :mod:`otel_repeat_guard.conventions.usage` reads them for the guard (also cache reads
output tokens  and writes, and reasoning tokens: not a column of the store's yet)
total tokens   input + output when both are known, else ``usage.TOTAL``: ``llm.usage.total_tokens``
               (OpenLLMetry) or ``llm.token_count.total`` (OpenInference)
conversation   ``gen_ai.conversation.id``, ``session.id``
output         ``gen_ai.output.messages``, ``output.value``, ``gen_ai.completion.0.content``,
               ``llm.output_messages.0.message.content`` (kept only as a bounded text preview)
============== ======================================== ============================================

Token counts that are not non-negative integers (a string, a bool, a negative number) are
treated as unknown, never as zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from otel_repeat_guard.conventions.usage import TOTAL, cache_usage, figure_of, reasoning_usage, token_usage

MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
OUTPUT_KEYS = (
    "gen_ai.output.messages",
    "output.value",
    "gen_ai.completion.0.content",
    "llm.output_messages.0.message.content",
)


class ModelCallInfo(NamedTuple):
    """What a model-call span says about the call; every field may be unknown (None)."""

    model: str | None
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    conversation_id: str | None
    output: str | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


def _text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def read_model_call(attributes: Mapping[str, Any]) -> ModelCallInfo:
    """The model, provider, tokens, conversation and output text of a model-call span's attributes."""
    input_tokens, output_tokens = token_usage(attributes)
    cache_read, cache_write = cache_usage(attributes)
    if input_tokens is not None and output_tokens is not None:
        total: int | None = input_tokens + output_tokens
    else:
        total = figure_of(attributes, TOTAL)
    return ModelCallInfo(
        model=_text(attributes, MODEL_KEYS),
        provider=_text(attributes, PROVIDER_KEYS),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total,
        conversation_id=_text(attributes, CONVERSATION_KEYS),
        output=_text(attributes, OUTPUT_KEYS),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning_usage(attributes),
    )
