"""How fast the dashboard is on the Collector's ClickHouse table: N tool spans (and N model spans) in chdb,
the time of each question the page asks and of a cold page.

    python -m benchmarks.clickhouse_queries [--calls 10000000] [--dir DIR]

The spans are generated inside ClickHouse (``INSERT … SELECT FROM numbers(N)``) in the exporter's table
and mapping (``otel_repeat_guard.clickhouse.table``): one agent run per 50 tool calls, over 5 services and
40 tools, a call per second; every third group of five calls is a run of identical calls (run lengths 2 to
5, reminders at 3 and 5, the issuing model call charged), as the guard records them. Each tool span is
issued by a model span of its run just before it. Goals: every question < 1 s, a cold page < 3 s.

Then the same questions and a cold page through the guard's rollup (``?rollup=guard``, see
``otel_repeat_guard/clickhouse/rollup.py``), after timing how long the rollup takes to build (``rollup``,
every window of the table) and to run again with nothing new (``rollup again``). ``--rollup-only`` skips the
table's own timings. Last, ``LIVE`` more calls arrive after the rollup's watermark (an hour not rolled up
yet, as in a table the Collector is filling): the questions and the cold page read it from the table as well.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.logs import LOGS_DDL
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, roll_up
from otel_repeat_guard.clickhouse.table import TRACES_DDL
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.settings import STORE_ENV
from otel_repeat_guard.store.queries import Filters

BASE_S = 1_767_225_600  # 2026-01-01 UTC
CHUNK = 1_000_000
LIVE = 3_000

_COMMON = """
    toUInt64(number) AS i, intDiv(i, 50) AS run, i % 50 AS p, intDiv(p, 5) AS g, p % 5 AS q, (g % 3 = 0) AS looping,
    if(looping, toInt64(q + 1), toInt64(1)) AS run_length,
    ['support-bot', 'coding-agent', 'ops-bot', 'research-assistant', 'billing-agent'][run % 5 + 1] AS service,
    concat('agent_', toString(run % 200)) AS agent_name, concat(agent_name, '#', lower(hex(run))) AS run_key,
    concat('tool_', leftPad(toString(if(looping, g * 7, p * 7 + run) % 40), 2, '0')) AS tool,
    lower(hex(toFixedString(reinterpretAsString(cityHash64(run, 't')), 8))) AS t1,
    concat(t1, t1) AS trace_id,
    lower(hex(toFixedString(reinterpretAsString(cityHash64(i, 'tool')), 8))) AS tool_span,
    lower(hex(toFixedString(reinterpretAsString(cityHash64(i, 'model')), 8))) AS model_span,
    toInt64({base:Int64}) * 1000000000 + toInt64(run) * 60000000000 + toInt64(p) * 1000000000 AS at_ns
"""

TOOLS_SQL = f"""
INSERT INTO {{table}} (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName, ResourceAttributes,
    ScopeName, SpanAttributes, Duration, StatusCode, `Events.Timestamp`, `Events.Name`, `Events.Attributes`)
SELECT fromUnixTimestamp64Nano(at_ns + 400000000), trace_id, tool_span, '', concat('execute_tool ', tool), 'Internal',
    service, map('service.name', service), 'bench',
    mapFilter((k, v) -> v != '', map('gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', tool,
        'gen_ai.tool.call.arguments', concat(char(123), '"q": ', toString(if(looping, g, p)), char(125)),
        'repeat_tool_guard.run', run_key, 'repeat_tool_guard.run_name', agent_name,
        'repeat_tool_guard.issuer', model_span, 'repeat_tool_guard.wasted', if(run_length >= 2, 'true', ''))),
    toUInt64(300000000), 'Unset',
    arrayResize([fromUnixTimestamp64Nano(at_ns + 700000000), fromUnixTimestamp64Nano(at_ns + 700000000)],
        (run_length >= 2) + (run_length IN (3, 5))),
    arrayResize(['repeat_tool_guard.repeat', 'repeat_tool_guard.reminder'], (run_length >= 2) + (run_length IN (3, 5))),
    arrayResize([map('repeat_tool_guard.run_length', toString(run_length), 'repeat_tool_guard.agent_id', run_key,
                     'gen_ai.tool.name', tool),
                 map('repeat_tool_guard.kind', 'repeat', 'repeat_tool_guard.tier', if(run_length = 3, 'gentle', 'detailed'),
                     'repeat_tool_guard.run_length', toString(run_length))],
        (run_length >= 2) + (run_length IN (3, 5)))
