"""Token usage under the 2026 names (per modality), the current names and the older ones: the guard's
wasted-token metric, the store's ``model_calls`` row and the ClickHouse reader's row give the same figures, and a
span carrying a direction's total beside its per-modality counts is counted once (docs/semantics.md, "What a loop
wasted")."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.clickhouse.calls import MODEL_CALLS
from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, roll_up
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.conventions.usage import reasoning_usage
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.model_calls import read_model_call
from tests.clickhouse.filling import fill

T0 = 1_790_000_000_000_000_000
CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o"}
ISSUES = {"gen_ai.response.finish_reasons": ("tool_calls",)}

# Per case: a model call's usage attributes, and (input, output, cache read, cache write, reasoning) as read.
CASES: dict[str, tuple[dict[str, Any], tuple[int, int, int | None, int | None, int | None]]] = {
    "per_modality_2026": (
        {
            "gen_ai.usage.text.input_tokens": 100,
            "gen_ai.usage.image.input_tokens": 258,
            "gen_ai.usage.audio.input_tokens": 20,
            "gen_ai.usage.video.input_tokens": 30,
            "gen_ai.usage.text.output_tokens": 50,
            "gen_ai.usage.audio.output_tokens": 7,
            "gen_ai.usage.text.cache_read.input_tokens": 40,
            "gen_ai.usage.image.cache_read.input_tokens": 60,
            "gen_ai.usage.cache_write.input_tokens": 25,
            "gen_ai.usage.reasoning.output_tokens": 12,
        },
        (408, 57, 100, 25, 12),
    ),
    "current_genai": (
        {
            "gen_ai.usage.input_tokens": 500,
            "gen_ai.usage.output_tokens": 60,
            "gen_ai.usage.cache_read.input_tokens": 200,
            "gen_ai.usage.cache_creation.input_tokens": 30,
        },
        (500, 60, 200, 30, None),
    ),
    "older_openllmetry": (
        {
            "gen_ai.usage.prompt_tokens": 700,
            "gen_ai.usage.completion_tokens": 70,
            "gen_ai.usage.cache_read_input_tokens": 300,
            "gen_ai.usage.cache_creation_input_tokens": 40,
            "gen_ai.usage.reasoning_tokens": 11,
        },
        (700, 70, 300, 40, 11),
    ),
    "older_openinference": (
        {
            "llm.token_count.prompt": 900,
            "llm.token_count.completion": 90,
            "llm.token_count.prompt_details.cache_read": 400,
            "llm.token_count.prompt_details.cache_write": 50,
            "llm.token_count.completion_details.reasoning": 9,
        },
        (900, 90, 400, 50, 9),
    ),
    "total_and_per_modality": (
        {
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.text.input_tokens": 600,
            "gen_ai.usage.image.input_tokens": 400,
            "gen_ai.usage.output_tokens": 100,
            "gen_ai.usage.text.output_tokens": 100,
            "gen_ai.usage.cache_read.input_tokens": 300,
            "gen_ai.usage.text.cache_read.input_tokens": 300,
            "gen_ai.usage.reasoning.output_tokens": 20,
        },
        (1000, 100, 300, None, 20),
    ),
}


MIRRORED: dict[tuple[str, str, str], int] = {}
"""What ``usage_runs`` read of the guard's ``repeat_tool_guard.wasted.inference.*`` counters (:meth:`_Runs.mirrored`)."""


