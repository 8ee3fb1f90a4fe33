"""Outcome by variant: which wording of the reminders breaks loops, while ``reminder_variants`` runs an experiment."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.core.experiments import VariantRow, VariantTable, interval_text, variant_table
from otel_repeat_guard.store.queries.variants import variant_counts
from otel_repeat_guard.store.records import REPEAT

_COLUMNS = {
    "variant": st.column_config.TextColumn("Variant"),
    "model": st.column_config.TextColumn("Model"),
    "reminders": st.column_config.NumberColumn("Reminders", format="localized"),
    "broke": st.column_config.TextColumn(
        "Broke the loop (95% interval)", help="Broken ÷ (broken + ignored), with its 95% Wilson interval"
    ),
    "loops": st.column_config.NumberColumn("Loops", help="Runs of identical calls these reminders reminded"),
    "wasted_calls": st.column_config.NumberColumn(
        "Calls after", format="localized", help="The calls each loop still made after its first reminder"
    ),
    "wasted_tokens": st.column_config.NumberColumn(
        "Tokens after", format="localized", help="The tokens of the model calls that asked for those calls"
    ),
}


def _frame(rows: tuple[VariantRow, ...], *, models: bool) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "variant": row.variant,
                **({"model": row.model or "(unknown)"} if models else {}),
                "reminders": row.reminders,
                "broke": interval_text(row),
                "loops": row.loops,
                "wasted_calls": row.wasted_calls,
                "wasted_tokens": row.wasted_tokens,
            }
            for row in rows
        ]
    )


def draw(counts: pd.DataFrame, kind: str | None) -> VariantTable | None:
    """The view, from a reader's ``reminder_variants`` answer; the table drawn (None: nothing to draw)."""
    st.subheader("Outcome by variant")
    if kind not in (None, REPEAT):
        st.caption("Variants are compared on the reminders of runs of identical calls (the repeat kind) only.")
        return None
    table = variant_table(variant_counts(counts))
    if not table.by_variant:
        st.caption(
            "No reminder in this selection carries a wording variant. Set reminder_variants (for example "
            "seed,redirect) to give each agent run one, then compare them here."
        )
        return None
    st.markdown(f"**{table.verdict}**")
    for rows, models, key in ((table.by_variant, False, "variants"), (table.by_model, True, "variant_models")):
        st.dataframe(
            _frame(rows, models=models),
            key=key,
            hide_index=True,
            width="stretch",
            height="content",
            column_config=_COLUMNS,
        )
    return table
