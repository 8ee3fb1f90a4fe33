"""The page's tables from query results (``figures``), on the seeded store: pure pandas, no warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from otel_repeat_guard.dashboard import costs, figures
from otel_repeat_guard.dashboard.sections.wording import WORDING, loop_calls, plural
from otel_repeat_guard.store import open_for_reading, queries
from otel_repeat_guard.store.queries import Filters


def test_hotspots_without_wasted_tokens_count_zero_and_pandas_warns_nothing(seeded_db: Path) -> None:
    """Regression: six FutureWarnings in the server log ("Downcasting object dtype arrays on .fillna"), from
    the merge of a hotspot table with no wasted tokens (an empty frame's columns are of object dtype)."""
    conn, _ = open_for_reading(seeded_db)
    try:
        by_tool, by_agent = queries.hotspots_by_tool(conn, Filters()), queries.hotspots_by_agent(conn, Filters())
        nothing = Filters(start_ns=1, end_ns=2)
        none_wasted = costs.price(queries.wasted_tokens(conn, nothing, costs.bands()))
        no_tokens = costs.price(queries.model_tokens(conn, nothing, costs.bands()))
    finally:
        conn.close()
    assert none_wasted.empty and not by_tool.empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tools = figures.with_wasted_tokens(by_tool, none_wasted, "tool", "tool", no_tokens)
        agents = figures.with_wasted_tokens(by_agent, none_wasted, "agent", "agent", no_tokens)
        models = figures.by_model(no_tokens, none_wasted)
    assert tools["wasted_tokens"].tolist() == [0] * len(by_tool)
    assert agents["tokens"].tolist() == [0] * len(by_agent)
    assert str(tools["wasted_tokens"].dtype) == "int64" and tools["wasted_cost"].tolist()[0] == "—"
    assert models.empty


def test_labels_say_one_repeated_call_and_two_repeated_calls() -> None:
    """Regression: "1 repeated calls"."""
    assert plural(1, "repeated call") == "1 repeated call"
    assert plural(2, "repeated call") == "2 repeated calls"
    assert plural(1_234, "call was", "calls were") == "1,234 calls were"
    assert loop_calls(1, WORDING[None]) == "1 call in a loop"
    assert loop_calls(3, WORDING[None]) == "3 calls in loops"
    assert loop_calls(1, WORDING["parallel_duplicate"]) == "1 parallel duplicate"


def test_one_rounding_adds_up_to_the_rounded_total() -> None:
    """Rounded one by one, these read 35.6 (and another split 35.8) for a total the Overview shows as 35.7."""
    spread = [12.04, 11.03, 12.62]  # 35.69 s
    assert [round(v, 1) for v in spread] == [12.0, 11.0, 12.6]  # one by one: 35.6
    assert figures.one_rounding(spread) == [12.1, 11.0, 12.6]  # the largest remainder takes the unit
    assert f"{sum(figures.one_rounding(spread)):.1f}" == "35.7"
    assert figures.one_rounding([]) == [] and figures.one_rounding([0.04, 0.04]) == [0.1, 0.0]


def test_wasted_seconds_and_token_shares_add_up_to_the_overview_by_tool_and_by_agent(seeded_db: Path) -> None:
    conn, _ = open_for_reading(seeded_db)
    try:
        by_tool, by_agent = queries.hotspots_by_tool(conn, Filters()), queries.hotspots_by_agent(conn, Filters())
        headline = queries.headline(conn, Filters()).iloc[0]
        all_tokens = costs.price(queries.model_tokens(conn, Filters(), costs.bands()))
        wasted = costs.price(queries.wasted_tokens(conn, Filters(), costs.bands()))
    finally:
        conn.close()
    shown = f"{float(headline['repeated_seconds']):.1f}"
    token_share = figures.token_headline(all_tokens, wasted).wasted_share
    for frame, label in ((by_tool, "tool"), (by_agent, "agent")):
        assert f"{sum(figures.one_rounding(frame['wasted_seconds'].tolist())):.1f}" == shown, label
        table = figures.with_wasted_tokens(frame, wasted, label, label, all_tokens)
        assert sum(table["wasted_token_share"]) == pytest.approx(token_share), label  # "Of all tokens", both
