"""The page's tables, put together from query results and prices (pure pandas: no SQL, no drawing)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from otel_repeat_guard.dashboard import costs
from otel_repeat_guard.store.queries import OUTCOMES


@dataclass(frozen=True, slots=True)
class TokenHeadline:
    """All tokens and the wasted ones in the selection, with their cost (of the tokens that have a price)."""

    tokens: int
    cost: Decimal
    unpriced_tokens: int
    wasted_tokens: int
    wasted_cost: Decimal
    wasted_unpriced_tokens: int
    unpriced_models: str

    @property
    def wasted_share(self) -> float:
        return self.wasted_tokens / self.tokens if self.tokens else 0.0

    @property
    def wasted_money(self) -> str:
        return costs.money(self.wasted_cost, self.wasted_unpriced_tokens, self.wasted_tokens)

    @property
    def money(self) -> str:
        return costs.money(self.cost, self.unpriced_tokens, self.tokens)


def token_headline(all_priced: pd.DataFrame, wasted_priced: pd.DataFrame) -> TokenHeadline:
    tokens, cost, unpriced, models = costs.total(all_priced)
    wasted, wasted_cost, wasted_unpriced, wasted_models = costs.total(wasted_priced)
    names = ", ".join(sorted({n for n in (models + ", " + wasted_models).split(", ") if n}))
    return TokenHeadline(tokens, cost, unpriced, wasted, wasted_cost, wasted_unpriced, names)


def one_rounding(values: Sequence[float], digits: int = 1) -> list[float]:
    """``values`` rounded to ``digits`` decimals so that they add up to their total rounded the same way
    (as the Overview shows it): each is rounded down, and the units left go to the largest remainders
    (the first of equal ones). Rounded one by one, 35.69 s spread over tools read 35.6 and over agents 35.8."""
    scale = 10**digits
    units = [max(0.0, float(v)) * scale for v in values]
    floors = [math.floor(u) for u in units]
    target = round(float(f"{sum(units) / scale:.{digits}f}") * scale)
    left = target - sum(floors)
    order = sorted(range(len(units)), key=lambda i: (-(units[i] - floors[i]), i))
    for i in order[: max(0, left)]:
        floors[i] += 1
    return [f / scale for f in floors]


def _counts(column: pd.Series) -> pd.Series:
    """Whole counts, none (a row the merge found nothing for) as 0. An empty frame's column is of object
    dtype, so after a merge it holds only NaN: typed first, so that ``fillna`` downcasts nothing (pandas
    warns of that)."""
    return column.infer_objects().fillna(0).astype(int)


def _wasted_columns(wasted: pd.DataFrame, key: str, label: str) -> pd.DataFrame:
    summed = costs.summarize(wasted, [key]).rename(
        columns={
            key: label,
            "calls": "wasted_model_calls",
            "total_tokens": "wasted_tokens",
            "cost": "wasted_cost_usd",
            "unpriced_tokens": "wasted_unpriced_tokens",
            "unpriced": "wasted_unpriced",
        }
    )
    return summed


def with_wasted_tokens(
    hotspots: pd.DataFrame, wasted: pd.DataFrame, key: str, label: str, all_priced: pd.DataFrame
) -> pd.DataFrame:
    """A hotspot table (by tool or by agent) with the wasted tokens, their cost (``wasted_cost`` as the page
    shows it) and ``wasted_token_share``: of all model tokens in the selection, for a tool and for an agent
    alike, so that each table's shares add up to the Overview's."""
    merged = hotspots.merge(_wasted_columns(wasted, key, label), on=label, how="left")
    merged["wasted_tokens"] = _counts(merged["wasted_tokens"])
    merged["wasted_unpriced_tokens"] = _counts(merged["wasted_unpriced_tokens"])
    merged["wasted_cost"] = [
        costs.money(cost if isinstance(cost, Decimal) else Decimal(0), int(unpriced), int(tokens))
        for cost, unpriced, tokens in zip(
            merged["wasted_cost_usd"], merged["wasted_unpriced_tokens"], merged["wasted_tokens"], strict=True
        )
    ]
    merged["tokens"] = costs.total(all_priced)[0]
    merged["wasted_token_share"] = [
        w / t if t else 0.0 for w, t in zip(merged["wasted_tokens"], merged["tokens"], strict=True)
    ]
    return merged


def by_model(all_priced: pd.DataFrame, wasted_priced: pd.DataFrame) -> pd.DataFrame:
    """Per model: calls, tokens, wasted tokens and their share of the model's tokens, cost and wasted cost."""
    models = costs.summarize(all_priced.assign(model=all_priced["model"].fillna("(not recorded)")), ["model"])
    wasted = _wasted_columns(
        wasted_priced.assign(model=wasted_priced["model"].fillna("(not recorded)")), "model", "model"
    )
    merged = models.merge(wasted, on="model", how="left")
    for column in ("wasted_tokens", "wasted_unpriced_tokens", "wasted_model_calls"):
        merged[column] = _counts(merged[column])
    merged["wasted_share"] = [
        w / t if t else 0.0 for w, t in zip(merged["wasted_tokens"], merged["total_tokens"], strict=True)
    ]
    merged["cost_text"] = [
        costs.money(c, int(u), int(t))
        for c, u, t in zip(merged["cost"], merged["unpriced_tokens"], merged["total_tokens"], strict=True)
    ]
    merged["wasted_cost"] = [
        costs.money(c if isinstance(c, Decimal) else Decimal(0), int(u), int(t))
        for c, u, t in zip(
            merged["wasted_cost_usd"], merged["wasted_unpriced_tokens"], merged["wasted_tokens"], strict=True
        )
    ]
    return merged.sort_values(["wasted_tokens", "total_tokens", "model"], ascending=[False, False, True]).reset_index(
        drop=True
    )