FROM (SELECT {_COMMON} FROM numbers({{start:UInt64}}, {{count:UInt64}}))
"""

MODELS_SQL = f"""
INSERT INTO {{table}} (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName, ResourceAttributes,
    ScopeName, SpanAttributes, Duration, StatusCode)
SELECT fromUnixTimestamp64Nano(at_ns), trace_id, model_span, '', 'chat gpt-4o', 'Client', service,
    map('service.name', service), 'bench',
    map('gen_ai.operation.name', 'chat', 'gen_ai.request.model', ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5'][run % 3 + 1],
        'gen_ai.provider.name', 'openai', 'gen_ai.usage.input_tokens', toString(1000 + p * 200),
        'gen_ai.usage.output_tokens', '50', 'gen_ai.conversation.id', concat('conversation-', toString(run % 1000)),
        'repeat_tool_guard.run', run_key, 'repeat_tool_guard.run_name', agent_name),
    toUInt64(350000000), 'Unset'
FROM (SELECT {_COMMON} FROM numbers({{start:UInt64}}, {{count:UInt64}}))
"""


_EVENTS_SQL = f"""
INSERT INTO {{logs}} (Timestamp, TraceId, SpanId, ServiceName, ScopeName, EventName, LogAttributes, Body)
SELECT fromUnixTimestamp64Nano(at_ns + ev.1), trace_id, tool_span, service, ev.2, ev.3, ev.4, ev.5
FROM (SELECT {_COMMON} FROM numbers({{start:UInt64}}, {{count:UInt64}}))
ARRAY JOIN arrayConcat(
    [(500000000, 'app', '', map('level', 'info'), 'tool called')],
    arrayResize([(700000000, 'otel_repeat_guard', 'repeat_tool_guard.repeat',
                  map('repeat_tool_guard.run_length', toString(run_length), 'repeat_tool_guard.agent_id', run_key,
                      'gen_ai.tool.name', tool), ''),
                 (700000000, 'otel_repeat_guard', 'repeat_tool_guard.reminder',
                  map('repeat_tool_guard.kind', 'repeat', 'repeat_tool_guard.tier',
                      if(run_length = 3, 'gentle', 'detailed'), 'repeat_tool_guard.run_length', toString(run_length)),
                  '')],
        (run_length >= 2) + (run_length IN (3, 5)))) AS ev
"""
"""Each tool call's log records: an application's, and the guard's events as log events (``--events logs|both``)."""
_EVENT_COUNT = "(run_length >= 2) + (run_length IN (3, 5))"
EVENTS = ("spans", "logs", "both")


def add_calls(client: ChdbClient, start: int, count: int, events: str = "spans") -> None:
    """Tool calls ``start`` to ``start + count`` (and their model calls) into the table; their guard events on
    the spans, in ``otel_logs``, or both (``events``)."""
    tools = TOOLS_SQL if events != "logs" else TOOLS_SQL.replace(_EVENT_COUNT, f"0 * ({_EVENT_COUNT})")
    params = {"base": BASE_S, "start": start, "count": count}
    for sql in (tools, MODELS_SQL):
        client.execute(sql.replace("{table}", "otel.otel_traces"), params)
    if events != "spans":
        client.execute(_EVENTS_SQL.replace("{logs}", "otel.otel_logs"), params)


def fill(directory: Path, calls: int, events: str = "spans") -> Target:
    target = Target(path=directory)
    client = ChdbClient(target)
    client.execute("CREATE DATABASE IF NOT EXISTS otel")
    client.execute(TRACES_DDL.format(database="otel", table="otel_traces"))
    if events != "spans":
        client.execute(LOGS_DDL.format(database="otel", table="otel_logs"))
    for start in range(0, calls, CHUNK):
        count = min(CHUNK, calls - start)
        add_calls(client, start, count, events)
        print(f"  filled {start + count:,} tool spans", flush=True)
    client.execute("OPTIMIZE TABLE otel.otel_traces FINAL")
    return target


def timed(name: str, question: Callable[[], Any], results: dict[str, float]) -> None:
    began = time.perf_counter()
    question()
    results[name] = round(time.perf_counter() - began, 3)
    print(f"  {name:<28} {results[name]:7.3f} s", flush=True)


