"""How fast the dashboard is on a large store: fill N tool calls (and as many model calls), time each
query and a cold page.

    python benchmarks/dashboard_queries.py [--calls 1000000] [--db PATH]

The rows go straight into the store's schema (through the exporter's own insert path would
take minutes and measures the exporter, not the dashboard), and the roll-up the exporter
keeps alongside is then computed from them with ``rebuild_rollup`` (the store's upgrade
path; tests/store checks it equals what the exporter keeps); their shape follows the
demo: many agents and tools, most calls single, some runs of 2 to 15 with reminders at
3, 5 and 8, a few denied calls, a few excluded calls. Each tool call is issued by a model call
of its agent run just before it (five real models, tokens growing along the run, one conversation
id per agent), so the store holds N model calls too. Goals: every query < 1 s, the full page (a
cold ``AppTest`` run, caches cleared) < 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

import streamlit as st
from streamlit.testing.v1 import AppTest

from otel_repeat_guard.dashboard import VIEWS, costs
from otel_repeat_guard.dashboard.sections.headline import read_headline
from otel_repeat_guard.store import DB_ENV, open_for_reading, open_for_writing, queries
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.schema import rebuild_rollup

TOOLS = [f"tool_{i:02d}" for i in range(40)] + ["todo_write"]
SERVICES = ["support-bot", "coding-agent", "ops-bot", "research-assistant", "billing-agent"]
THRESHOLDS = {3: ("gentle", 3), 5: ("detailed", 5), 8: ("detailed", 8)}
MODELS = [
    ("gpt-4o", "openai"),
    ("gpt-4o-mini", "openai"),
    ("claude-sonnet-4-5", "anthropic"),
    ("claude-3-5-haiku-latest", "anthropic"),
    ("gemini-2.5-flash", "gcp.gemini"),
]
MODEL_COLUMNS = (
    "start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id, agent_key, agent_name, "
    "agent_known, agent_pending, model, provider, input_tokens, output_tokens, total_tokens, conversation_id, error,"
    " wasted_tool"
)
COLUMNS = (
    "start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id, agent_key, agent_name, "
    "agent_known, agent_pending, tool_name, tracked, arguments_digest, error, run_length, reminder_tier, "
    "reminder_threshold"
)


def fill(db: Path, calls: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    conn = open_for_writing(db)
    now = time.time_ns()
    start = now - 7 * 86400 * 1_000_000_000  # a week of traffic
    step = (now - start) // calls
    agents = 5000
    rows = []
    models = []
    made = 0
    while made < calls:
        agent = rng.randrange(agents)
        service = SERVICES[agent % len(SERVICES)]
        key, name = f"agent-{agent}#{agent:016x}", f"agent-{agent % 400}"
        trace_id = f"{rng.getrandbits(128):032x}"
        tool = rng.choice(TOOLS)
        length = 1 if rng.random() < 0.85 else rng.choice((2, 2, 2, 3, 3, 4, 5, 6, 8, 10, 15))
        digest = f"{rng.getrandbits(128):032x}"
        denied = rng.random() < 0.03
        for position in range(1, length + 1):
            if made >= calls:
                break
            end = start + made * step
            duration = rng.randrange(5, 3000) * 1_000_000
            tracked = tool != "todo_write"
            model, provider = MODELS[agent % len(MODELS)]
            input_tokens, output_tokens = 2_000 + 400 * position + rng.randrange(0, 3000), rng.randrange(20, 400)
            models.append(  # the model call that asked for this tool call, just before it
                (
                    end - duration - 700_000_000,
                    end - duration,
                    700_000_000,
                    service,
                    trace_id,
                    f"{rng.getrandbits(64):016x}",
                    f"{agent:016x}",
                    key,
                    name,
                    1,
                    0,
                    model,
                    provider,
                    input_tokens,
                    output_tokens,
                    input_tokens + output_tokens,
                    f"conversation-{agent % 2000}",
                    0,
                    tool if tracked and position >= 2 else None,  # it issued a repeated call: wasted
                )
            )
            tier, threshold = THRESHOLDS.get(position, (None, None)) if tracked else (None, None)
            rows.append(
                (
                    end - duration,
                    end,
                    duration,
                    service,
                    trace_id,
                    f"{rng.getrandbits(64):016x}",
                    f"{agent:016x}",
                    key,
                    name,
                    1,
                    0,
                    tool,
                    tracked,
                    digest,
                    denied,
                    position if tracked else None,
                    tier,
                    threshold,
                )
            )
            made += 1
        if len(rows) >= 50_000:
            _insert(conn, rows, models)
            rows.clear()
            models.clear()
    _insert(conn, rows, models)
    _detections(conn, rng)
    conn.execute(  # what the exporter keeps for the filter lists
        "INSERT OR IGNORE INTO dimensions SELECT 'service', service_name FROM tool_calls GROUP BY service_name"
        " UNION ALL SELECT 'agent', agent_name FROM tool_calls GROUP BY agent_name"
        " UNION ALL SELECT 'tool', tool_name FROM tool_calls GROUP BY tool_name"
    )
    conn.execute("BEGIN IMMEDIATE")
    rebuild_rollup(conn)  # what the exporter keeps, batch by batch (call_rollup and model_rollup)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def _detections(conn: sqlite3.Connection, rng: random.Random) -> None:
    """The ``detections`` rows: a repeat row per repeated call (as the schema upgrade backfills them), and
    cycles (period 2, 3 copies) and no-progress runs on about 1% of the other tracked calls each."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO detections (call_id, kind, end_ns, run_length, reminder_tier, reminder_threshold)"
        " SELECT id, 'repeat', end_ns, run_length, reminder_tier, reminder_threshold FROM tool_calls"
        " WHERE run_length >= 2"
    )
    singles = conn.execute("SELECT id, end_ns, tool_name FROM tool_calls WHERE run_length = 1").fetchall()
    found: list[tuple[object, ...]] = []
    for call_id, end_ns, tool in singles:
        draw = rng.random()
        if draw < 0.01:
            tools = json.dumps([rng.choice(TOOLS), tool])
            found.append((call_id, "cycle", end_ns, 6, 2, 3, tools, None, "gentle", 3))
        elif draw < 0.02:
            found.append(
                (call_id, "no_progress", end_ns, 3, None, None, None, f"{rng.getrandbits(128):032x}", None, None)
            )
    conn.executemany(f"INSERT INTO detections VALUES ({', '.join('?' * 10)})", found)
    conn.executemany(
        "INSERT OR IGNORE INTO dimensions VALUES ('loop_kind', ?)", [("repeat",), ("cycle",), ("no_progress",)]
    )
    conn.execute("COMMIT")


