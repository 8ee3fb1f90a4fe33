"""Model calls in the store: read through the conventions in three vocabularies, keyed to their agent run
like first tool calls, kept apart from bad spans, and the schema 3 -> 4 upgrade."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.store import SCHEMA_VERSION, SQLiteSpanExporter, open_for_reading, open_for_writing
from otel_repeat_guard.store.model_calls import read_model_call
from otel_repeat_guard.store.origin import start_demo_store, store_origin
from tests.store.loop_agent import upgraded_from

GENAI = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.usage.input_tokens": 1200,
    "gen_ai.usage.output_tokens": 80,
    "gen_ai.conversation.id": "conv-1",
    "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"<script>x</script>"}]}]',
}
OPENINFERENCE = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "claude-sonnet-4-5",
    "llm.provider": "anthropic",
    "llm.token_count.prompt": 3000,
    "llm.token_count.completion": 250,
    "session.id": "session-9",
    "output.value": "I will read the file.",
}
OPENLLMETRY = {
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.prompt_tokens": 500,
    "gen_ai.usage.completion_tokens": 40,
    "llm.usage.total_tokens": 540,
    "gen_ai.completion.0.content": "done",
}


def test_the_reader_knows_three_vocabularies() -> None:
    genai = read_model_call(GENAI)
    assert (genai.model, genai.provider, genai.input_tokens, genai.output_tokens, genai.total_tokens) == (
        "gpt-4o-2024-08-06",
        "openai",
        1200,
        80,
        1280,
    )
    assert genai.conversation_id == "conv-1"
    oi = read_model_call(OPENINFERENCE)
    assert (oi.model, oi.provider, oi.input_tokens, oi.output_tokens, oi.conversation_id) == (
        "claude-sonnet-4-5",
        "anthropic",
        3000,
        250,
        "session-9",
    )
    ollm = read_model_call(OPENLLMETRY)
    assert (ollm.model, ollm.provider, ollm.input_tokens, ollm.output_tokens, ollm.total_tokens) == (
        "gpt-4o-mini",
        "openai",
        500,
        40,
        540,
    )
    only_total = read_model_call({"llm.usage.total_tokens": 77, "gen_ai.usage.input_tokens": True})
    assert (only_total.input_tokens, only_total.output_tokens, only_total.total_tokens) == (None, None, 77)
    odd = read_model_call({"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": -3})
    assert (odd.input_tokens, odd.output_tokens, odd.total_tokens, odd.model) == (None, None, None, None)


class Agent:
    def __init__(self, db: Path, *, facts: bool = True, **options: Any) -> None:
        """``facts=False``: the guard records none of its facts, so the store reads the spans as an older guard's."""
        self.provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
        self.provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(thresholds=(3,)), record_facts=facts))
        self.exporter = SQLiteSpanExporter(db, **options)
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter, max_export_batch_size=3))
        self.tracer = self.provider.get_tracer("test")

    def run(self, name: str, **attributes: str) -> trace.Span:
        return self.tracer.start_span(
            f"invoke_agent {name}",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **attributes},
        )

    def model(self, run: trace.Span | None, attributes: dict[str, Any], name: str = "chat") -> None:
        context = trace.set_span_in_context(run) if run is not None else None
        self.tracer.start_span(name, context=context, attributes=attributes).end()

    def close(self) -> None:
        self.provider.shutdown()


