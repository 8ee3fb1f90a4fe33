"""A model call's token usage, in the three vocabularies: read by the guard (for its wasted-token
metric) and by the store (for its ``model_calls`` rows), so both count the same tokens.

============== =============================================== ==========================================
what           key, in the order asked                         vocabulary
============== =============================================== ==========================================
input tokens   ``gen_ai.usage.input_tokens``,                  GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.prompt_tokens``,                 the Vercel AI SDK (5 and later; 4)
               ``llm.token_count.prompt``,
               ``ai.usage.inputTokens``, ``ai.usage.promptTokens``
output tokens  ``gen_ai.usage.output_tokens``,                 GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.completion_tokens``,             the Vercel AI SDK (5 and later; 4)
               ``llm.token_count.completion``,
               ``ai.usage.outputTokens``, ``ai.usage.completionTokens``
cache reads    ``gen_ai.usage.cache_read.input_tokens``,       GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.cache_read_input_tokens``,       the Vercel AI SDK (6; 5 and 6)
               ``llm.token_count.prompt_details.cache_read``,
               ``ai.usage.inputTokenDetails.cacheReadTokens``,
               ``ai.usage.cachedInputTokens``
cache writes   ``gen_ai.usage.cache_creation.input_tokens``,   GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.cache_creation_input_tokens``,   the Vercel AI SDK (6)
               ``llm.token_count.prompt_details.cache_write``,
               ``ai.usage.inputTokenDetails.cacheWriteTokens``
============== =============================================== ==========================================

The Vercel AI SDK sets ``gen_ai.usage.input_tokens`` / ``output_tokens`` beside its own ``ai.usage.*`` on
its steps (4.3 and 6 read; they agree); its own keys come last, for the spans that carry nothing else.

Cache reads and writes are part of the input tokens, as the GenAI conventions count them; they only
change its price (see ``dashboard/costs.py``). Counts that are not non-negative integers (a string, a bool, a
negative number), or are past ``MAX_TOKENS``, are unknown (None), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
)
OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
)
CACHE_READ_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.inputTokenDetails.cacheReadTokens",
    "ai.usage.cachedInputTokens",
)
CACHE_WRITE_KEYS = (
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
    "ai.usage.inputTokenDetails.cacheWriteTokens",
)


MAX_TOKENS = 2**32 - 1
"""The most tokens one model call's count may say (4,294,967,295): a thousand times any context window. A
count past it is no count a model makes, and summed it would overflow the store's 64-bit integers (two
of 2**63 - 1 already do), so one odd value would cost every figure of the good ones."""


def count_of(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` whose value is an integer from 0 to ``MAX_TOKENS``, else None."""
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
            return value
    return None


def cache_usage(attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The (cache read, cache write) input-token counts a model-call span records; None where unknown."""
    return count_of(attributes, CACHE_READ_KEYS), count_of(attributes, CACHE_WRITE_KEYS)


def token_usage(attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The (input, output) token counts a model-call span records; None where unknown."""
    return count_of(attributes, INPUT_TOKEN_KEYS), count_of(attributes, OUTPUT_TOKEN_KEYS)