def _insert(conn: sqlite3.Connection, rows: Sequence[tuple[object, ...]], models: Sequence[tuple[object, ...]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(f"INSERT INTO tool_calls ({COLUMNS}) VALUES ({', '.join('?' * 18)})", rows)
    conn.executemany(f"INSERT INTO model_calls ({MODEL_COLUMNS}) VALUES ({', '.join('?' * 19)})", models)
    conn.execute("COMMIT")


T = TypeVar("T")


def timed(label: str, action: Callable[[], T], results: list[tuple[str, float]]) -> T:
    started = time.perf_counter()
    value = action()
    elapsed = time.perf_counter() - started
    results.append((label, elapsed))
    print(f"  {label:<44} {elapsed * 1000:8.1f} ms", flush=True)
    return value


def bench_queries(db: Path) -> list[tuple[str, float]]:
    results: list[tuple[str, float]] = []
    conn, _ = open_for_reading(db)
    try:
        bounds = queries.time_bounds(conn).iloc[0]
        span = int(bounds["last_ns"]) - int(bounds["first_ns"])
        bucket = queries.bucket_seconds(span)
        for title, filters in (
            ("all time, no filters", Filters()),
            ("last 24 hours", Filters(start_ns=int(bounds["last_ns"]) - 86400 * 1_000_000_000)),
            ("one service + one tool", Filters(services=("ops-bot",), tools=("tool_07",))),
            ("cycles only, all time", Filters(kind="cycle")),
        ):
            print(f"{title}:")
            timed("time_bounds", partial(queries.time_bounds, conn), results)
            timed("filter_options", partial(queries.filter_options, conn), results)
            timed("headline", partial(queries.headline, conn, filters), results)
            timed("hotspots_by_tool", partial(queries.hotspots_by_tool, conn, filters), results)
            timed("hotspots_by_agent", partial(queries.hotspots_by_agent, conn, filters), results)
            timed("over_time", partial(queries.over_time, conn, filters, bucket), results)
            timed("run_lengths", partial(queries.run_lengths, conn, filters), results)
            timed("model_tokens", partial(queries.model_tokens, conn, filters, costs.bands()), results)
            timed("wasted_tokens", partial(queries.wasted_tokens, conn, filters, costs.bands()), results)
            timed("reminder_count", partial(queries.reminder_count, conn, filters), results)
            timed("reminder_outcomes", partial(queries.reminder_outcomes, conn, filters), results)
            timed("unguarded_calls", partial(queries.unguarded_calls, conn, filters), results)
            timed("excluded_tools", partial(queries.excluded_tools, conn, filters.tools), results)
            listed = timed("conversations", partial(queries.conversations, conn, filters), results)
            if not listed.empty:
                conversation = str(listed.iloc[0]["conversation"])
                timed("conversation_runs", partial(queries.conversation_runs, conn, conversation), results)
            runs = timed("hotspot_runs(tool_07)", partial(queries.hotspot_runs, conn, filters, "tool_07"), results)
            first = runs.iloc[0]
            key, end_id, length = str(first["agent_key"]), int(first["end_id"]), int(first["run_length"])
            timed("chain(longest run)", partial(queries.chain, conn, key, end_id, length), results)
            focus = queries.loop_start_ns(conn, key, end_id, length)
            timed("run_timeline(longest run)", partial(queries.run_timeline, conn, key, focus_ns=focus), results)
            loops = timed(
                "hotspot_loops(tool_07, cycles)",
                partial(queries.hotspot_loops, conn, filters, "tool_07", ("cycle", "no_progress")),
                results,
            )
            if not loops.empty:
                agent = str(loops.iloc[0]["agent_key"])
                cycles = timed("agent_cycles", partial(queries.agent_cycles, conn, agent), results)
                if not cycles.empty:
                    last = cycles.iloc[-1]
                    timed(
                        "cycle_calls",
                        partial(
                            queries.cycle_calls,
                            conn,
                            agent,
                            int(last["end_id"]),
                            int(last["period"]),
                            int(last["repetitions"]),
                        ),
                        results,
                    )
    finally:
        conn.close()
    return results


PAGES = ("overview", "hotspots", "reminders", "runs", "conversations", "blind_spots")


def _shown(test: AppTest) -> list[tuple[str, str]]:
    """The Overview's headline figures, (label, value) as shown."""
    return [(f.label, f.value) for element in test.get("html") for f in read_headline(str(element.proto.body))]


def bench_page(db: Path) -> list[float]:
    """Cold runs of the overview (caches cleared), then of each other page, then a rerun on "All time"."""
    os.environ[DB_ENV] = str(db)
    app = Path(__file__).resolve().parents[1] / "otel_repeat_guard" / "dashboard" / "app.py"
    times = []
    for attempt in range(3):
        st.cache_data.clear()
        started = time.perf_counter()
        test = AppTest.from_file(str(app), default_timeout=120)
        test.run()
        times.append(time.perf_counter() - started)
        assert not test.exception, [e.message for e in test.exception]
        print(f"  cold page run {attempt + 1} (AppTest, caches cleared) {times[-1] * 1000:8.1f} ms", flush=True)
        print(f"    headline shown: {_shown(test)}", flush=True)
    for page in PAGES[1:]:
        st.cache_data.clear()
        started = time.perf_counter()
        test.switch_page(str(VIEWS / f"{page}.py")).run()
        assert not test.exception, [e.message for e in test.exception]
        print(f"  cold run of the {page} page (caches cleared) {(time.perf_counter() - started) * 1000:8.1f} ms")
    test.switch_page(str(VIEWS / "overview.py")).run()
    st.cache_data.clear()
    started = time.perf_counter()
    test.selectbox(key="time_range").set_value("All time").run()
    assert not test.exception, [e.message for e in test.exception]
    print(f"  page rerun with 'All time' (caches cleared) {(time.perf_counter() - started) * 1000:8.1f} ms", flush=True)
    print(f"    headline shown: {_shown(test)}", flush=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, default=None, help="reuse or create this store (default: a temp file)")
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory() if args.db is None else None
    db = args.db or Path(workdir.name) / "bench.db"  # type: ignore[union-attr]
    try:
        if not db.exists():
            started = time.perf_counter()
            fill(db, args.calls)
            print(f"filled {args.calls:,} tool calls in {time.perf_counter() - started:.1f} s", flush=True)
        print(f"store: {db} ({db.stat().st_size / 1e6:.0f} MB)")
        results = bench_queries(db)
        page = bench_page(db)
        worst = max(results, key=lambda r: r[1])
        print(f"slowest query: {worst[0]} {worst[1] * 1000:.1f} ms (goal < 1000 ms)")
        print(f"cold page: first {page[0] * 1000:.0f} ms, best {min(page) * 1000:.0f} ms (goal < 3000 ms)")
    finally:
        if workdir is not None:
            workdir.cleanup()


if __name__ == "__main__":
    main()
