"""A model call's token usage, in every vocabulary: read by the guard (for its wasted-token metric), by the
store (for its ``model_calls`` rows) and, as SQL built from the same key lists, by the ClickHouse reader
(``clickhouse/calls.py``), so all three count the same tokens. Each figure is one :class:`Figure`, defined here
only.

============== =============================================== ==========================================
what           key, in the order asked                         vocabulary
============== =============================================== ==========================================
input tokens   ``gen_ai.usage.input_tokens``,                  GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.prompt_tokens``,                 the Vercel AI SDK (5 and later; 4)
               ``llm.token_count.prompt``,
               ``ai.usage.inputTokens``, ``ai.usage.promptTokens``;
               else the sum of ``gen_ai.usage.{text,image,
               audio,video}.input_tokens``                     GenAI, per modality (2026)
output tokens  ``gen_ai.usage.output_tokens``,                 GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.completion_tokens``,             the Vercel AI SDK (5 and later; 4)
               ``llm.token_count.completion``,
               ``ai.usage.outputTokens``, ``ai.usage.completionTokens``;
               else the sum of ``gen_ai.usage.{text,image,
               audio}.output_tokens``                          GenAI, per modality (2026)
cache reads    ``gen_ai.usage.cache_read.input_tokens``,       GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.cache_read_input_tokens``,       the Vercel AI SDK (6; 5 and 6)
               ``llm.token_count.prompt_details.cache_read``,
               ``ai.usage.inputTokenDetails.cacheReadTokens``,
               ``ai.usage.cachedInputTokens``;
               else the sum of ``gen_ai.usage.{text,image,
               audio,video}.cache_read.input_tokens``          GenAI, per modality (2026)
cache writes   ``gen_ai.usage.cache_write.input_tokens``,      GenAI (2026; up to semconv 1.41:
               ``gen_ai.usage.cache_creation.input_tokens``,   ``cache_creation``); OpenLLMetry;
               ``gen_ai.usage.cache_creation_input_tokens``,   OpenInference; the Vercel AI SDK (6)
               ``llm.token_count.prompt_details.cache_write``,
               ``ai.usage.inputTokenDetails.cacheWriteTokens``
reasoning      ``gen_ai.usage.reasoning.output_tokens``,       GenAI; OpenLLMetry; OpenInference;
               ``gen_ai.usage.reasoning_tokens``,              the Vercel AI SDK (6; 5)
               ``llm.token_count.completion_details.reasoning``,
               ``ai.usage.outputTokenDetails.reasoningTokens``,
               ``ai.usage.reasoningTokens``
total          ``llm.usage.total_tokens``,                     OpenLLMetry; OpenInference (the store
               ``llm.token_count.total``                       reads it only where input or output is
                                                               unknown)
============== =============================================== ==========================================

One rule for every figure: where a key of its ``totals`` holds a count, that count is the figure; else the
sum of the known ``parts`` (the per-modality counts), never both: the GenAI conventions make each part a
subset of the total, so adding them to it would count those tokens twice. A span with neither has no figure.

The Vercel AI SDK sets ``gen_ai.usage.input_tokens`` / ``output_tokens`` beside its own ``ai.usage.*`` on
its steps (4.3 and 6 read; they agree); its own keys come last, for the spans that carry nothing else.

Cache reads and writes are part of the input tokens, and reasoning tokens part of the output tokens, as the GenAI
conventions count them; they only change its price (see ``dashboard/costs.py``). Counts that are not non-negative
integers (a string, a bool, a negative number), or are past ``MAX_TOKENS`` (a part, or the parts' sum), are
unknown (None), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
)
INPUT_PART_KEYS = (
    "gen_ai.usage.text.input_tokens",
    "gen_ai.usage.image.input_tokens",
    "gen_ai.usage.audio.input_tokens",
    "gen_ai.usage.video.input_tokens",
)
OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
)
OUTPUT_PART_KEYS = (
    "gen_ai.usage.text.output_tokens",
    "gen_ai.usage.image.output_tokens",
    "gen_ai.usage.audio.output_tokens",
)
CACHE_READ_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.inputTokenDetails.cacheReadTokens",
    "ai.usage.cachedInputTokens",
)
CACHE_READ_PART_KEYS = (
    "gen_ai.usage.text.cache_read.input_tokens",
    "gen_ai.usage.image.cache_read.input_tokens",
    "gen_ai.usage.audio.cache_read.input_tokens",
    "gen_ai.usage.video.cache_read.input_tokens",
)
CACHE_WRITE_KEYS = (
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
    "ai.usage.inputTokenDetails.cacheWriteTokens",
)
REASONING_KEYS = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
    "ai.usage.outputTokenDetails.reasoningTokens",
    "ai.usage.reasoningTokens",
)
TOTAL_TOKEN_KEYS = ("llm.usage.total_tokens", "llm.token_count.total")


class Figure(NamedTuple):
    """One usage figure's keys: the first of ``totals`` that holds a count, else the sum of the known ``parts``."""

    totals: tuple[str, ...]
    parts: tuple[str, ...] = ()