def efficacy(outcomes: pd.DataFrame, by: str) -> pd.DataFrame:
    """Reminders per ``by`` (tier, tool, agent or model) and outcome, with the share that changed course:
    ``heeded`` = broken ÷ decided (broken + ignored; a run that ended, or a reminder still open, decides nothing)."""
    columns = [by, "reminders", *OUTCOMES, "heeded"]
    if outcomes.empty:
        return pd.DataFrame(columns=columns)
    frame = outcomes.assign(**{by: outcomes[by].fillna("(not recorded)")})
    wide = frame.pivot_table(index=by, columns="outcome", values="reminders", aggfunc="sum", fill_value=0)
    for outcome in OUTCOMES:
        if outcome not in wide.columns:
            wide[outcome] = 0
    wide = wide[list(OUTCOMES)].astype(int).reset_index()
    wide["reminders"] = wide[list(OUTCOMES)].sum(axis=1)
    decided = wide["broken"] + wide["ignored"]
    wide["heeded"] = (wide["broken"] / decided.where(decided > 0)).astype(float)
    return wide[columns].sort_values(["reminders", by], ascending=[False, True]).reset_index(drop=True)


OVERALL = "(all reminders)"
"""The label of the overall row :func:`efficacy_with_overall` adds."""


def efficacy_with_overall(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """:func:`efficacy`'s table with a last row for every reminder in it (labelled ``OVERALL``), its
    ``heeded`` the share of all decided reminders (not an average of the rows' shares)."""
    if table.empty:
        return table
    counts = {column: int(table[column].sum()) for column in ("reminders", *OUTCOMES)}
    decided = counts["broken"] + counts["ignored"]
    overall = {by: OVERALL, **counts, "heeded": counts["broken"] / decided if decided else float("nan")}
    return pd.concat([table, pd.DataFrame([overall])], ignore_index=True)[list(table.columns)]


def heeded_rate(outcomes: pd.DataFrame) -> tuple[int, int, int]:
    """Broken, ignored and all reminders of an outcome frame."""
    if outcomes.empty:
        return 0, 0, 0
    counts = outcomes.groupby("outcome")["reminders"].sum()
    return int(counts.get("broken", 0)), int(counts.get("ignored", 0)), int(counts.sum())