class _Runs:
    """One agent run per case through a real guard (with its metrics) to the embedded store and to memory."""

    def __init__(self, store: Path) -> None:
        self.reader = InMemoryMetricReader()
        guard = RepeatGuardSpanProcessor(meter_provider=MeterProvider(metric_readers=[self.reader]), record_facts=True)
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "usage"}))
        self.provider.add_span_processor(guard)
        self.provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(store)))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("tests.clickhouse.usage")
        self.clock = itertools.count(T0, 1_000_000)

    def run(self, case: str, usage: dict[str, Any]) -> None:
        """Agent ``case``: twice a model call asking for the same call of tool ``case``, then the answer; the
        second call repeats the first, so its model call's tokens are wasted."""
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": case}
        root = self.tracer.start_span(f"invoke_agent {case}", attributes=attributes, start_time=next(self.clock))
        context = trace.set_span_in_context(root)
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": case, "gen_ai.tool.call.arguments": "{}"}
        for _ in range(2):
            self._span("chat gpt-4o", {**CHAT, **ISSUES, **usage}, context)
            self._span(f"execute_tool {case}", tool, context)
        self._span("chat gpt-4o", {**CHAT, **usage}, context)
        root.end(next(self.clock))

    def _span(self, name: str, attributes: dict[str, Any], context: Any) -> None:
        self.tracer.start_span(name, context, attributes=attributes, start_time=next(self.clock)).end(next(self.clock))

    def wasted_tokens(self) -> dict[tuple[str, str, str], int]:
        """The guard's ``repeat_tool_guard.wasted_tokens`` by (tool, ``gen_ai.token.type``, its breakdown: the
        ``gen_ai.token.cache`` or ``gen_ai.token.phase`` value, "" for none)."""
        data = self.reader.get_metrics_data()
        assert data is not None
        found: dict[tuple[str, str, str], int] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "repeat_tool_guard.wasted_tokens":
                        for point in metric.data.data_points:
                            attributes = point.attributes or {}
                            part = attributes.get("gen_ai.token.cache", attributes.get("gen_ai.token.phase", ""))
                            key = (str(attributes["gen_ai.tool.name"]), str(attributes["gen_ai.token.type"]), str(part))
                            found[key] = int(point.value)
        return found

    def mirrored(self) -> dict[tuple[str, str, str], int]:
        """The guard's wasted tokens under the GenAI conventions' counters' names (``repeat_tool_guard.wasted.inference.*``),
        by (tool, the counter's suffix, its breakdown attribute's value)."""
        data = self.reader.get_metrics_data()
        assert data is not None
        found: dict[tuple[str, str, str], int] = {}
        prefix = "repeat_tool_guard.wasted.inference."
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name.startswith(prefix):
                        for point in metric.data.data_points:
                            attributes = dict(point.attributes or {})
                            tool = str(attributes.pop("gen_ai.tool.name"))
                            (value,) = attributes.values()
                            found[tool, metric.name[len(prefix) :], str(value)] = int(point.value)
        return found

    def spans(self) -> list[ReadableSpan]:
        self.provider.shutdown()
        return list(self.memory.get_finished_spans())


@pytest.fixture(scope="module")
def usage_runs(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[tuple[str, str, str], int], Path, Target]]:
    store = tmp_path_factory.mktemp("usage") / "store.db"
    runs = _Runs(store)
    for case, (usage, _) in CASES.items():
        runs.run(case, usage)
    wasted = runs.wasted_tokens()
    MIRRORED.update(runs.mirrored())
    yield wasted, store, fill(demo_filled[2].path, runs.spans(), table="usage_traces")


def _store_rows(store: Path) -> dict[str, set[tuple[Any, ...]]]:
    with sqlite3.connect(store) as conn:
        rows = conn.execute(
            "SELECT agent_name, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens,"
            " reasoning_tokens FROM model_calls"
        ).fetchall()
    found: dict[str, set[tuple[Any, ...]]] = {}
    for name, *figures in rows:
        found.setdefault(name, set()).add(tuple(figures))
    return found


def _table_rows(target: Target) -> dict[str, set[tuple[Any, ...]]]:
    sql = "SELECT agent_name, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens,"
    sql += " reasoning_tokens FROM ("
    sql += MODEL_CALLS.replace("{services}", "") + ")"
    params = {"db": target.database, "tbl": target.table, "scan_lo": 0, "scan_hi": 2**62}
    frame = ChdbClient(target).frame(sql, params)
    found: dict[str, set[tuple[Any, ...]]] = {}
    for row in frame.itertuples(index=False):
        name, *figures = row
        found.setdefault(str(name), set()).add(tuple(None if pd.isna(figure) else int(figure) for figure in figures))
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_spelling_of_usage_gives_the_same_figures_to_the_guard_the_store_and_clickhouse(
    usage_runs: tuple[dict[tuple[str, str, str], int], Path, Target], case: str
) -> None:
    wasted, store, target = usage_runs
    usage, (tokens_in, tokens_out, cache_read, cache_write, reasoning) = CASES[case]
    expected = (tokens_in, tokens_out, cache_read, cache_write, tokens_in + tokens_out, reasoning)
    by_type = {
        kind: sum(n for (tool, t, _), n in wasted.items() if (tool, t) == (case, kind)) for kind in ("input", "output")
    }
    assert (by_type["input"], by_type["output"]) == (tokens_in, tokens_out)  # one issuer, charged once
    parts = {(t, part): n for (tool, t, part), n in wasted.items() if tool == case}
    cached = {"none": tokens_in - (cache_read or 0) - (cache_write or 0), "read": cache_read, "creation": cache_write}
    phases = {"response": tokens_out - (reasoning or 0), "reasoning": reasoning} if reasoning else {"": tokens_out}
    expected_parts = {("input", k): n for k, n in cached.items() if n} | {
        ("output", k): n for k, n in phases.items() if n
    }
    assert parts == expected_parts  # the conventions' gen_ai.token.cache / gen_ai.token.phase breakdown
    assert _store_rows(store)[case] == {expected}
    assert _table_rows(target)[case] == {expected}
    info = read_model_call({**CHAT, **usage})
    assert (info.input_tokens, info.output_tokens, info.cache_read_tokens, info.cache_write_tokens) == expected[:4]
    assert info.reasoning_tokens == reasoning == reasoning_usage(usage)


