"""Text reaches ClickHouse's SQL as data (issue 41.3): names holding backslashes, tabs, newlines, quotes, a trailing
backslash, NUL and non-ASCII filter, drill down and time-line their own calls, on every question of the reader, from
the table and through its rollup, the same as the embedded store; and clickhouse-connect, which binds the same
parameters on a server, is handed the same text as chdb is.

The chdb client passed a parameter's text as is, which ClickHouse reads with its escapes: ``C:\\agents\\a1`` became
``C:<BEL>gents<BEL>1``, ``tab\\tname`` lost its tab, and ``ends-with\\`` failed with ``Cannot parse escape sequence``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.clickhouse.client import ChdbClient, Value, parameter_text
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.dashboard.source import Reader, SQLiteReader
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill
from tests.clickhouse.test_figures import QUESTIONS, _same
from tests.clickhouse.test_rollup import rolled

HOSTILE = {
    "backslashes": "C:\\agents\\a1",
    "a-tab": "tab\tname",
    "a-trailing-backslash": "ends-with\\",
    "a-newline": "two\nlines",
    "quotes": 'it\'s "quoted" `too`',
    "a-nul": "nul\x00byte",
    "non-ascii": "agent-é✓😀",
    "an-escaped-null": "\\N",
    "like-wildcards": "100%_sure*",
    "a-parameter": "{db:Identifier}",
}
"""Names as an agent, its id, its tool, its service and its conversation are given them."""
T0 = 1_790_000_000_000_000_000
MODEL = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"}
CALLS = 3


def _runs(store: Path) -> list[ReadableSpan]:
    """For each hostile name, a service of that name whose agent (named and id'd so) calls a tool of that name three
    times alike in a conversation of that name: through a real guard, to the embedded store and to memory."""
    spans: list[ReadableSpan] = []
    clock = itertools.count(T0, 1_000_000)
    for name in HOSTILE.values():
        memory = InMemorySpanExporter()  # one per provider: each shuts its own down
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))
        provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(store)))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("tests.clickhouse.hostile")
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "gen_ai.agent.id": name}
        root = tracer.start_span(f"invoke_agent {name}", attributes=agent, start_time=next(clock))
        context = trace.set_span_in_context(root)
        model = {**MODEL, "gen_ai.conversation.id": name, "gen_ai.usage.input_tokens": 100}
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps({"q": name}),
        }
        for attributes, span_name in [(model, "chat"), (tool, f"execute_tool {name}")] * CALLS + [(model, "chat")]:
            span = tracer.start_span(span_name, context, attributes=attributes, start_time=next(clock))
            span.end(next(clock))
        root.end(next(clock))
        provider.shutdown()
        spans.extend(memory.get_finished_spans())
    return spans


@pytest.fixture(scope="module")
def hostile(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Reader]:
    """The embedded store, the table (in the session's chdb) and the table through its rollup, of the same spans."""
    store = tmp_path_factory.mktemp("hostile") / "store.db"
    target = fill(demo_filled[2].path, _runs(store), table="hostile_traces")
    through, _report = rolled(target, "hostile_rollup")
    return {"store": SQLiteReader(store), "table": ClickHouseReader(target), "rollup": ClickHouseReader(through)}


def _filters(name: str) -> Filters:
    """Each filter on the name at once: a misread one alone leaves no row."""
    return Filters(services=(name,), agents=(name,), tools=(name,))


def test_the_hostile_names_are_what_each_case_needs(hostile: dict[str, Reader]) -> None:
    """The store holds each name whole, as the agent, the tool and the service, with its three calls in a loop."""
    store = hostile["store"]
    options = store.filter_options()
    for kind in ("agent", "tool", "service"):
        assert set(HOSTILE.values()) <= set(options[options["kind"] == kind]["value"])
    for name in HOSTILE.values():
        headline = store.headline(_filters(name)).iloc[0]
        assert (int(headline["tool_calls"]), int(headline["repeated_calls"])) == (CALLS, CALLS - 1)


@pytest.mark.parametrize("read", ["table", "rollup"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_name_filters_its_own_calls_on_every_page_question(
    hostile: dict[str, Reader], case: str, read: str
) -> None:
    name, store, clickhouse = HOSTILE[case], hostile["store"], hostile[read]
    filters = _filters(name)
    assert int(clickhouse.headline(filters).iloc[0]["tool_calls"]) == CALLS
    for question in QUESTIONS.values():
        _same(question(store, filters), question(clickhouse, filters))


@pytest.mark.parametrize("read", ["table", "rollup"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_name_drills_down_to_its_runs_conversation_and_timeline(
    hostile: dict[str, Reader], case: str, read: str
) -> None:
    """The drill-down by tool, the run's loop start and timeline, the conversation's runs: all keyed by the name."""
    name, store, clickhouse = HOSTILE[case], hostile["store"], hostile[read]
    expected, got = store.hotspot_runs(Filters(), name), clickhouse.hotspot_runs(Filters(), name)
    assert len(got) == 1 and int(got.iloc[0]["run_length"]) == CALLS
    _same(expected.drop(columns="end_id"), got.drop(columns="end_id"))
    key = str(expected.iloc[0]["agent_key"])
    assert key.startswith(f"{name}#")  # the run's key: the agent's name and its span
    start = store.loop_start_ns(key, int(expected.iloc[0]["end_id"]), CALLS)
    assert start is not None and start == clickhouse.loop_start_ns(key, int(got.iloc[0]["end_id"]), CALLS)
    columns = ["kind", "start_ns", "end_ns", "name", "run_length", "error", "reminder_tier", "text", "note", "outcome"]
    timeline = clickhouse.run_timeline(key)
    assert len(timeline) == 2 * CALLS + 1 and set(timeline["name"]) == {name, "gpt-4o-mini"}
    _same(store.run_timeline(key)[columns], timeline[columns])
    _same(store.run_timeline(key, focus_ns=start)[columns], clickhouse.run_timeline(key, focus_ns=start)[columns])
    runs = clickhouse.conversation_runs(name)
    assert runs["agent_key"].tolist() == [key]
    _same(store.conversation_runs(name), runs)


def test_the_store_wide_reads_hold_every_hostile_name(hostile: dict[str, Reader]) -> None:
    store = hostile["store"]
    for read in ("table", "rollup"):
        clickhouse = hostile[read]
        for question in ("time_bounds", "has_model_calls", "has_data"):
            _same(getattr(store, question)(), getattr(clickhouse, question)())
        options = clickhouse.filter_options()
        for kind in ("agent", "tool", "service"):
            assert set(HOSTILE.values()) <= set(options[options["kind"] == kind]["value"])
        _same(store.conversations(Filters(), limit=100), clickhouse.conversations(Filters(), limit=100))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_tool_pattern_matches_its_tool_literally(hostile: dict[str, Reader], case: str) -> None:
    """``OTEL_REPEAT_GUARD_EXCLUDE`` patterns reach the table's SQL as LIKE patterns bound as data: a pattern that is
    the tool's name (``*`` aside) excludes that tool and no other; ``excluded_tools`` names it back."""
    name = HOSTILE[case]
    table = hostile["table"]
    assert isinstance(table, ClickHouseReader)
    config = GuardConfig(exclude=(name,))
    reader = ClickHouseReader(table.target, config=config, client=table.client)
    figures = reader.headline(Filters()).iloc[0]
    everything = table.headline(Filters()).iloc[0]
    assert int(figures["untracked_calls"]) - int(everything["untracked_calls"]) == CALLS  # "100%_sure*": its own only
    assert int(reader.headline(Filters(tools=(name,))).iloc[0]["untracked_calls"]) == CALLS
    assert reader.excluded_tools([name, "a-tool-not-held"])["tool"].tolist() == [name]


_BOUND: list[tuple[str, Value]] = [
    *((f"text-{case}", name) for case, name in HOSTILE.items()),
    ("texts", list(HOSTILE.values())),
    ("empty-texts", []),
    ("numbers", [1, -2, 2**62]),
    ("an-int", -(2**62)),
    ("a-float", 0.25),
]


@pytest.mark.parametrize(("case", "value"), _BOUND, ids=[case for case, _ in _BOUND])
def test_chdb_gets_the_parameter_text_clickhouse_connect_sends_a_server(case: str, value: Value) -> None:
    """The one function that writes a parameter's text gives what clickhouse-connect's server-side binding sends
    (so both engines parse the same text), and ClickHouse reads the value back whole."""
    binding = pytest.importorskip("clickhouse_connect.driver.binding")
    assert parameter_text(value) == binding.format_bind_value(value)


@pytest.mark.parametrize(("case", "value"), _BOUND, ids=[case for case, _ in _BOUND])
def test_every_parameter_value_round_trips_through_chdb(
    demo_filled: tuple[list[ReadableSpan], Path, Target], case: str, value: Value
) -> None:
    client = ChdbClient(demo_filled[2])
    kind = (
        "String" if isinstance(value, str)
        else "Int64" if isinstance(value, int)
        else "Float64" if isinstance(value, float)
        else "Array(String)" if not value or isinstance(value[0], str)
        else "Array(Int64)"
    )  # fmt: skip
    frame = client.frame(f"SELECT {{v:{kind}}} AS v", {"v": value})
    got = frame["v"].iloc[0]
    assert (list(got) if isinstance(value, list) else got) == value
