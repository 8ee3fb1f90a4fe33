"""A bad value costs only itself in the store: one odd number, part or argument never drops its row.

Real guard, real SDK (whose attributes take mappings, tuples, bytes and integers of any size), real
SQLite file. The fuzz test's oracle is the list of spans it made: one row per tool span and per model
span, one digest per distinct argument value, and the run each call extends, from the pool it drew from.
"""

from __future__ import annotations

import logging
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanContext, TraceFlags

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.conventions.usage import MAX_TOKENS
from otel_repeat_guard.core.canonical import arguments_key
from otel_repeat_guard.decide.blind_spots import NO_USAGE_WARNING
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.queries.hotspots import model_tokens

HUGE = "9" * 5_000


def _provider(db: Path) -> tuple[TracerProvider, SQLiteSpanExporter]:
    exporter = SQLiteSpanExporter(db)
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True))  # with an event per requested call
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _tool(provider: TracerProvider, tool: str, arguments: Any, odd: Mapping[str, Any] | None = None) -> None:
    span = provider.get_tracer("odd").start_span(f"execute_tool {tool}")
    span.set_attribute("gen_ai.operation.name", "execute_tool")
    span.set_attribute("gen_ai.tool.name", tool)
    span.set_attribute("gen_ai.tool.call.arguments", arguments)
    span.set_attributes(odd or {})
    span.end()


def _model(provider: TracerProvider, messages: Any, odd: Mapping[str, Any] | None = None) -> None:
    with provider.get_tracer("odd").start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as s:
        s.set_attribute("gen_ai.output.messages", messages)
        s.set_attributes(odd or {})


def _agent(provider: TracerProvider) -> Any:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    return provider.get_tracer("odd").start_as_current_span("invoke_agent a", attributes=attributes)


@contextmanager
def _no_errors_logged() -> Iterator[None]:
    """Fails if the guard or the store logged an error or a warning: each catches what it cannot read,
    so a log line is how a value that cost more than itself shows. The one warning these spans are meant to
    cause (``NO_USAGE_WARNING``) is not counted: a model call that records no usage has its wasted tokens said
    to be unknown."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("otel_repeat_guard")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records if r.msg != NO_USAGE_WARNING] == []


def _calls(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT tool_name, arguments_digest, preview, run_length FROM tool_calls"
            " LEFT JOIN tool_call_arguments ON call_id = tool_calls.id ORDER BY tool_calls.id"
        ).fetchall()


def test_a_number_too_large_to_normalise_keeps_its_row_and_its_run(tmp_path: Path) -> None:
    provider, exporter = _provider(tmp_path / "store.db")
    with _agent(provider):
        for arguments in ('{"n": 1e999999999}', '{"n":10e999999998}', '{"n": 1e999999999}', '{"q": 1}'):
            _tool(provider, "grep", arguments)
        for _ in range(2):
            _tool(provider, "grep", '{"n": 1e9999999999999999999}')
    provider.shutdown()
    rows = _calls(tmp_path / "store.db")
    assert [(r[2], r[3]) for r in rows] == [
        ('{"n":1E+999999999}', 1),
        ('{"n":1E+999999999}', 2),
        ('{"n":1E+999999999}', 3),
        ('{"q":1}', 1),
        ('{"n":1e9999999999999999999}', 1),
        ('{"n":1e9999999999999999999}', 2),
    ]
    assert rows[0][1] == rows[1][1] == rows[2][1] == arguments_key('{"n":1e999999999}').hex()  # type: ignore[union-attr]
    assert exporter.dropped_spans == 0


class _Incomparable:
    """A key whose comparison raises: the worst a hand-built span's arguments can do to canonicalization."""

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")


def test_arguments_whose_own_methods_raise_cost_only_the_arguments_not_the_row(tmp_path: Path) -> None:
    exporter = SQLiteSpanExporter(tmp_path / "store.db")
    context = SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    arguments = {_Incomparable(): 1, _Incomparable(): 2}
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "grep",
        "gen_ai.tool.call.arguments": arguments,
    }
    span = ReadableSpan(name="execute_tool grep", context=context, attributes=attributes, start_time=5, end_time=9)  # type: ignore[arg-type]
    exporter.export([span])
    assert _calls(tmp_path / "store.db") == [("grep", None, None, 1)]  # kept; its arguments unknown
    assert exporter.dropped_spans == 0
    assert arguments_key(arguments) is None  # what the guard sees too: nothing is identical to it


def test_a_model_call_with_odd_parts_keeps_its_row_and_the_calls_beside_them(tmp_path: Path) -> None:
    provider, exporter = _provider(tmp_path / "store.db")
    text = (
        '[{"role": "assistant", "parts": 5}, {"role": "assistant", "parts": [7, null, "x", '
        '{"type": "tool_call", "id": "c1", "name": "grep", "arguments": {"n": ' + HUGE + "}}]}]"
    )
    with _agent(provider):
        _model(provider, text)
    provider.shutdown()
    with sqlite3.connect(tmp_path / "store.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM model_calls").fetchone() == (1,)
        assert conn.execute("SELECT tool_name, arguments_digest FROM tool_calls").fetchall() == [
            ("grep", arguments_key('{"n": ' + HUGE + "}").hex())  # type: ignore[union-attr]
        ]
    assert exporter.dropped_spans == 0