INPUT = Figure(INPUT_TOKEN_KEYS, INPUT_PART_KEYS)
OUTPUT = Figure(OUTPUT_TOKEN_KEYS, OUTPUT_PART_KEYS)
CACHE_READ = Figure(CACHE_READ_KEYS, CACHE_READ_PART_KEYS)
CACHE_WRITE = Figure(CACHE_WRITE_KEYS)
REASONING = Figure(REASONING_KEYS)
TOTAL = Figure(TOTAL_TOKEN_KEYS)
FIGURES = (INPUT, OUTPUT, CACHE_READ, CACHE_WRITE, REASONING, TOTAL)
"""Every figure: their keys are the ones whose values are counts (``clickhouse/values.py`` types them back)."""


MAX_TOKENS = 2**32 - 1
"""The most tokens one model call's count may say (4,294,967,295): a thousand times any context window. A
count past it is no count a model makes, and summed it would overflow the store's 64-bit integers (two
of 2**63 - 1 already do), so one odd value would cost every figure of the good ones."""


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


def count_of(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` whose value is an integer from 0 to ``MAX_TOKENS``, else None."""
    for key in keys:
        count = _count(attributes.get(key))
        if count is not None:
            return count
    return None


def figure_of(attributes: Mapping[str, Any], figure: Figure) -> int | None:
    """``figure``'s count in ``attributes``: its total where one is present, else the sum of its known parts
    (None when none is known, or the sum is past ``MAX_TOKENS``)."""
    total = count_of(attributes, figure.totals)
    if total is not None or not figure.parts:
        return total
    known = False
    summed = 0
    for key in figure.parts:
        count = _count(attributes.get(key))
        if count is not None:
            known = True
            summed += count
    return summed if known and summed <= MAX_TOKENS else None


def cache_usage(attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The (cache read, cache write) input-token counts a model-call span records; None where unknown."""
    return figure_of(attributes, CACHE_READ), figure_of(attributes, CACHE_WRITE)


def token_usage(attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The (input, output) token counts a model-call span records; None where unknown."""
    return figure_of(attributes, INPUT), figure_of(attributes, OUTPUT)


def reasoning_usage(attributes: Mapping[str, Any]) -> int | None:
    """The reasoning tokens a model-call span records (part of its output tokens); None where unknown."""
    return figure_of(attributes, REASONING)


class Usage(NamedTuple):
    """A model call's token figures (each None where unknown): cache reads and writes are part of ``input``,
    reasoning part of ``output``."""

    input: int | None
    output: int | None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None


def usage_of(attributes: Mapping[str, Any]) -> Usage:
    """Every token figure a model-call span records, as :func:`figure_of` reads each."""
    return Usage(
        figure_of(attributes, INPUT),
        figure_of(attributes, OUTPUT),
        figure_of(attributes, CACHE_READ),
        figure_of(attributes, CACHE_WRITE),
        figure_of(attributes, REASONING),
    )
