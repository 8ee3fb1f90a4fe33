"""The page's one cached-question helper: each question keeps its own answers, kept for the same arguments."""

from __future__ import annotations

from pathlib import Path

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.source import Reader
from otel_repeat_guard.store.queries import Filters

ASKED: list[str] = []


def _first(reader: Reader, n: int) -> str:
    ASKED.append("first")
    return f"first {n}"


def _second(reader: Reader, n: int) -> str:
    ASKED.append("second")
    return f"second {n}"


def test_each_query_keeps_its_own_answers(seeded_db: Path) -> None:
    first, second = reads.cached(_first), reads.cached(_second)
    db = str(seeded_db)
    assert (first(db, 1), second(db, 1), first(db, 1), first(db, 2)) == ("first 1", "second 1", "first 1", "first 2")
    assert ASKED == ["first", "second", "first"]  # the repeated question was answered from the cache


def test_the_page_reads_answer_with_their_own_query(seeded_db: Path) -> None:
    db = str(seeded_db)
    assert "tool" in reads.hotspots_by_tool(db, Filters()).columns
    assert "agent" in reads.hotspots_by_agent(db, Filters()).columns
    assert reads.has_data(db)
