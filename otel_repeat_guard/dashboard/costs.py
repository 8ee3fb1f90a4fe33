"""What model calls cost, from ``genai-prices`` (a maintained price database that works offline).

No price is written here: each model's rates come from ``genai_prices.calc_price``. The queries sum
tokens per model, provider and price band (a band is the range between two of the database's tier
thresholds, since a tier applies to a whole request once its input passes the threshold), and each
band is priced at the rate ``calc_price`` gives a request in it, so the sums are exact.

A model the database does not know, a call without a model name, and a call whose tokens are not
split into input and output are *unpriced*: their tokens are counted and named, never priced at $0.
Cache reads and cache writes, parts of the input as the GenAI conventions count it, are priced at the
model's cache-read and cache-write rates where genai-prices has them (at its input rate where not, as
``calc_price`` does). Reasoning tokens are output tokens and priced as such.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

import pandas as pd

logger = logging.getLogger("otel_repeat_guard")

# GenAI `gen_ai.provider.name` values whose genai-prices provider id differs.
PROVIDER_IDS = {
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "gcp.gen_ai": "google",
    "gemini": "google",
    "vertex_ai": "google",
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "aws.bedrock": "aws",
    "x_ai": "x-ai",
    "xai": "x-ai",
    "mistral_ai": "mistral",
}
_PROBE_OUTPUT = 1_000_000


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per input, per output, per cache-read and per cache-write input token of requests in one price band."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


def _calc(tokens_in: int, tokens_out: int, model: str, provider: str | None, **cached: int) -> tuple[Decimal, Decimal]:
    import genai_prices  # noqa: PLC0415 - the dashboard extra; imported where prices are needed

    usage = genai_prices.Usage(input_tokens=tokens_in, output_tokens=tokens_out, **cached)
    price = genai_prices.calc_price(usage, model, provider_id=provider)
    return Decimal(price.input_price), Decimal(price.output_price)


@cache
def rates(model: str | None, provider: str | None, band: int) -> Rates | None:
    """The rates of ``model`` (served by ``provider`` when known) for requests of more than ``band`` input
    tokens (up to the next threshold); None when genai-prices does not know the model."""
    if not model:
        return None
    tokens_in = int(band) + 1
    candidates: list[str | None] = []
    for candidate in (provider, PROVIDER_IDS.get(provider or ""), None):
        if candidate not in candidates:
            candidates.append(candidate)
    for candidate in candidates:
        try:
            input_price, _ = _calc(tokens_in, 0, model, candidate)
            _, output_price = _calc(tokens_in, _PROBE_OUTPUT, model, candidate)
            read_price, _ = _calc(tokens_in, 0, model, candidate, cache_read_tokens=tokens_in)
            write_price, _ = _calc(tokens_in, 0, model, candidate, cache_write_tokens=tokens_in)
        except LookupError:
            continue
        return Rates(
            input_price / tokens_in, output_price / _PROBE_OUTPUT, read_price / tokens_in, write_price / tokens_in
        )
    return None


@cache
def bands() -> tuple[int, ...]:
    """Every tier threshold in the price database, ascending: the band edges the queries sum by."""
    try:
        from genai_prices import data_snapshot, types  # noqa: PLC0415

        starts: set[int] = set()
        for provider in data_snapshot.get_snapshot().providers:
            for model in provider.models:
                prices = model.prices if isinstance(model.prices, list) else [model.prices]
                for conditional in prices:
                    price = conditional.prices if isinstance(conditional, types.ConditionalPrice) else conditional
                    for value in vars(price).values():
                        if isinstance(value, types.TieredPrices):
                            starts.update(int(tier.start) for tier in value.tiers)
        return tuple(sorted(starts))
    except Exception:  # a reshaped database: every request at its base rate, which is right below any tier
        logger.warning("could not read genai-prices' tier thresholds; requests are priced at base rates")
        return ()


def price(frame: pd.DataFrame) -> pd.DataFrame:
    """A token frame from ``queries.model_tokens`` or ``queries.wasted_tokens`` with ``cost`` (a Decimal:
    the priced tokens' price), ``priced_tokens`` and ``unpriced_tokens``, and ``unpriced_model`` (the model
    name or "(model not recorded)" for rows that could not be priced, else None)."""
    costs: list[Decimal] = []
    priced: list[int] = []
    unpriced: list[int] = []
    unknown: list[str | None] = []
    none = [0] * len(frame)
    for model, provider, band, tokens_in, tokens_out, total, cache_read, cache_write in zip(
        frame["model"],
        frame["provider"],
        frame["band"],
        frame["input_tokens"],
        frame["output_tokens"],
        frame["total_tokens"],
        frame.get("cache_read_tokens", none),
        frame.get("cache_write_tokens", none),
        strict=True,
    ):
        found = rates(_text(model), _text(provider), int(band))
        if found is None:
            costs.append(Decimal(0))
            priced.append(0)
            unpriced.append(int(total))
            unknown.append(_text(model) or "(model not recorded)")
            continue
        read, write = int(cache_read), int(cache_write)
        uncached = max(0, int(tokens_in) - read - write)  # cache counts above the input are priced as reported
        costs.append(
            found.input * uncached
            + found.cache_read * read
            + found.cache_write * write
            + found.output * int(tokens_out)
        )
        priced.append(int(tokens_in) + int(tokens_out))
        rest = int(total) - int(tokens_in) - int(tokens_out)
        unpriced.append(max(0, rest))
        unknown.append("(tokens not split into input and output)" if rest > 0 else None)
    return frame.assign(
        cost=pd.Series(costs, index=frame.index, dtype=object),
        priced_tokens=priced,
        unpriced_tokens=unpriced,
        unpriced_model=pd.Series(unknown, index=frame.index, dtype=object),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def summarize(priced: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Sum a priced frame by ``by``: ``calls``, ``total_tokens``, ``cost`` (Decimal), ``unpriced_tokens`` and
    ``unpriced`` (the unpriced models, comma-separated)."""
    columns = [*by, "calls", "total_tokens", "cost", "unpriced_tokens", "unpriced"]
    if priced.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, group in priced.groupby(list(by), dropna=False, sort=True):
        keys = key if isinstance(key, tuple) else (key,)
        rows.append(
            (
                *keys,
                int(group["calls"].sum()),
                int(group["total_tokens"].sum()),
                sum(group["cost"], Decimal(0)),
                int(group["unpriced_tokens"].sum()),
                _names(group["unpriced_model"]),
            )
        )
    return pd.DataFrame(rows, columns=columns)


def _names(values: Iterable[object]) -> str:
    return ", ".join(sorted({str(v) for v in values if isinstance(v, str)}))


def total(priced: pd.DataFrame) -> tuple[int, Decimal, int, str]:
    """Tokens, cost of the priced tokens, unpriced tokens, and the unpriced models, of a whole priced frame."""
    if priced.empty:
        return 0, Decimal(0), 0, ""
    return (
        int(priced["total_tokens"].sum()),
        sum(priced["cost"], Decimal(0)),
        int(priced["unpriced_tokens"].sum()),
        _names(priced["unpriced_model"]),
    )


def money(cost: Decimal, unpriced_tokens: int, tokens: int) -> str:
    """A cost as the page shows it: never "$0" for tokens whose price is unknown."""
    if tokens == 0:
        return "—"
    if unpriced_tokens >= tokens:
        return "price unknown"
    shown = f"${cost:,.2f}" if cost >= 1 else f"${cost:.4f}"
    return shown + (" + unpriced" if unpriced_tokens else "")
