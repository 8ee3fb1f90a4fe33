"""The page's tables from query results (``figures``), on the seeded store: pure pandas, no warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

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
