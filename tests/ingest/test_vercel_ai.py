"""The Vercel AI SDK's own spans (``ai`` on npm), captured from the real SDK: ``ingest``, ``--replay`` and ``doctor``.

The fixture is what ``tests/fixtures/vercel_ai/capture.mjs`` wrote (see the README there): one
``generateText`` run and one ``streamText`` run of a weather agent, against a fake OpenAI server on
127.0.0.1 that scripts the tool calls and reports a distinct usage per step, exported by the real
``@opentelemetry/exporter-trace-otlp-http`` as one OTLP JSON request per line.

- ``generateText`` ("Paris"): ``get_weather`` five times, once more with its keys in another order,
  then ``flaky_lookup``, which throws; then the answer. Step k (from 0) reports 100 + 25k input and
  10 + k output tokens.
- ``streamText`` ("Rome"): ``get_weather`` twice in its first step, then once in each of two more
  steps; then the answer. Step k reports 1100 + 25k input and 10 + k output tokens. Each streamed
  step runs its tools while it is still open.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.cli.doctor import read_files
from otel_repeat_guard.cli.main import main
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, VercelAIConvention, find_agent_run, find_tool_call
from otel_repeat_guard.conventions.usage import cache_usage, reasoning_usage, token_usage
from otel_repeat_guard.core.canonical import canonical_arguments
from otel_repeat_guard.ingest import Ingest, IngestOptions
from otel_repeat_guard.spans.playback import play
from otel_repeat_guard.store import open_for_reading, queries
from tests.integrations.scenario import metric_points

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vercel_ai" / "vercel_ai_spans.jsonl"
LOCK = FIXTURE.with_name("package-lock.json")
PARIS = ["get_weather"] * 6 + ["flaky_lookup"]
ROME = ["get_weather"] * 4
PARIS_ARGS = {"city": "Paris", "unit": "C"}


def usage(run: str, step: int) -> tuple[int, int]:
    """The (input, output) tokens the fake server reported for step ``step`` (from 0) of a run."""
    return (1000 if run == "rome" else 0) + 100 + 25 * step, 10 + step


# Paris: calls 2..6 repeat, each asked by its own step (1..5); Rome: call 2 repeats call 1 in step 0,
# calls 3 and 4 are steps 1 and 2. Each step's tokens count once.
WASTED_STEPS = [("paris", k) for k in range(1, 6)] + [("rome", k) for k in range(3)]
WASTED = tuple(sum(usage(run, k)[i] for run, k in WASTED_STEPS) for i in (0, 1))


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    read = read_files([FIXTURE])
    assert read.problems == [] and read.requests > 0
    return read.spans


def ingested(path: Path, db: Path, *, replay: bool) -> Ingest:
    errors = io.StringIO()
    job = Ingest(path, db, IngestOptions(replay=replay), errors=errors)
    job.run()
    assert errors.getvalue() == ""
    return job


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_the_fixture_is_the_real_sdks_spans_with_streamed_tools_ending_inside_their_step(
    spans: list[ReadableSpan],
) -> None:
    version = json.loads(LOCK.read_text())["packages"]["node_modules/ai"]["version"]
    agents = {s.attributes.get("ai.request.headers.user-agent") for s in spans if s.attributes}
    assert f"ai/{version}" in agents and version.startswith("6.")
    assert {s.instrumentation_scope.name for s in spans if s.instrumentation_scope} == {"ai"}
    names = sorted(s.name for s in spans)
    assert names.count("ai.toolCall") == 11 and names.count("ai.generateText.doGenerate") == 8
    assert names.count("ai.streamText.doStream") == 4 and names.count("ai.generateText") == 1
    streamed = [(s.start_time or 0, s.end_time or 0) for s in spans if s.name == "ai.streamText.doStream"]
    rome_tools = [
        (s.start_time or 0, s.end_time or 0)
        for s in spans
        if s.name == "ai.toolCall" and "rome" in str((s.attributes or {}).get("ai.toolCall.id"))
    ]
    inside = [t for t in rome_tools if any(start <= t[0] and t[1] < end for start, end in streamed)]
    assert len(rome_tools) == len(inside) == 4  # every streamed tool span ends before the step that asked for it


def test_each_tool_span_reads_as_a_call_and_each_step_says_what_it_asked_for(spans: list[ReadableSpan]) -> None:
    calls = {}
    for span in spans:
        call = find_tool_call(DEFAULT_CONVENTIONS, span.name, span.attributes or {}, span.events)
        if call is not None:
            calls[call.call_id] = (call.tool_name, canonical_arguments(call.arguments))
    assert len(calls) == 11
    assert calls["call_paris_6a"] == calls["call_paris_1a"] == ("get_weather", canonical_arguments(PARIS_ARGS))
    requested = {}
    for span in spans:
        if span.name.endswith((".doGenerate", ".doStream")):
            for asked in VercelAIConvention().requested_calls(span.name, span.attributes or {}, span.events):
                requested[asked.call_id] = (asked.tool_name, canonical_arguments(asked.arguments))
    assert requested == calls  # text from doGenerate, an object from doStream: the same calls
    runs = [find_agent_run(DEFAULT_CONVENTIONS, s.name, s.attributes or {}) for s in spans]
    assert {(r.agent_id, r.agent_name) for r in runs if r is not None} == {(None, "weather-agent")}


def test_a_steps_usage_is_read_from_its_ai_usage_keys_in_each_sdk_version(spans: list[ReadableSpan]) -> None:
    first = next(s for s in spans if s.name == "ai.streamText.doStream")
    own = {k: v for k, v in (first.attributes or {}).items() if not k.startswith("gen_ai.")}
    assert token_usage(own) == usage("rome", 0) and cache_usage(own) == (0, None)  # AI SDK 6, without gen_ai.*
    assert token_usage({"ai.usage.promptTokens": 7, "ai.usage.completionTokens": 3}) == (7, 3)  # AI SDK 4
    assert reasoning_usage(own) == 0  # AI SDK 6 reports none (0, known), under outputTokenDetails and its own key
    assert reasoning_usage({"ai.usage.reasoningTokens": 5}) == 5  # AI SDK 5


def test_doctor_counts_every_ai_sdk_tool_call_as_recognised_and_comparable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json", str(FIXTURE)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["tool_calls"] == 11 and report["blind_spots"] == []
    tools = {(t["scope"], t["tool"]): (t["calls"], t["arguments_from"], t["runs_from"]) for t in report["tools"]}
    assert tools == {
        ("ai", "get_weather"): (10, {"tool_span": 10}, {"agent_span": 10}),
        ("ai", "flaky_lookup"): (1, {"tool_span": 1}, {"agent_span": 1}),
    }
    assert main(["doctor", str(FIXTURE)]) == 0
    assert "every recognised tool call can be compared" in capsys.readouterr().out


def test_replay_counts_each_runs_repeats_and_charges_each_issuing_step_once(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    assert main(["ingest", "--quiet", "--replay", str(FIXTURE), "--db", str(db)]) == 0
    calls = rows(db, "SELECT agent_key, tool_name, run_length, error, reminder_tier FROM tool_calls ORDER BY end_ns")
    keys = list(dict.fromkeys(key for key, *_ in calls))
    assert len(keys) == 2 and all(key.startswith("weather-agent#") for key in keys)  # one chain per run
    assert [(tool, length, error) for key, tool, length, error, _ in calls if key == keys[0]] == [
        *(("get_weather", n, 0) for n in range(1, 7)),
        ("flaky_lookup", 1, 1),
    ]
    assert [(tool, length) for key, tool, length, *_ in calls if key == keys[1]] == [
        ("get_weather", n) for n in range(1, 5)
    ]
    assert {tier for *_, tier in calls} == {None}  # replay delivers no reminder
    steps = rows(db, "SELECT agent_key, input_tokens, output_tokens, wasted_tool FROM model_calls ORDER BY start_ns")
    assert [(key, tokens_in, tokens_out) for key, tokens_in, tokens_out, _ in steps] == [
        *((keys[0], *usage("paris", k)) for k in range(8)),
        *((keys[1], *usage("rome", k)) for k in range(4)),
    ]
    wasted = [(tokens_in, tokens_out) for _, tokens_in, tokens_out, tool in steps if tool == "get_weather"]
    assert wasted == [usage(run, k) for run, k in WASTED_STEPS]
    assert {tool for *_, tool in steps} == {"get_weather", None}


def test_the_dashboard_shows_the_runs_loops_and_wasted_tokens(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    job = ingested(FIXTURE, db, replay=True)
    assert job.stats.replayed_traces == 2 and job.stats.new_spans == 25
    conn, _ = open_for_reading(db)
    try:
        every = queries.Filters()
        head = queries.headline(conn, every).iloc[0]
        wasted = queries.wasted_tokens(conn, every)
        longest = queries.hotspot_runs(conn, every, "get_weather", limit=1)
        timeline = queries.run_timeline(conn, str(longest["agent_key"].iloc[0]))
        outcomes = queries.reminder_outcomes(conn, every)
    finally:
        conn.close()
    figures = {
        "tool-call rows": int(head["tool_calls"] + head["untracked_calls"]),
        "longest run": int(head["longest_run"]),
        "wasted tokens": (int(wasted["input_tokens"].sum()), int(wasted["output_tokens"].sum())),
        "timeline": timeline["kind"].value_counts().to_dict(),
        "reminders": int(outcomes["reminders"].sum()) if len(outcomes) else 0,
    }
    assert figures == {
        "tool-call rows": 11,
        "longest run": 6,
        "wasted tokens": WASTED,
        "timeline": {"model": 8, "tool": 7},
        "reminders": 0,
    }
    assert WASTED == (875 + 3375, 65 + 33)


def test_plain_ingest_stores_the_calls_steps_and_runs_without_loops(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    ingested(FIXTURE, db, replay=False)
    assert rows(db, "SELECT count(*), max(coalesce(run_length, 1)) FROM tool_calls") == [(11, 1)]
    assert rows(db, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM model_calls") == [
        (12, sum(usage("paris", k)[0] for k in range(8)) + sum(usage("rome", k)[0] for k in range(4)), 108 + 46)
    ]
    assert rows(db, "SELECT agent_name, count(*) FROM agent_runs GROUP BY agent_name") == [("weather-agent", 2)]
    # AI SDK 6 reports its reasoning tokens (none: 0, known) on each step: the store keeps 0, not NULL
    assert rows(db, "SELECT count(reasoning_tokens), sum(reasoning_tokens) FROM model_calls") == [(12, 0)]


def _stamp(span: dict[str, Any], key: str) -> int:
    return int(span[key + "TimeUnixNano"])


@pytest.mark.parametrize("shape", ["tool_ends_inside_its_step", "next_step_starts_before_the_tool_ends"])
def test_a_tool_span_stamped_across_a_steps_edge_is_still_that_steps_call(tmp_path: Path, shape: str) -> None:
    """The JS SDK stamps a span's start to the millisecond and its end as start plus duration, so a tool span
    that ran right after its step can seem to end inside it, and the next step, stamped with the millisecond
    the tool started, can seem to start before the tool ends. Either way it is its step's call."""
    document = json.loads(FIXTURE.read_text().splitlines()[0])
    every = [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    tool = next(
        s for s in every if {"key": "ai.toolCall.id", "value": {"stringValue": "call_paris_4a"}} in s["attributes"]
    )
    steps = sorted((s for s in every if s["name"] == "ai.generateText.doGenerate"), key=lambda s: _stamp(s, "start"))
    issuer = [s for s in steps if _stamp(s, "start") < _stamp(tool, "start")][-1]
    following = next(s for s in steps if _stamp(s, "start") > _stamp(issuer, "start"))
    if shape == "tool_ends_inside_its_step":
        shift = _stamp(tool, "end") - _stamp(issuer, "end") + 200_000  # it ends 0.2 ms before its step
        for key in ("start", "end"):
            tool[key + "TimeUnixNano"] = str(_stamp(tool, key) - shift)
        assert _stamp(issuer, "start") < _stamp(tool, "start") < _stamp(tool, "end") < _stamp(issuer, "end")
    else:
        following["startTimeUnixNano"] = tool["startTimeUnixNano"]
        assert _stamp(issuer, "end") < _stamp(following, "start") == _stamp(tool, "start") < _stamp(tool, "end")
    path = tmp_path / "jittered.jsonl"
    path.write_text(json.dumps(document) + "\n")
    db = tmp_path / "store.db"
    assert main(["doctor", str(path)]) == 0
    ingested(path, db, replay=True)
    wasted = rows(
        db, "SELECT input_tokens, output_tokens FROM model_calls WHERE wasted_tool IS NOT NULL ORDER BY start_ns"
    )
    assert wasted == [usage(run, k) for run, k in WASTED_STEPS]
    lengths = rows(db, "SELECT tool_name, run_length FROM tool_calls ORDER BY end_ns")
    assert [n for tool_name, n in lengths if tool_name == "get_weather"] == [1, 2, 3, 4, 5, 6, 1, 2, 3, 4]
    assert len(lengths) == 11  # no call counted twice, from its step's request and from its tool span


def test_without_recorded_outputs_doctor_names_the_ai_sdks_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``recordOutputs: false`` leaves out every attribute the SDK records as an output: the tool calls'
    arguments and results and what each step asked for. The calls are still counted, as ``no_arguments``."""
    document = json.loads(FIXTURE.read_text().splitlines()[0])
    outputs = {"ai.toolCall.args", "ai.toolCall.result", "ai.response.toolCalls", "ai.response.text"}
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [a for a in span["attributes"] if a["key"] not in outputs]
    path = tmp_path / "no-outputs.jsonl"
    path.write_text(json.dumps(document) + "\n")
    assert main(["doctor", "--json", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    spots = {(b["scope"], b["tool"], b["reason"], b["calls"]) for b in report["blind_spots"]}
    assert spots == {("ai", "get_weather", "no_arguments", 10), ("ai", "flaky_lookup", "no_arguments", 1)}
    assert {b["fix"] for b in report["blind_spots"]} == {
        "leave the Vercel AI SDK's outputs recorded: experimental_telemetry.recordOutputs not false"
        " (it records ai.toolCall.args as an output)"
    }


def test_a_guard_seeing_these_spans_live_reminds_at_3_and_5_and_meters_the_same_wasted_tokens(
    spans: list[ReadableSpan],
) -> None:
    """The spans played through a guard with a real meter, as a Python process hosting the SDK's spans would
    see them: the metric charges each streamed step when it ends, with the usage it reports then."""
    reminders: list[Reminder] = []
    reader = InMemoryMetricReader()
    guard = RepeatGuardSpanProcessor(
        on_reminder=reminders.append,
        meter_provider=MeterProvider(metric_readers=[reader]),
        downstream=[SimpleSpanProcessor(InMemorySpanExporter())],  # wrapping mode: recorded spans are read-only
    )
    play(guard, spans)
    assert [(r.agent_name, r.tool_name, r.run_length, r.tier) for r in reminders] == [
        ("weather-agent", "get_weather", 3, "gentle"),
        ("weather-agent", "get_weather", 5, "detailed"),
        ("weather-agent", "get_weather", 3, "gentle"),
    ]
    metered: dict[str, int] = {}
    for point in metric_points(reader, "repeat_tool_guard.wasted_tokens"):
        kind = str((point.attributes or {})["gen_ai.token.type"])
        metered[kind] = metered.get(kind, 0) + int(point.value)
    assert (metered["input"], metered["output"]) == WASTED
