"""A real framework's spans, not only the demo's: a LangChain ``create_agent`` run under OpenInference with
the guard in the process (tests/fixtures/langchain_openinference), as the Collector's clickhouse exporter
stores it. Its tool spans are OpenInference's (``openinference.span.kind = TOOL``, ``tool.name``), its model
calls LLM spans with ``llm.token_count.*``: every dashboard figure equals the embedded store's."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.test_figures import QUESTIONS, _same, same_drill_down


def test_the_capture_is_the_loop_the_guard_saw(capture_pair: tuple[Path, Target]) -> None:
    """Nine identical lookups, reminded at 3, 5 and 8; ten model calls, the 2nd to 9th wasted (44,124 tokens)."""
    head = ClickHouseReader(capture_pair[1]).headline(Filters()).iloc[0]
    assert (int(head["tool_calls"]), int(head["repeated_calls"]), int(head["longest_run"])) == (9, 8, 9)
    wasted = ClickHouseReader(capture_pair[1]).wasted_tokens(Filters(), (200_000,))
    assert (int(wasted["input_tokens"].sum()), int(wasted["output_tokens"].sum())) == (44_000, 124)
    assert int(ClickHouseReader(capture_pair[1]).reminder_count(Filters())) == 3


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_figure_of_the_capture_equals_the_embedded_stores(
    capture_pair: tuple[Path, Target], question: str
) -> None:
    store, target = capture_pair
    for filters in (Filters(), Filters(tools=("lookup",)), Filters(tiers=("gentle",))):
        _same(QUESTIONS[question](SQLiteReader(store), filters), QUESTIONS[question](ClickHouseReader(target), filters))


def test_the_captures_drill_down_is_the_same_run_and_timeline(capture_pair: tuple[Path, Target]) -> None:
    timeline = same_drill_down(*capture_pair, "lookup")
    assert (timeline["kind"] == "model").sum() == 10