def questions(reader: ClickHouseReader, day: Filters) -> dict[str, Callable[[], Any]]:
    tool = "tool_00"
    runs = reader.hotspot_runs(day, tool)
    key, end_id, length = str(runs.iloc[0]["agent_key"]), int(runs.iloc[0]["end_id"]), int(runs.iloc[0]["run_length"])
    return {
        "time_bounds": reader.time_bounds,
        "filter_options": reader.filter_options,
        "headline (day)": lambda: reader.headline(day),
        "headline (all)": lambda: reader.headline(Filters()),
        "hotspots_by_tool (day)": lambda: reader.hotspots_by_tool(day),
        "hotspots_by_agent (day)": lambda: reader.hotspots_by_agent(day),
        "model_tokens (day)": lambda: reader.model_tokens(day, (200_000,)),
        "wasted_tokens (day)": lambda: reader.wasted_tokens(day, (200_000,)),
        "reminder_outcomes (day)": lambda: reader.reminder_outcomes(day),
        "reminder_count (day)": lambda: reader.reminder_count(day),
        "over_time (day)": lambda: reader.over_time(day, 1800),
        "run_lengths (day)": lambda: reader.run_lengths(day),
        "unguarded_calls (day)": lambda: reader.unguarded_calls(day),
        "conversations (day)": lambda: reader.conversations(day),
        "hotspot_runs (day)": lambda: reader.hotspot_runs(day, tool),
        "loop_start_ns": lambda: reader.loop_start_ns(key, end_id, length),
        "run_timeline": lambda: reader.run_timeline(key, focus_ns=end_id),
    }


def cold_page(target: Target) -> float:
    from streamlit.testing.v1 import AppTest

    from otel_repeat_guard.dashboard import app

    rollup = "" if target.rollup is None else f"?rollup={target.rollup}"
    os.environ[STORE_ENV] = f"chdb://{target.path}{rollup}"
    began = time.perf_counter()
    page = AppTest.from_file(app.__file__, default_timeout=600).run()
    took = time.perf_counter() - began
    if page.exception:
        raise RuntimeError(f"the page failed: {page.exception}")
    return round(took, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="reuse (or keep) this chdb directory")
    parser.add_argument("--rollup-only", action="store_true", help="time the questions through the rollup only")
    parser.add_argument("--events", choices=EVENTS, default="spans", help="where the guard's events are kept")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bench-chdb-"))
    results: dict[str, float] = {}
    target = Target(path=directory)
    if not (directory / "data" / "otel").exists() and not any(directory.glob("**/otel_traces*")):
        print(f"filling {args.calls:,} tool spans (and as many model spans) into chdb://{directory}", flush=True)
        began = time.perf_counter()
        target = fill(directory, args.calls, args.events)
        results["fill"] = round(time.perf_counter() - began, 1)
    reader = ClickHouseReader(target)
    last = int(reader.time_bounds().iloc[0]["last_ns"])
    day = Filters(start_ns=last - 86_400 * 1_000_000_000, end_ns=last)
    if not args.rollup_only:
        print("questions (each asked cold, once):", flush=True)
        for name, question in questions(reader, day).items():
            timed(name, question, results)
        results["cold page"] = cold_page(target)
        print(f"  {'cold page (AppTest)':<28} {results['cold page']:7.3f} s", flush=True)
    rolled = replace(target, rollup="guard")
    client = ChdbClient(rolled)
    plan = RollPlan(until_ns=time.time_ns())
    for name in ("rollup", "rollup again"):
        report = roll_up(client, rolled, plan)
        results[name] = report.seconds
        print(f"  {name:<28} {report.seconds:7.3f} s ({report.windows:,} windows, {report.spans:,} spans)", flush=True)
    for label in ("rollup", "rollup + live hour"):
        if label != "rollup":
            add_calls(client, args.calls, LIVE, args.events)  # after the watermark: read from the table
        print(f"questions through the {label} (each asked cold, once):", flush=True)
        rolled_reader = ClickHouseReader(rolled)
        found = rolled_reader.time_bounds().iloc[0]
        last = int(found["last_ns"])
        day = Filters(start_ns=last - 86_400 * 1_000_000_000, end_ns=last)
        rolled_results: dict[str, float] = {}
        for name, question in questions(rolled_reader, day).items():
            timed(name, question, rolled_results)
        rolled_results["cold page"] = cold_page(rolled)
        print(f"  {'cold page (AppTest)':<28} {rolled_results['cold page']:7.3f} s", flush=True)
        results.update({f"{label}: {name}": took for name, took in rolled_results.items()})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