def _tool(agent: Agent, run: trace.Span, tool: str, arguments: str) -> None:
    span = agent.tracer.start_span(
        f"execute_tool {tool}",
        context=trace.set_span_in_context(run),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": arguments,
        },
    )
    span.end()


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn, _ = open_for_reading(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_model_calls_and_tool_calls_of_one_run_share_its_key(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("coder")
    for attributes in (GENAI, OPENINFERENCE, OPENLLMETRY):
        agent.model(run, attributes)
        _tool(agent, run, "grep", '{"q": 1}')
    agent.model(run, {"gen_ai.operation.name": "chat"})  # a model call that says nothing about itself
    run.end()
    agent.close()
    models = query(
        db,
        "SELECT agent_key, agent_name, agent_pending, model, provider, input_tokens, output_tokens, total_tokens,"
        " conversation_id FROM model_calls ORDER BY id",
    )
    tools = query(db, "SELECT agent_key, agent_name, run_length FROM tool_calls ORDER BY id")
    keys = {row[0] for row in models} | {row[0] for row in tools}
    assert len(keys) == 1 and next(iter(keys)).startswith("coder#")
    assert [row[1:] for row in models] == [
        ("coder", 0, "gpt-4o-2024-08-06", "openai", 1200, 80, 1280, "conv-1"),
        ("coder", 0, "claude-sonnet-4-5", "anthropic", 3000, 250, 3250, "session-9"),
        ("coder", 0, "gpt-4o-mini", "openai", 500, 40, 540, None),
        ("coder", 0, None, None, None, None, None, None),
    ]
    assert [row[2] for row in tools] == [1, 2, 3]
    outputs = query(db, "SELECT preview FROM model_call_outputs ORDER BY call_id")
    assert outputs[0][0] == GENAI["gen_ai.output.messages"]
    assert [row[0] for row in outputs[1:]] == ["I will read the file.", "done"]


def test_a_llama_index_request_builder_span_is_not_a_model_call(tmp_path: Path) -> None:
    """LlamaIndex's instrumentation kinds ``FunctionCallingLLM._prepare_chat_with_tools`` an LLM span; it calls
    no model (the ``astream_chat`` beside it does), so the run has one model call, not two."""
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("weather")
    builder = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "output.value": '{"messages": []}'}
    agent.model(run, builder, name="OpenAI._prepare_chat_with_tools")
    agent.model(run, OPENINFERENCE, name="OpenAI.astream_chat")
    run.end()
    agent.close()
    assert query(db, "SELECT model, input_tokens FROM model_calls") == [("claude-sonnet-4-5", 3000)]


def test_a_run_span_exported_before_its_model_calls(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("early")
    run.end()
    agent.provider.force_flush()
    agent.model(run, GENAI)
    agent.close()
    ((key, name, pending),) = query(db, "SELECT agent_key, agent_name, agent_pending FROM model_calls")
    assert key.startswith("early#") and name == "early" and pending == 0


def test_an_explicit_agent_id_on_the_model_span_is_its_key(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    agent.model(None, {**GENAI, "gen_ai.agent.id": "analyst-7", "gen_ai.agent.name": "analyst"})
    agent.close()
    assert query(db, "SELECT agent_key, agent_name, agent_known FROM model_calls") == [("analyst-7", "analyst", 1)]


def test_no_output_text_without_store_arguments(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db, store_arguments=False)
    agent.model(None, GENAI)
    agent.close()
    assert query(db, "SELECT COUNT(*) FROM model_call_outputs") == [(0,)]
    assert query(db, "SELECT input_tokens FROM model_calls") == [(1200,)]
    for path in tmp_path.iterdir():
        assert b"<script>x</script>" not in path.read_bytes()


def test_odd_model_spans_cost_their_batch_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("a")
    agent.model(run, {**GENAI, "gen_ai.response.model": "gpt\ud800", "gen_ai.usage.input_tokens": 2**70})
    agent.model(run, GENAI)
    _tool(agent, run, "grep", '{"q": 1}')
    run.end()
    agent.close()
    assert query(db, "SELECT model, input_tokens FROM model_calls ORDER BY id") == [
        (
            "gpt\ufffd",
            None,
        ),  # no model call counts 2**70 tokens: unknown (usage.MAX_TOKENS), never a clamped sum-breaker
        ("gpt-4o-2024-08-06", 1200),
    ]
    assert query(db, "SELECT COUNT(*) FROM tool_calls") == [(1,)]
    assert agent.exporter.dropped_spans == 0


def test_a_model_span_that_cannot_be_read_is_dropped_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_repeat_guard.store import exporter as exporter_module

    real = exporter_module.model_call_row

    def exploding(span: Any, *args: Any, **kwargs: Any) -> Any:
        if span.name == "chat boom":
            raise RuntimeError("cannot read this span")
        return real(span, *args, **kwargs)

    monkeypatch.setattr(exporter_module, "model_call_row", exploding)
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("a")
    agent.model(run, GENAI, name="chat boom")
    agent.model(run, GENAI)
    _tool(agent, run, "grep", '{"q": 1}')
    run.end()
    agent.close()
    assert query(db, "SELECT COUNT(*) FROM model_calls") == [(1,)]
    assert query(db, "SELECT COUNT(*) FROM tool_calls") == [(1,)]
    assert agent.exporter.dropped_spans == 1


def test_a_model_call_stored_twice_is_one_row(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("t").start_span("chat", attributes=GENAI).end()
    exporter = SQLiteSpanExporter(tmp_path / "store.db")
    first = exporter.write(memory.get_finished_spans())
    again = exporter.write(memory.get_finished_spans())
    exporter.shutdown()
    assert (first.stored, first.duplicates, again.stored, again.duplicates) == (1, 0, 0, 1)


def test_a_model_span_the_guard_says_wraps_another_is_no_row_and_the_inner_one_is(tmp_path: Path) -> None:
    """The guard's ``repeat_tool_guard.wrapper`` fact (a framework's span around its client's, one request)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("generator", attributes={**OPENINFERENCE, "repeat_tool_guard.wrapper": True}):
        tracer.start_span("ChatCompletion", attributes=OPENINFERENCE).end()
    exporter = SQLiteSpanExporter(tmp_path / "store.db")
    exporter.write(memory.get_finished_spans())
    exporter.shutdown()
    (inner,) = [s for s in memory.get_finished_spans() if s.name == "ChatCompletion"]
    assert query(tmp_path / "store.db", "SELECT span_id FROM model_calls") == [(f"{inner.context.span_id:016x}",)]  # type: ignore[union-attr]


def test_the_agent_filter_never_lists_a_run_key_its_run_named(tmp_path: Path) -> None:
    """A repeat carries the guard's run key before the run span names it: the filter list keeps only the name."""
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("coder")
    for _ in range(4):
        _tool(agent, run, "run_tests", '{"path": "tests"}')
        agent.provider.force_flush()  # each call its own batch: the key is listed before the name arrives
    run.end()
    agent.close()
    assert query(db, "SELECT value FROM dimensions WHERE kind = 'agent'") == [("coder",)]


def test_a_schema_3_store_is_upgraded_to_4(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("old")
    for _ in range(3):
        _tool(agent, run, "grep", '{"q": 1}')
    run.end()
    agent.close()
    upgraded_from(  # as schema 3 left it, with a run key in the filter list
        db,
        3,
        *(f"DROP TABLE {table}" for table in ("model_call_outputs", "model_calls", "model_rollup", "store_info")),
        "DROP INDEX agent_runs_key",
        "DROP INDEX call_rollup_agent",
        "INSERT INTO dimensions VALUES ('agent', 'old#0123456789abcdef')",
    )
    assert query(db, "SELECT value FROM dimensions WHERE kind = 'agent'") == [("old",)]
    assert query(db, "SELECT COUNT(*) FROM model_calls") == [(0,)]
    assert query(db, "SELECT version FROM repeat_guard_schema") == [(SCHEMA_VERSION,)]


def test_a_demo_store_is_emptied_and_another_writers_calls_never_are(tmp_path: Path) -> None:
    from opentelemetry.metrics import NoOpMeterProvider

    from otel_repeat_guard.demo.runner import run_scenario
    from otel_repeat_guard.demo.scenario import scenario
    from otel_repeat_guard.store import StoreError

    db = tmp_path / "repeat-guard.db"

    def demo() -> int:
        start_demo_store(db, append=False)
        return run_scenario(scenario(2), db, meter_provider=NoOpMeterProvider()).model_calls

    demo()
    made = demo()  # a demo store: emptied, then filled again
    assert made > 0 and query(db, "SELECT COUNT(*) FROM model_calls") == [(made,)]

    agent = Agent(db)  # the user's own exporter, on the demo's default path (it happens: both default to it)
    agent.model(None, GENAI)
    agent.close()
    with pytest.raises(StoreError, match="holds calls that the demo did not write; pass --append"):
        start_demo_store(db, append=False)
    assert query(db, "SELECT COUNT(*) FROM model_calls") == [(made + 1,)]

    other = tmp_path / "mine.db"
    agent = Agent(other)
    agent.model(None, GENAI)
    agent.close()
    with pytest.raises(StoreError, match="holds calls that the demo did not write; pass --append"):
        start_demo_store(other, append=False)
    start_demo_store(other, append=True)
    assert query(other, "SELECT COUNT(*) FROM model_calls") == [(1,)]
    conn = open_for_writing(other)
    assert store_origin(conn) is None  # appending never claims another writer's store
    conn.close()


def model_rollups(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    from otel_repeat_guard.store.schema import MODEL_ROLLUP_FROM_CALLS

    kept = query(db, "SELECT * FROM model_rollup ORDER BY 1, 2, 3, 4, 5, 6")
    computed = query(db, f"{MODEL_ROLLUP_FROM_CALLS} ORDER BY 1, 2, 3, 4, 5, 6")
    return kept, computed


def test_the_model_rollup_equals_its_calls_and_marks_the_calls_that_issued_repeats(tmp_path: Path) -> None:
    """Batches of 3: model calls before and after their run span, issuers marked in a later batch than the
    one that rolled them up, an explicit agent id, a call past the roll-up's input size, a nested one. Spans
    without the guard's facts: its model calls record no request, so only the store's own reading marks issuers."""
    db = tmp_path / "store.db"
    agent = Agent(db, facts=False)
    early = agent.run("early")
    early.end()
    agent.provider.force_flush()
    for _ in range(3):
        agent.model(early, GENAI)
        _tool(agent, early, "grep", '{"q": 1}')
    run = agent.run("coder")
    agent.model(run, {**GENAI, "gen_ai.usage.input_tokens": 150_000})  # past SMALL_INPUT_TOKENS
    _tool(agent, run, "read", '{"p": 1}')
    for _ in range(3):
        agent.model(run, OPENLLMETRY)
        agent.provider.force_flush()  # the issuer is stored (and rolled up, or not) before its repeat
        _tool(agent, run, "read", '{"p": 1}')
    nested = agent.tracer.start_span("step", context=trace.set_span_in_context(run))
    agent.model(nested, OPENINFERENCE)  # under a span that is not an agent run: its agent stays pending
    nested.end()
    run.end()
    agent.model(None, {**GENAI, "gen_ai.agent.id": "analyst-7", "gen_ai.agent.name": "analyst"})
    agent.close()
    kept, computed = model_rollups(db)
    assert kept == computed
    assert {row[2] for row in kept} == {"early", "coder", "analyst"}
    wasted = query(db, "SELECT model, wasted_tool FROM model_calls WHERE wasted_tool IS NOT NULL ORDER BY id")
    # (the early run had ended when its tools ran: the guard sees no run there, so no repeats)
    assert wasted == [("gpt-4o-mini", "read"), ("gpt-4o-mini", "read"), ("gpt-4o-mini", "read")]
    assert query(db, "SELECT COUNT(*) FROM model_calls WHERE agent_pending = 1") == [(1,)]


CACHED = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-3-5-haiku-latest",
    "gen_ai.usage.input_tokens": 10_000,
    "gen_ai.usage.output_tokens": 200,
    "gen_ai.usage.cache_read.input_tokens": 6_000,
    "gen_ai.usage.cache_creation.input_tokens": 1_000,
}


def test_cache_reads_and_writes_are_read_in_three_vocabularies() -> None:
    genai = read_model_call(CACHED)
    assert (genai.cache_read_tokens, genai.cache_write_tokens) == (6_000, 1_000)
    oi = read_model_call(
        {
            **OPENINFERENCE,
            "llm.token_count.prompt_details.cache_read": 7,
            "llm.token_count.prompt_details.cache_write": 8,
        }
    )
    assert (oi.cache_read_tokens, oi.cache_write_tokens) == (7, 8)
    ollm = read_model_call({**OPENLLMETRY, "gen_ai.usage.cache_read_input_tokens": 9})
    assert (ollm.cache_read_tokens, ollm.cache_write_tokens) == (9, None)
    assert read_model_call({**GENAI, "gen_ai.usage.cache_read.input_tokens": "9"}).cache_read_tokens is None


def test_cached_input_is_priced_at_the_cache_rates_genai_prices_gives(tmp_path: Path) -> None:
    import genai_prices

    from otel_repeat_guard.dashboard import costs
    from otel_repeat_guard.store import queries
    from otel_repeat_guard.store.queries import Filters

    db = tmp_path / "store.db"
    agent = Agent(db)
    run = agent.run("cached")
    agent.model(run, CACHED)
    agent.model(
        run, {**CACHED, "gen_ai.usage.cache_read.input_tokens": 0, "gen_ai.usage.cache_creation.input_tokens": 0}
    )
    run.end()
    agent.close()
    conn, _ = open_for_reading(db)
    try:
        priced = costs.price(queries.model_tokens(conn, Filters(), costs.bands()))
    finally:
        conn.close()
    expected = sum(
        genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=10_000, output_tokens=200, cache_read_tokens=read, cache_write_tokens=write
            ),
            "claude-3-5-haiku-latest",
            provider_id="anthropic",
        ).total_price
        for read, write in ((6_000, 1_000), (0, 0))
    )
    assert sum(priced["cost"]) == pytest.approx(expected, rel=Decimal("1e-12"))
    uncached = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=10_000, output_tokens=200), "claude-3-5-haiku-latest", provider_id="anthropic"
    ).total_price
    assert expected < 2 * uncached  # the cache rates are not the input rate


def test_a_schema_5_store_is_upgraded_to_6_with_cache_tokens(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    agent.model(agent.run("old"), GENAI)
    agent.close()
    upgraded_from(
        db,
        5,
        *(
            f"ALTER TABLE {table} DROP COLUMN {column}"
            for table in ("model_calls", "model_rollup")
            for column in ("cache_read_tokens", "cache_write_tokens")
        ),
    )
    assert query(db, "SELECT input_tokens, cache_read_tokens, cache_write_tokens FROM model_calls") == [
        (1200, None, None)
    ]
    assert query(db, "SELECT version FROM repeat_guard_schema") == [(SCHEMA_VERSION,)]
    agent = Agent(db)
    agent.model(agent.run("new"), CACHED)
    agent.close()
    assert query(db, "SELECT SUM(cache_read_tokens), SUM(cache_write_tokens) FROM model_calls") == [(6_000, 1_000)]


def test_a_schema_8_store_is_upgraded_to_9_with_reasoning_tokens_in_its_calls_and_rollup(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    agent = Agent(db)
    agent.model(agent.run("old"), GENAI)
    agent.close()
    upgraded_from(db, 8, *(f"ALTER TABLE {t} DROP COLUMN reasoning_tokens" for t in ("model_calls", "model_rollup")))
    assert query(db, "SELECT input_tokens, reasoning_tokens FROM model_calls") == [(1200, None)]
    agent = Agent(db)
    run = agent.run("new")
    agent.model(run, {**GENAI, "gen_ai.usage.reasoning.output_tokens": 64})
    run.end()  # the run's key is final now: its model call is rolled up
    agent.close()
    assert query(db, "SELECT reasoning_tokens FROM model_calls ORDER BY id") == [(None,), (64,)]
    assert query(db, "SELECT SUM(reasoning_tokens) FROM model_rollup") == [(64,)]
    kept, computed = model_rollups(db)
    assert kept == computed


@pytest.mark.parametrize("known_at_start", [True, False], ids=["marked-at-start", "marked-at-end"])
def test_a_frameworks_model_span_around_its_clients_is_one_model_call(tmp_path: Path, known_at_start: bool) -> None:
    """A framework's ``chat`` span around the client's model span (Semantic Kernel's diagnostics) is the same
    model call: the guard marks the outer span a wrapper, and the store keeps the client's span alone, the one
    whose tokens a repeat charges. Two turns: a tool call asked for twice (the second wastes its issuer), then text."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_repeat_guard.core.facts import WRAPPER

    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db)
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    outer_start = {"gen_ai.operation.name": "chat"} if known_at_start else {}
    inner_ids: list[str] = []
    outers: list[Any] = []
    arguments = {"city": "Paris"}
    with tracer.start_as_current_span("invoke_agent coder", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for turn in range(3):
            with tracer.start_as_current_span("chat gpt-4o", attributes=outer_start) as outer:
                usage = {"gen_ai.usage.input_tokens": 100 * (turn + 1), "gen_ai.usage.output_tokens": turn + 1}
                with tracer.start_as_current_span("chat inner", attributes={**GENAI, **usage}) as inner:
                    if turn < 2:
                        calls = [{"type": "tool_call", "id": f"c{turn}", "name": "lookup", "arguments": arguments}]
                        inner.set_attribute(
                            "gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": calls}])
                        )
                    inner_ids.append(format(inner.get_span_context().span_id, "016x"))
                outer.set_attribute("gen_ai.operation.name", "chat")
                outers.append(outer)
            if turn < 2:
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.id": f"c{turn}",
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                }
                tracer.start_span("execute_tool lookup", attributes=tool).end()
    provider.shutdown()

    assert [(o.attributes or {}).get(WRAPPER) for o in outers] == [True, True, True]
    rows = query(db, "SELECT span_id, input_tokens, output_tokens, wasted_tool FROM model_calls ORDER BY start_ns")
    assert rows == [(inner_ids[0], 100, 1, None), (inner_ids[1], 200, 2, "lookup"), (inner_ids[2], 300, 3, None)]


CACHED_2026 = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-3-5-haiku-latest",
    "gen_ai.usage.text.input_tokens": 9_000,
    "gen_ai.usage.image.input_tokens": 1_000,
    "gen_ai.usage.text.output_tokens": 200,
    "gen_ai.usage.text.cache_read.input_tokens": 5_000,
    "gen_ai.usage.image.cache_read.input_tokens": 1_000,
    "gen_ai.usage.cache_write.input_tokens": 1_000,
}


def test_usage_under_the_2026_names_is_priced_at_the_cache_rates_as_the_current_names_are(tmp_path: Path) -> None:
    """Per-modality input, output and cache reads, and ``cache_write`` (``cache_creation`` before): the same
    figures, so the same cache-aware cost, as :data:`CACHED` under the current names."""
    import genai_prices

    from otel_repeat_guard.dashboard import costs
    from otel_repeat_guard.store import queries
    from otel_repeat_guard.store.queries import Filters

    prices = []
    for name, attributes in (("current", CACHED), ("2026", CACHED_2026)):
        db = tmp_path / f"{name}.db"
        agent = Agent(db)
        run = agent.run(name)
        agent.model(run, attributes)
        run.end()
        agent.close()
        conn, _ = open_for_reading(db)
        try:
            priced = costs.price(queries.model_tokens(conn, Filters(), costs.bands()))
        finally:
            conn.close()
        prices.append(sum(priced["cost"]))
    usage = genai_prices.Usage(
        input_tokens=10_000, output_tokens=200, cache_read_tokens=6_000, cache_write_tokens=1_000
    )
    expected = genai_prices.calc_price(usage, "claude-3-5-haiku-latest", provider_id="anthropic").total_price
    assert prices == [pytest.approx(expected, rel=Decimal("1e-12"))] * 2
    plain = genai_prices.Usage(input_tokens=10_000, output_tokens=200)
    assert expected < genai_prices.calc_price(plain, "claude-3-5-haiku-latest", provider_id="anthropic").total_price