# -- fuzz: odd argument values of every type the SDK takes, and odd model messages -----------------

INCOMPARABLE = {"nested bytes": {"n": (1, b"x")}}  # not JSON-like: never identical, no digest
POOL: list[Any] = [
    '{"q": 1}',
    '{"n": 1e999999999}',
    '{"n": 1e9999999999999999999}',
    '{"n": ' + HUGE + "}",
    '{"n": 1.0000000000000000000000000000001e400}',
    '{"n": 1e400}',
    '{"n": 1e-999999999, "m": NaN}',
    "[" * 3_000 + "]" * 3_000,
    {"n": 10**5_000},
    {"n": float("inf"), "m": (1, "x", None)},
    INCOMPARABLE["nested bytes"],
    ("a", None, 2.5),
    b'{"q": 2}',
    5,
    float("nan"),
]
"""Argument values, no two of which are the same value."""
COMPARABLE = [all(value is not odd for odd in INCOMPARABLE.values()) for value in POOL]
REQUESTS = {  # model messages, and how many well-formed tool calls each holds
    '[{"parts": 5}]': 0,
    '[{"parts": [5, null, {"type": "tool_call", "name": "grep", "arguments": {"n": 1e999999999}}]}]': 1,
    '[{"parts": [{"type": "tool_call", "name": 5}]}, 7, "x"]': 0,
    '[{"parts": [{"type": "tool_call", "name": "grep", "arguments": {"n": ' + HUGE + "}}]}, {}]": 1,
    "[" * 3_000 + "]" * 3_000: 0,
    "not json": 0,
}
MESSAGES = st.sampled_from(sorted(REQUESTS))
ODD = st.sampled_from(
    [10**5_000, -(10**30), 2**63, float("inf"), float("nan"), -1, 2.5, "", "x", b"\xff", (1, "a"), {"k": 10**30}]
)
"""Values of every type the SDK takes, for attributes whose type the store expects (a number, a text)."""
TOOL_KEYS = ("gen_ai.tool.call.id", "gen_ai.tool.call.result", "error.type")
MODEL_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "llm.usage.total_tokens",
    "gen_ai.response.model",
    "gen_ai.provider.name",
    "gen_ai.conversation.id",
    "gen_ai.response.finish_reasons",
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=10),
    st.lists(MESSAGES, max_size=3),
    st.dictionaries(st.sampled_from(TOOL_KEYS), ODD, max_size=2),
    st.dictionaries(st.sampled_from(MODEL_KEYS), ODD, max_size=4),
)
def test_every_span_keeps_its_row_whatever_its_values(
    picks: list[int], messages: list[str], odd_tool: dict[str, Any], odd_model: dict[str, Any]
) -> None:
    with tempfile.TemporaryDirectory() as folder, _no_errors_logged():
        db = Path(folder) / "store.db"
        provider, exporter = _provider(db)
        with _agent(provider):
            for pick in picks:
                _tool(provider, "grep", POOL[pick], odd_tool)
        with _agent(provider):  # a run of its own: its requested calls extend no run above
            for text in messages:
                _model(provider, text, odd_model)
        provider.shutdown()
        everything = _calls(db)
        rows = everything[: len(picks)]  # the first run's, in order; the requested calls' rows come after
        with sqlite3.connect(db) as conn:
            models = conn.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0]
    assert exporter.dropped_spans == 0
    assert len(rows) == len(picks) and models == len(messages)  # one row per span, whatever it carried
    assert len(everything) == len(picks) + sum(REQUESTS[text] for text in messages)  # and per requested call
    digests: dict[int, Any] = {}
    for i, (pick, row) in enumerate(zip(picks, rows, strict=True)):
        assert (row[1] is not None) == COMPARABLE[pick]
        assert digests.setdefault(pick, row[1]) == row[1]  # identical values, one digest
        extends = i > 0 and picks[i - 1] == pick and COMPARABLE[pick]
        assert row[3] == (rows[i - 1][3] + 1 if extends else 1)
    assert len({d for d in digests.values() if d is not None}) == sum(COMPARABLE[p] for p in set(picks))


def test_a_count_no_model_call_could_make_is_unknown_and_every_sum_holds(tmp_path: Path) -> None:
    """2**63 - 1 tokens is a value SQLite holds, but two of them overflow every SUM the dashboard takes: a count
    past MAX_TOKENS is no count a model call makes, so it is unknown (NULL), like a negative one."""
    db = tmp_path / "store.db"
    provider, _ = _provider(db)
    with _agent(provider):
        for tokens in (2**63 - 1, 2**63 - 1, MAX_TOKENS + 1, MAX_TOKENS, 7):
            _model(provider, "[]", {"gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 1})
    provider.shutdown()
    with sqlite3.connect(db) as conn:
        stored = [row[0] for row in conn.execute("SELECT input_tokens FROM model_calls ORDER BY start_ns")]
        figures = model_tokens(conn, Filters())
    assert stored == [None, None, None, MAX_TOKENS, 7]
    assert int(figures["input_tokens"].sum()) == MAX_TOKENS + 7
