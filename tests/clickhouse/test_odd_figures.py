"""Odd spans read from the exporter's table give the embedded store's figures: a tool span that names no tool, a tool
named only by its span's name, a reminder received by a model call that names no model, and token counts past
``MAX_TOKENS``. Each disagreed before (the reader had rules of its own for them)."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.cli.main import main
from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.conventions.usage import MAX_TOKENS
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.ingest.otlp_json import decode_line
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill
from tests.clickhouse.test_figures import QUESTIONS, _same

T0 = 1_790_000_000_000_000_000
VERCEL = Path(__file__).resolve().parents[1] / "fixtures" / "vercel_ai" / "vercel_ai_spans.jsonl"
MODEL = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"}
ISSUER = {**MODEL, "gen_ai.response.finish_reasons": ("tool_calls",), "gen_ai.usage.output_tokens": 10}


class _Agents:
    """Agent runs through a real guard, to the embedded store and to memory (for the table)."""

    def __init__(self, store: Path) -> None:
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "odd"}))
        self.provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))
        self.provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(store)))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("tests.clickhouse.odd")
        self.clock = itertools.count(T0, 1_000_000)

    def run(self, agent: str, steps: list[tuple[dict[str, Any], str, dict[str, Any]]]) -> None:
        """One run of ``agent``: per step, a model call (its attributes), then a tool span (its name, attributes)."""
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        root = self.tracer.start_span(f"invoke_agent {agent}", attributes=attributes, start_time=next(self.clock))
        context = trace.set_span_in_context(root)
        for model, name, tool in [*steps, (MODEL, "", {})]:  # the last model call answers
            self._span(f"chat {model.get('gen_ai.request.model', '')}".strip(), model, context)
            if name:
                self._span(name, {"gen_ai.operation.name": "execute_tool", **tool}, context)
        root.end(next(self.clock))

    def _span(self, name: str, attributes: dict[str, Any], context: Any) -> None:
        span = self.tracer.start_span(name, context, attributes=attributes, start_time=next(self.clock))
        span.end(next(self.clock))

    def spans(self) -> list[ReadableSpan]:
        self.provider.shutdown()
        return list(self.memory.get_finished_spans())


@pytest.fixture(scope="module")
def odd_pair(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Target]]:
    store = tmp_path_factory.mktemp("odd") / "store.db"
    agents = _Agents(store)
    grep = {"gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": '{"q": "x"}'}
    unnamed = {"gen_ai.tool.name": "", "gen_ai.tool.call.arguments": '{"q": "x"}'}
    agents.run("names-no-tool", [(ISSUER, "execute_tool ", unnamed)] * 3 + [(ISSUER, "execute_tool grep", grep)])
    by_span_name = {"gen_ai.tool.call.arguments": '{"path": "a.py"}'}
    agents.run("named-by-its-span", [(ISSUER, "execute_tool read_file", by_span_name)] * 4)
    nameless = {key: value for key, value in ISSUER.items() if key != "gen_ai.request.model"}
    agents.run(
        "reminded-a-nameless-model",
        [(ISSUER, "execute_tool grep", grep)] * 2 + [(nameless, "execute_tool grep", grep)] * 2,
    )
    huge = [{**ISSUER, "gen_ai.usage.input_tokens": count} for count in (2**62, MAX_TOKENS + 1, MAX_TOKENS, 1000)]
    agents.run("counts-past-any-model", [(model, "execute_tool grep", grep) for model in huge])
    yield store, fill(demo_filled[2].path, agents.spans(), table="odd_traces")


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_odd_spans_give_the_same_figure_from_the_table_as_from_the_store(
    odd_pair: tuple[Path, Target], question: str
) -> None:
    store, target = odd_pair
    ask = QUESTIONS[question]
    _same(ask(SQLiteReader(store), Filters()), ask(ClickHouseReader(target), Filters()))


def test_the_odd_spans_hold_what_each_case_needs(odd_pair: tuple[Path, Target]) -> None:
    """The cases are what they say: the store saw no call of the unnamed tool, read_file by its span's name, a
    reminder received by a model call naming no model, and one count in range out of three past it."""
    reader = SQLiteReader(odd_pair[0])
    tools = reader.hotspots_by_tool(Filters())
    assert sorted(tools["tool"]) == ["grep", "read_file"]
    outcomes = reader.reminder_outcomes(Filters()).set_index("agent")
    assert outcomes.loc["reminded-a-nameless-model", "model"] is None
    assert (outcomes.drop(index="reminded-a-nameless-model")["model"] == "gpt-4o-mini").all()


def test_a_tool_name_of_invalid_utf8_in_the_table_is_read_replaced_filtered_and_ingested(
    odd_pair: tuple[Path, Target], tmp_path: Path
) -> None:
    """The Collector stores the bytes it was given: a tool's name and arguments that are no UTF-8 are read with
    U+FFFD in place of the odd bytes, by the pages (a filter on that name finds its calls) and by ``ingest
    --from`` (which aborted with a UnicodeDecodeError, and the pages showed every tool as bytes)."""
    target = dataclasses.replace(odd_pair[1], table="utf8_traces")
    client = ChdbClient(target)
    client.execute("CREATE TABLE otel.utf8_traces AS otel.odd_traces")
    client.execute("INSERT INTO otel.utf8_traces SELECT * FROM otel.odd_traces")
    client.execute(
        """ALTER TABLE otel.utf8_traces UPDATE SpanAttributes = mapUpdate(SpanAttributes, map(
               'gen_ai.tool.name', concat('re', unhex('C3')), 'gen_ai.tool.call.arguments', unhex('7BFFFE7D')))
           WHERE SpanAttributes['gen_ai.tool.name'] = 'grep' SETTINGS mutations_sync = 2"""
    )
    reader = ClickHouseReader(target)
    assert sorted(reader.hotspots_by_tool(Filters())["tool"]) == ["read_file", "re\ufffd"]
    assert reader.headline(Filters(tools=("re\ufffd",))).iloc[0]["tool_calls"] == 9
    store = tmp_path / "from.db"
    assert main(["ingest", "--from", f"chdb://{target.path}?table=utf8_traces", "--db", str(store), "--quiet"]) == 0
    with sqlite3.connect(store) as conn:
        named = conn.execute("SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1 ORDER BY 1").fetchall()
    assert named == [("read_file", 4), ("re\ufffd", 9)]


def test_a_table_of_vercel_ai_sdk_spans_is_a_blind_spot_with_its_fix_not_an_empty_store(
    demo_filled: tuple[list[ReadableSpan], Path, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    """A JavaScript runtime cannot host the guard: its ``ai.toolCall`` spans are calls no guard saw, listed by tool
    with how to replay them, and its steps are model calls. Before, the reader recognised none of them, and
    ``doctor --store`` said every call was compared (exit 0) over a table of eleven."""
    spans = [span for line in VERCEL.read_bytes().splitlines() if line for span in decode_line(line)]
    target = fill(demo_filled[2].path, spans, table="vercel_traces")
    reader = ClickHouseReader(target)
    blind = reader.unguarded_calls(Filters()).sort_values("tool").to_dict("records")
    assert blind == [
        {"reason": "no_guard", "tool": "flaky_lookup", "calls": 1},
        {"reason": "no_guard", "tool": "get_weather", "calls": 10},
    ]
    assert reader.has_model_calls()
    assert main(["doctor", "--store", f"chdb://{target.path}?table=vercel_traces"]) == 1
    assert "otel-repeat-guard ingest --from URL --replay)" in capsys.readouterr().out


def test_a_table_whose_attributes_are_no_map_is_refused_in_one_line(
    demo_filled: tuple[list[ReadableSpan], Path, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    """The exporter's clickhouse.json feature gate makes the attribute columns JSON: named, not an engine error."""
    client = ChdbClient(demo_filled[2])
    client.execute("CREATE TABLE otel.json_like (Timestamp DateTime64(9), SpanAttributes String) ENGINE = Memory")
    assert main(["doctor", "--store", f"chdb://{demo_filled[2].path}?table=json_like"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(
        "(otel.json_like): SpanAttributes is String; only the exporter's default schema (Map columns) is read, not "
        "the JSON columns of its clickhouse.json feature gate"
    )
