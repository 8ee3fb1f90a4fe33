"""The roll-up-backed queries give the same figures as the same questions asked of every call.

A store spanning several UTC days is asked with time ranges that start and end on, just
before, and inside day boundaries (whole days come from ``call_rollup``, the edges from
``tool_calls``); the reference is the plain aggregate over ``tool_calls``.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator

import pandas as pd
import pytest

from otel_repeat_guard.store import open_for_reading, open_for_writing, queries
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.schema import ROLLUP_BUCKET_NS, rebuild_rollup

DAY = ROLLUP_BUCKET_NS
BASE = 20_000 * DAY  # a UTC midnight
AGENT = "COALESCE(agent_name, agent_key)"


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    db = tmp_path_factory.mktemp("days") / "days.db"
    rng = random.Random(3)
    writer = open_for_writing(db)
    rows = []
    end = BASE - DAY // 2
    for _ in range(600):
        agent, tool = rng.randrange(6), rng.choice(["grep", "shell", "todo_write", "fetch"])
        tracked = tool != "todo_write"
        for position in range(1, rng.choice((1, 1, 1, 2, 3, 5, 8)) + 1):
            end += rng.randrange(1, 3 * DAY // 400)
            tier = {3: "gentle", 5: "detailed", 8: "detailed"}.get(position) if tracked else None
            rows.append(
                (
                    end - 1000,
                    end,
                    1000 + position,
                    f"svc-{agent % 2}",
                    "t" * 32,
                    f"{len(rows):016x}",  # one row per span, as the store's unique key holds
                    f"key-{agent}",
                    None if agent == 5 else f"name-{agent % 4}",
                    tool,
                    tracked,
                    position if tracked else None,
                    tier,
                )
            )
    writer.execute("BEGIN IMMEDIATE")
    writer.executemany(
        "INSERT INTO tool_calls (start_ns, end_ns, duration_ns, service_name, trace_id, span_id, agent_key,"
        " agent_name, agent_known, agent_pending, tool_name, tracked, error, run_length, reminder_tier)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, 0, ?, ?)",
        rows,
    )
    writer.execute(  # two calls exactly on day boundaries, and one a nanosecond before one
        "INSERT INTO tool_calls (start_ns, end_ns, duration_ns, service_name, trace_id, span_id, agent_key,"
        " agent_name, agent_known, agent_pending, tool_name, tracked, error, run_length, reminder_tier)"
        " VALUES (0, ?, 7, 'svc-0', 't', 's1', 'key-0', 'name-0', 1, 0, 'grep', 1, 0, 2, NULL),"
        " (0, ?, 9, 'svc-1', 't', 's2', 'key-1', 'name-1', 1, 0, 'shell', 1, 0, 3, 'gentle'),"
        " (0, ?, 11, 'svc-1', 't', 's3', 'key-1', 'name-1', 1, 0, 'shell', 1, 0, 4, NULL)",
        (BASE + DAY, BASE + 2 * DAY, BASE + 2 * DAY - 1),
    )
    rebuild_rollup(writer)
    writer.execute("COMMIT")
    writer.close()
    connection, _ = open_for_reading(db)
    assert connection.execute("SELECT MAX(end_ns) FROM tool_calls").fetchone()[0] > BASE + 2 * DAY
    yield connection
    connection.close()


def _where(filters: Filters, *extra: str) -> tuple[str, list[object]]:
    clauses, params = list(extra), []  # type: ignore[var-annotated]
    if filters.start_ns is not None:
        clauses.append("end_ns >= ?")
        params.append(filters.start_ns)
    if filters.end_ns is not None:
        clauses.append("end_ns <= ?")
        params.append(filters.end_ns)
    for column, values in (("service_name", filters.services), (AGENT, filters.agents), ("tool_name", filters.tools)):
        if values:
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _tier(filters: Filters, tier: str) -> str:
    return f"reminder_tier = '{tier}'" if tier in (filters.tiers or queries.TIERS) else "0"


def reference_headline(conn: sqlite3.Connection, filters: Filters) -> dict[str, object]:
    where, params = _where(filters)
    sql = f"""
        SELECT COUNT(*) FILTER (WHERE tracked) AS tool_calls,
               COUNT(*) FILTER (WHERE NOT tracked) AS untracked_calls,
               COUNT(*) FILTER (WHERE run_length >= 2) AS repeated_calls,
               COUNT(*) FILTER (WHERE {_tier(filters, "gentle")}) AS gentle_reminders,
               COUNT(*) FILTER (WHERE {_tier(filters, "detailed")}) AS detailed_reminders,
               COUNT(DISTINCT CASE WHEN run_length >= 2 THEN {AGENT} END) AS agents_with_loops,
               COALESCE(MAX(run_length), 0) AS longest_run,
               COALESCE(SUM(duration_ns) FILTER (WHERE run_length >= 2), 0) / 1e9 AS repeated_seconds
        FROM tool_calls {where}
    """
    return pd.read_sql_query(sql, conn, params=params).iloc[0].to_dict()  # type: ignore[no-any-return]


def reference_grouped(conn: sqlite3.Connection, filters: Filters, key: str, label: str) -> pd.DataFrame:
    where, params = _where(filters, "tracked")
    sql = f"""
        SELECT {key} AS {label},
               COUNT(*) FILTER (WHERE run_length >= 2) AS repeated_calls,
               COUNT(*) FILTER (WHERE {_tier(filters, "gentle")} OR {_tier(filters, "detailed")}) AS reminders,
               MAX(run_length) AS longest_run,
               COALESCE(SUM(duration_ns) FILTER (WHERE run_length >= 2), 0) / 1e9 AS wasted_seconds,
               COUNT(*) AS calls
        FROM tool_calls {where}
        GROUP BY {key} HAVING repeated_calls > 0 ORDER BY repeated_calls DESC, {label}
    """
    frame = pd.read_sql_query(sql, conn, params=params)
    frame["repeated_share"] = frame["repeated_calls"] / frame["calls"]
    return frame


RANGES = {
    "all time": (None, None),
    "from mid-day": (BASE + DAY // 3, None),
    "from a midnight": (BASE + DAY, None),
    "from just after a midnight": (BASE + DAY + 1, None),
    "until mid-day": (None, BASE + DAY + DAY // 2),
    "until a midnight": (None, BASE + 2 * DAY),
    "until just before a midnight": (None, BASE + 2 * DAY - 1),
    "mid-day to mid-day": (BASE + DAY // 4, BASE + 2 * DAY + DAY // 5),
    "within one day": (BASE + DAY + 10, BASE + 2 * DAY - 10),
    "exactly one day": (BASE + DAY, BASE + 2 * DAY - 1),
    "nothing": (BASE + 90 * DAY, None),
}
NARROWING = {
    "no filters": {},
    "service": {"services": ("svc-1",)},
    "agents": {"agents": ("name-0", "key-5")},
    "tools and tier": {"tools": ("grep", "todo_write"), "tiers": ("detailed",)},
}


@pytest.mark.parametrize("narrowing", NARROWING)
@pytest.mark.parametrize("time_range", RANGES)
def test_rollup_queries_equal_the_plain_aggregates(conn: sqlite3.Connection, time_range: str, narrowing: str) -> None:
    start, end = RANGES[time_range]
    filters = Filters(start_ns=start, end_ns=end, **NARROWING[narrowing])  # type: ignore[arg-type]
    got = queries.headline(conn, filters).iloc[0].to_dict()
    expected = reference_headline(conn, filters)
    assert {k: got[k] for k in expected} == pytest.approx(expected)
    for query, key, label in (("hotspots_by_tool", "tool_name", "tool"), ("hotspots_by_agent", AGENT, "agent")):
        pd.testing.assert_frame_equal(
            getattr(queries, query)(conn, filters), reference_grouped(conn, filters, key, label), check_dtype=False
        )


def test_the_store_spans_several_days_and_has_loops(conn: sqlite3.Connection) -> None:
    days = conn.execute("SELECT COUNT(DISTINCT bucket_ns) FROM call_rollup").fetchone()[0]
    assert days >= 3
    assert queries.headline(conn, Filters()).iloc[0]["longest_run"] == 8


@pytest.fixture(scope="module")
def model_conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """Model calls over several days: rolled-up ones, pending ones, ones past the roll-up's input size,
    some without token counts or a model, and some that issued repeats."""
    db = tmp_path_factory.mktemp("model-days") / "days.db"
    rng = random.Random(5)
    writer = open_for_writing(db)
    rows = []
    end = BASE - DAY // 2
    for index in range(3000):
        end += rng.randrange(1, 3 * DAY // 2000)
        agent = rng.randrange(5)
        tokens_in = rng.choice((1000, 5000, 31_999, 32_000, 32_001, 150_000, 250_000, None))
        tokens_out = None if tokens_in is None and rng.random() < 0.5 else rng.randrange(10, 500)
        rows.append(
            (
                end - 1000,
                end,
                1000,
                f"svc-{agent % 2}",
                "t" * 32,
                f"{index:016x}",
                f"key-{agent}",
                None if agent == 4 else f"name-{agent % 3}",
                int(rng.random() < 0.1),  # pending: the roll-up leaves it out
                rng.choice(("gpt-4o", "claude-sonnet-4-5", None)),
                "openai",
                tokens_in,
                tokens_out,
                None if tokens_in is None and tokens_out is None else (tokens_in or 0) + (tokens_out or 0),
                rng.choice((None, None, "grep", "shell")),
            )
        )
    writer.execute("BEGIN IMMEDIATE")
    writer.executemany(
        "INSERT INTO model_calls (start_ns, end_ns, duration_ns, service_name, trace_id, span_id, agent_key,"
        " agent_name, agent_known, agent_pending, model, provider, input_tokens, output_tokens, total_tokens,"
        " error, wasted_tool) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, 0, ?)",
        rows,
    )
    rebuild_rollup(writer)
    writer.execute("COMMIT")
    writer.close()
    connection, _ = open_for_reading(db)
    assert connection.execute("SELECT COUNT(*) FROM model_rollup").fetchone()[0] > 0
    yield connection
    connection.close()


def reference_model_tokens(
    conn: sqlite3.Connection, filters: Filters, bands: tuple[int, ...], *, wasted: bool
) -> pd.DataFrame:
    clauses, params = [], []  # type: ignore[var-annotated]
    for condition, bound in (("end_ns >= ?", filters.start_ns), ("end_ns <= ?", filters.end_ns)):
        if bound is not None:
            clauses.append(condition)
            params.append(bound)
    for column, values in (("service_name", filters.services), (AGENT, filters.agents)):
        if values:
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if wasted:
        clauses.append("wasted_tool IS NOT NULL")
        if filters.tools:
            clauses.append(f"wasted_tool IN ({', '.join('?' * len(filters.tools))})")
            params.extend(filters.tools)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    frame = pd.read_sql_query(
        f"SELECT wasted_tool AS tool, {AGENT} AS agent, model, provider, input_tokens, output_tokens, total_tokens"
        f" FROM model_calls {where}",
        conn,
        params=params,
    )
    frame["band"] = [max([b for b in bands if pd.notna(i) and i > b], default=0) for i in frame["input_tokens"]]
    frame["unsplit_calls"] = (frame["input_tokens"].isna() | frame["output_tokens"].isna()).astype(int)
    frame["total_tokens"] = frame["total_tokens"].fillna(
        frame["input_tokens"].fillna(0) + frame["output_tokens"].fillna(0)
    )
    keys = (["tool"] if wasted else []) + ["agent", "model", "provider", "band"]
    summed = (
        frame.assign(calls=1)
        .fillna({"input_tokens": 0, "output_tokens": 0})
        .groupby(keys, dropna=False)[["calls", "input_tokens", "output_tokens", "total_tokens", "unsplit_calls"]]
        .sum()
        .reset_index()
    )
    return summed.sort_values(keys, na_position="first").reset_index(drop=True)


@pytest.mark.parametrize("narrowing", NARROWING)
@pytest.mark.parametrize("time_range", RANGES)
def test_model_token_queries_equal_the_plain_aggregates(
    model_conn: sqlite3.Connection, time_range: str, narrowing: str
) -> None:
    from otel_repeat_guard.dashboard import costs

    start, end = RANGES[time_range]
    filters = Filters(start_ns=start, end_ns=end, **{k: v for k, v in NARROWING[narrowing].items() if k != "agents"})  # type: ignore[arg-type]
    bands = costs.bands()
    for wasted, query in ((False, queries.model_tokens), (True, queries.wasted_tokens)):
        got = query(model_conn, filters, bands)
        keys = (["tool"] if wasted else []) + ["agent", "model", "provider", "band"]
        got = got.sort_values(keys, na_position="first").reset_index(drop=True)
        expected = reference_model_tokens(model_conn, filters, bands, wasted=wasted)

        def plain(frame: pd.DataFrame) -> pd.DataFrame:  # None and NaN alike, numbers as floats
            return frame.astype(object).where(frame.notna(), None)

        pd.testing.assert_frame_equal(plain(got[expected.columns]), plain(expected), check_dtype=False)
