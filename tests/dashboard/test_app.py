"""The Streamlit page under ``AppTest``: exact numbers on the seeded store, and its error states."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from replay import replay
from streamlit.testing.v1 import AppTest

from otel_repeat_guard.demo.scenario import AgentScript
from otel_repeat_guard.store import DB_ENV, SCHEMA_VERSION, open_for_writing

APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"
CHECKOUT_APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def run_app(monkeypatch: pytest.MonkeyPatch, db: Path, script: Path = APP) -> AppTest:
    monkeypatch.setenv(DB_ENV, str(db))
    app = AppTest.from_file(str(script), default_timeout=60)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def test_headline_numbers_are_the_replayed_scenario(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path, scripts: tuple[AgentScript, ...]
) -> None:
    expected = replay(scripts).headline()
    assert metrics(run_app(monkeypatch, seeded_db)) == {
        "Tool calls": f"{expected['tool_calls']}",
        "Repeated calls": f"{expected['repeated_calls']}",
        "Wasted-call share": f"{expected['wasted_share']:.1%}",
        "Time in repeated calls": f"{expected['repeated_seconds']:.1f} s",
        "Gentle reminders": f"{expected['gentle_reminders']}",
        "Detailed reminders": f"{expected['detailed_reminders']}",
        "Agents with loops": f"{expected['agents_with_loops']}",
        "Longest run": f"{expected['longest_run']}",
    }


def test_headline_numbers_pinned(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    shown = metrics(run_app(monkeypatch, seeded_db))
    assert shown["Tool calls"] == "60"
    assert shown["Repeated calls"] == "35"
    assert shown["Wasted-call share"] == "58.3%"
    assert shown["Time in repeated calls"] == "17.8 s"
    assert (shown["Gentle reminders"], shown["Detailed reminders"]) == ("6", "6")
    assert (shown["Agents with loops"], shown["Longest run"]) == ("6", "12")


def test_hotspot_and_agent_tables_are_the_replayed_rows(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path, scripts: tuple[AgentScript, ...]
) -> None:
    app = run_app(monkeypatch, seeded_db)
    figures = replay(scripts)
    for index, (by, label) in enumerate((("tool", "tool"), ("agent", "agent"))):
        table = app.dataframe[index].value
        expected = figures.grouped(by)
        assert list(table[label]) == sorted(expected, key=lambda k: (-expected[k]["repeated_calls"], k))
        for row in table.to_dict("records"):
            want = expected[row[label]]
            assert row["repeated_calls"] == want["repeated_calls"]
            assert row["reminders"] == want["reminders"]
            assert row["longest_run"] == want["longest_run"]
            assert row["wasted_seconds"] == pytest.approx(want["wasted_seconds"])
            assert row["repeated_share"] == pytest.approx(100 * want["repeated_share"])  # type: ignore[operator]
    top = app.dataframe[0].value.iloc[0]
    assert (top["tool"], top["repeated_calls"], top["reminders"], top["longest_run"]) == ("sql_query", 12, 3, 12)


def test_drill_down_shows_the_chain_as_text(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.selectbox(key="drill_tool").set_value("run_tests").run()
    chain = app.dataframe[2].value
    assert list(chain["position"]) == [str(i) for i in range(1, 9)]
    assert list(chain["reminder_tier"]) == ["", "", "gentle", "", "detailed", "", "", "detailed"]
    assert chain["trace"].str.fullmatch(r"http://localhost:16686/trace/[0-9a-f]{32}").all()
    assert app.code[0].value == '{"path":"tests/unit","verbose":true}'


def test_filters_change_the_numbers(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.multiselect(key="services").set_value(["ops-bot"]).run()
    shown = metrics(app)
    assert (shown["Tool calls"], shown["Repeated calls"], shown["Longest run"]) == ("12", "7", "6")
    assert list(app.dataframe[0].value["tool"]) == ["shell", "tail_logs"]
    app.multiselect(key="tiers").set_value(["detailed"]).run()
    assert (metrics(app)["Gentle reminders"], metrics(app)["Detailed reminders"]) == ("0", "1")
    app.selectbox(key="time_range").set_value("Last 15 minutes").run()
    assert metrics(app)["Tool calls"] == "12"  # the demo just ran


def test_trace_link_template_is_configurable(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_TRACE_URL", "https://tempo.example/explore?trace={trace_id}&span={span_id}")
    chain = run_app(monkeypatch, seeded_db).dataframe[2].value
    assert chain["trace"].str.fullmatch(r"https://tempo\.example/explore\?trace=[0-9a-f]{32}&span=[0-9a-f]{16}").all()


def test_checkout_entry_point_draws_the_same_page(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    assert metrics(run_app(monkeypatch, seeded_db, CHECKOUT_APP))["Tool calls"] == "60"


def test_empty_store_explains_how_to_feed_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    open_for_writing(db).close()
    app = run_app(monkeypatch, db)
    assert not app.metric
    assert "has no tool calls yet" in app.info[0].value
    assert "otel-repeat-guard demo" in app.info[0].value
    assert "SQLiteSpanExporter" in app.info[0].value


def test_missing_store_is_a_message_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    app = run_app(monkeypatch, tmp_path / "absent.db")
    assert "no store at" in app.error[0].value
    assert not (tmp_path / "absent.db").exists()  # reading never creates the file


def test_foreign_schema_is_a_message_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    app = run_app(monkeypatch, db)
    assert "database of another program (tables: invoices)" in app.error[0].value


def test_newer_schema_is_a_message_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    open_for_writing(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE repeat_guard_schema SET version = 99")
    app = run_app(monkeypatch, db)
    assert f"schema version 99, newer than the {SCHEMA_VERSION}" in app.error[0].value


def test_calls_the_guard_could_not_compare_are_shown_with_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never a reassuring zero: calls with no arguments or no agent run are counted on the page."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_repeat_guard import RepeatGuardSpanProcessor
    from otel_repeat_guard.store import SQLiteSpanExporter

    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db)
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("autogen-core")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(3):
            tracer.start_span("execute_tool lookup", attributes=tool).end()  # no arguments recorded
    for _ in range(2):
        tracer.start_span("execute_tool lookup", attributes={**tool, "gen_ai.tool.call.arguments": "{}"}).end()
    provider.shutdown()

    app = run_app(monkeypatch, db)
    (warning,) = [w.value for w in app.warning]
    assert warning.startswith("5 tool calls could not be compared")
    frame = next(df.value for df in app.dataframe if "reason" in df.value.columns)
    assert frame[["reason", "tool", "calls"]].values.tolist() == [
        ["no_arguments", "lookup", 3],
        ["no_agent", "lookup", 2],
    ]
    assert frame["why"].tolist()[0].startswith("neither the tool span nor the model's request")