def test_per_modality_counts_are_not_added_to_the_total_they_are_part_of() -> None:
    both = CASES["total_and_per_modality"][0]
    info = read_model_call(both)
    assert (info.input_tokens, info.output_tokens, info.cache_read_tokens) == (1000, 100, 300)  # not 2000, 200, 600


def test_a_part_that_is_no_count_is_unknown_and_the_known_parts_still_sum() -> None:
    odd = {
        "gen_ai.usage.text.input_tokens": 30,
        "gen_ai.usage.image.input_tokens": "12",
        "gen_ai.usage.audio.input_tokens": -1,
    }
    assert read_model_call(odd).input_tokens == 30
    assert read_model_call({"gen_ai.usage.image.input_tokens": True}).input_tokens is None
    past = {"gen_ai.usage.text.output_tokens": 2**32 - 1, "gen_ai.usage.audio.output_tokens": 1}
    assert read_model_call(past).output_tokens is None  # the sum is past MAX_TOKENS: no count a model makes


def test_reasoning_tokens_show_beside_the_output_in_a_runs_timeline_from_the_store_clickhouse_and_its_rollup(
    usage_runs: tuple[dict[tuple[str, str, str], int], Path, Target],
) -> None:
    """The reasoning part of a model call's output tokens, where its span reports one, in the timeline's tokens;
    a rollup made before the column was read gains it on its next roll (NULL in the rows it held)."""
    _, store, target = usage_runs
    with sqlite3.connect(store) as conn:
        (key,) = conn.execute("SELECT DISTINCT agent_key FROM model_calls WHERE agent_name = 'per_modality_2026'")
        (current,) = conn.execute("SELECT DISTINCT agent_key FROM model_calls WHERE agent_name = 'current_genai'")
    expected = ["408 in / 57 out (12 reasoning)"] * 3
    for reader in (SQLiteReader(store), ClickHouseReader(target)):
        timeline = reader.run_timeline(str(key[0]))
        assert list(timeline[timeline["kind"] == "model"]["tokens"]) == expected
    timeline = SQLiteReader(store).run_timeline(str(current[0]))
    assert list(timeline[timeline["kind"] == "model"]["tokens"]) == ["500 in / 60 out"] * 3  # none reported
    through = replace(target, rollup="usage_rollup")
    client = ChdbClient(through)
    roll_up(client, through, RollPlan(until_ns=4 * 10**18))
    timeline = ClickHouseReader(through).run_timeline(str(key[0]))
    assert list(timeline[timeline["kind"] == "model"]["tokens"]) == expected
    client.execute("ALTER TABLE usage_rollup.usage_traces_models DROP COLUMN reasoning_tokens")  # an older rollup
    roll_up(client, through, RollPlan(until_ns=4 * 10**18))
    timeline = ClickHouseReader(through).run_timeline(str(key[0]))
    assert list(timeline[timeline["kind"] == "model"]["tokens"]) == ["408 in / 57 out"] * 3


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_wasted_tokens_are_mirrored_under_the_genai_token_counters_names_each_summing_to_its_figure(
    usage_runs: tuple[dict[tuple[str, str, str], int], Path, Target], case: str
) -> None:
    """``…wasted.inference.tokens`` by ``gen_ai.token.type``; ``…input_tokens_by_cache`` and ``…output_tokens_by_phase``
    only where the span reports the breakdown (0 included), their parts summing to the direction's count."""
    _, (tokens_in, tokens_out, cache_read, cache_write, reasoning) = CASES[case]
    mirrored = {(counter, value): n for (tool, counter, value), n in MIRRORED.items() if tool == case}
    expected = {("tokens", "input"): tokens_in, ("tokens", "output"): tokens_out}
    if cache_read is not None or cache_write is not None:
        cached = {
            "none": tokens_in - (cache_read or 0) - (cache_write or 0),
            "read": cache_read,
            "creation": cache_write,
        }
        expected |= {("input_tokens_by_cache", k): n for k, n in cached.items() if n}
    if reasoning is not None:
        phases = {"response": tokens_out - reasoning, "reasoning": reasoning}
        expected |= {("output_tokens_by_phase", k): n for k, n in phases.items() if n}
    assert mirrored == expected
