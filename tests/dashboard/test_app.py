"""The Streamlit page under ``AppTest``: exact numbers on the seeded store, and its error states."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from replay import Turn, replay
from streamlit.testing.v1 import AppTest

from otel_repeat_guard.dashboard import VIEWS
from otel_repeat_guard.dashboard.sections.headline import Figure, read_headline
from otel_repeat_guard.dashboard.sections.overview import OVER_TIME_KEY
from otel_repeat_guard.dashboard.sections.timeline import COLUMNS, TABLE_CLASS
from otel_repeat_guard.decide.blind_spots import explain, fix_for
from otel_repeat_guard.demo.scenario import AgentScript
from otel_repeat_guard.store import DB_ENV, SCHEMA_VERSION, open_for_writing

APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"
CHECKOUT_APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def run_app(monkeypatch: pytest.MonkeyPatch, db: Path, script: Path = APP, page: str | None = None) -> AppTest:
    """The app on ``db``, on its default page (the overview) or on ``page`` (a file of ``views/``)."""
    monkeypatch.setenv(DB_ENV, str(db))
    app = AppTest.from_file(str(script), default_timeout=60)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app if page is None else goto(app, page)


def goto(app: AppTest, page: str) -> AppTest:
    """``app`` on another page (``hotspots``, ``runs``...), the sidebar's choices kept."""
    app.switch_page(str(VIEWS / f"{page}.py")).run()
    assert not app.exception, [e.message for e in app.exception]
    return app


class _Cells(HTMLParser):
    """The header and cells of an HTML table, as text (the unescaped text a browser shows)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def timeline(app: AppTest, nth: int = 0) -> pd.DataFrame:
    """The ``nth`` run timeline table on the page, under the column names of ``queries.run_timeline``."""
    found = []
    for element in app.get("html"):
        if TABLE_CLASS in element.value:
            cells = _Cells()
            cells.feed(element.value)
            found.append(pd.DataFrame(cells.rows[1:], columns=cells.rows[0]))
    assert len(found) > nth, "no run timeline on the page"
    return found[nth].rename(columns={label: name for name, label in COLUMNS.items()})


def figures(app: AppTest) -> list[Figure]:
    """The Overview's headline figures (one HTML element), as the browser shows them."""
    return [figure for element in app.get("html") for figure in read_headline(element.value)]


def metrics(app: AppTest) -> dict[str, str]:
    return {figure.label: figure.value for figure in figures(app)}


def table(app: AppTest, first_column: str, nth: int = 0, having: str | None = None) -> pd.DataFrame:
    """The ``nth`` dataframe on the page whose first column is ``first_column`` (and that has column ``having``)."""
    found = [
        df.value
        for df in app.dataframe
        if list(df.value.columns)[:1] == [first_column] and (having is None or having in df.value.columns)
    ]
    assert len(found) > nth, [list(df.value.columns)[:1] for df in app.dataframe]
    return found[nth]


def chart_specs(app: AppTest) -> dict[str, dict[str, Any]]:
    specs = [json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")]
    return {str(spec.get("title")): spec for spec in specs}


def expected_token_metrics(scripts: tuple[AgentScript, ...]) -> dict[str, str]:
    """The token and cost metrics, computed here from the scripted turns and genai-prices."""
    import genai_prices

    figures = replay(scripts)

    def cost(turns: list[Turn]) -> Decimal:
        usage = genai_prices.Usage
        return sum(
            (
                genai_prices.calc_price(
                    usage(input_tokens=t.input_tokens, output_tokens=t.output_tokens), t.model
                ).total_price
                for t in turns
            ),
            Decimal(0),
        )

    counts = figures.outcome_counts()
    wasted = figures.wasted_turns
    wasted_cost = cost(wasted)
    return {
        "Reminders heeded": f"{counts['broken'] / (counts['broken'] + counts['ignored']):.0%}",
        "Model tokens": f"{sum(t.input_tokens + t.output_tokens for t in figures.turns):,}",
        "Wasted tokens": f"{sum(t.input_tokens + t.output_tokens for t in wasted):,}",
        "Wasted cost": f"${wasted_cost:,.2f}" if wasted_cost >= 1 else f"${wasted_cost:.4f}",
    }


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
        **expected_token_metrics(scripts),
    }


def test_headline_numbers_pinned(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    shown = metrics(run_app(monkeypatch, seeded_db))
    assert shown["Tool calls"] == "61"
    assert shown["Repeated calls"] == "35"
    assert shown["Wasted-call share"] == "57.4%"
    assert shown["Time in repeated calls"] == "17.8 s"
    assert (shown["Gentle reminders"], shown["Detailed reminders"]) == ("6", "6")
    assert (shown["Agents with loops"], shown["Longest run"]) == ("6", "12")
    assert (shown["Reminders heeded"], shown["Model tokens"], shown["Wasted tokens"]) == ("18%", "440,423", "225,723")
    assert shown["Wasted cost"] == "$0.3410"


def test_hotspot_and_agent_tables_are_the_replayed_rows(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path, scripts: tuple[AgentScript, ...]
) -> None:
    app = run_app(monkeypatch, seeded_db, page="hotspots")
    figures = replay(scripts)
    for by, label in (("tool", "tool"), ("agent", "agent")):
        frame = table(app, label)
        expected = figures.grouped(by)
        assert list(frame[label]) == sorted(expected, key=lambda k: (-expected[k]["repeated_calls"], k))
        for row in frame.to_dict("records"):
            want = expected[row[label]]
            assert row["repeated_calls"] == want["repeated_calls"]
            assert row["reminders"] == want["reminders"]
            assert row["longest_run"] == want["longest_run"]
            assert abs(row["wasted_seconds"] - want["wasted_seconds"]) < 0.1  # type: ignore[operator]
            assert row["repeated_share"] == pytest.approx(100 * want["repeated_share"])  # type: ignore[operator]
            issued = [t for t in figures.wasted_turns if t.call is not None and getattr(t.call, by) == row[label]]
            assert row["wasted_tokens"] == sum(t.input_tokens + t.output_tokens for t in issued)
    top = table(app, "tool").iloc[0]
    assert (top["tool"], top["repeated_calls"], top["reminders"], top["longest_run"]) == ("sql_query", 12, 3, 12)
    assert (top["wasted_tokens"], top["wasted_cost"]) == (80_220, "$0.0256")


def test_by_model_shows_tokens_their_waste_and_cost(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path, scripts: tuple[AgentScript, ...]
) -> None:
    figures = replay(scripts)
    frame = table(run_app(monkeypatch, seeded_db, page="hotspots"), "model").set_index("model")
    assert set(frame.index) == {t.model for t in figures.turns}
    for model, row in frame.iterrows():
        turns = [t for t in figures.turns if t.model == model]
        wasted = [t for t in figures.wasted_turns if t.model == model]
        assert row["calls"] == len(turns)
        assert row["total_tokens"] == sum(t.input_tokens + t.output_tokens for t in turns)
        assert row["wasted_tokens"] == sum(t.input_tokens + t.output_tokens for t in wasted)
        assert row["cost_text"].startswith("$")
    assert "unpriced" not in frame.columns  # every model has a price: no column of empty cells


def test_reminder_efficacy_per_tier_tool_agent_and_model(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path, scripts: tuple[AgentScript, ...]
) -> None:
    figures = replay(scripts)
    app = run_app(monkeypatch, seeded_db, page="reminders")
    tiers = table(app, "tier").set_index("tier").drop(index="(all reminders)")
    for tier in ("gentle", "detailed"):
        outcomes = [o for r, o in figures.outcomes if r.tier == tier]
        row = tiers.loc[tier]
        assert (row["broken"], row["ignored"], row["ended"], row["open"]) == tuple(
            outcomes.count(o) for o in ("broken", "ignored", "ended", "open")
        )
    assert tiers.loc["gentle", "heeded"] == pytest.approx(100 / 6)  # the log reader changed course; 5 did not
    assert tiers.loc["detailed", "heeded"] == pytest.approx(100 / 5)  # the coder, after its third reminder
    for by in ("tool", "agent", "model"):
        app.radio(key="efficacy_by").set_value(by).run()
        frame = table(app, by, having="heeded")
        *_, overall = frame.itertuples(index=False)
        assert overall[0] == "(all reminders)" and overall.reminders == len(figures.outcomes) == 12
        assert int(frame["reminders"].iloc[:-1].sum()) == 12
        assert overall.heeded == pytest.approx(100 * overall.broken / (overall.broken + overall.ignored))
    run_tests = table(app, "model", having="heeded").set_index("model").loc["gpt-4o"]
    assert (run_tests["broken"], run_tests["ignored"]) == (1, 3)  # the coder: run_tests 3, 5 and grep 3 ignored


def test_drill_down_shows_the_runs_timeline_as_text(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db, page="runs")
    app.selectbox(key="drill_tool").set_value("run_tests").run()
    calls = timeline(app)
    tools = calls[calls["kind"] == "tool"]
    assert list(tools["position"][3:11]) == [str(i) for i in range(1, 9)]
    assert "trace" not in calls.columns  # no trace UI configured: no dead link
    assert (calls["kind"] == "model").sum() == len(tools) + 1
    assert calls["note"].str.contains("loop broken after 8 identical calls").any()
    assert calls["note"].str.startswith("received the detailed reminder").sum() == 2
    assert app.code[0].value == '{"path":"tests/unit","verbose":true}'


def test_the_run_box_follows_the_hotspot_tool(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    """Regression: the Run box kept the previous tool's run while the table showed the new tool's."""
    app = run_app(monkeypatch, seeded_db, page="runs")
    app.selectbox(key="drill_tool").set_value("web_search").run()
    runs = app.selectbox(key="drill_run:web_search")
    assert len(runs.options) == 2
    runs.set_value(runs.options[1] if isinstance(runs.options[1], int) else runs.value).run()
    app.selectbox(key="drill_tool").set_value("shell").run()
    box = app.selectbox(key="drill_run:shell")
    assert all("run of 6" in label for label in box.options)
    assert "run of 6" in str(box.format_func(box.value) if callable(getattr(box, "format_func", None)) else box.value)
    calls = timeline(app)
    assert "shell" in set(calls["name"]) and "web_search" not in set(calls["name"])


def test_filters_change_the_numbers(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.multiselect(key="services").set_value(["ops-bot"]).run()
    shown = metrics(app)
    assert (shown["Tool calls"], shown["Repeated calls"], shown["Longest run"]) == ("13", "7", "6")
    assert list(table(goto(app, "hotspots"), "tool")["tool"]) == ["shell", "tail_logs"]
    goto(app, "overview").multiselect(key="tiers").set_value(["detailed"]).run()
    assert (metrics(app)["Gentle reminders"], metrics(app)["Detailed reminders"]) == ("filtered", "1")
    app.selectbox(key="time_range").set_value("Last 15 minutes").run()
    assert metrics(app)["Tool calls"] == "13"  # the demo just ran


def test_a_tier_filter_says_filtered_never_zero(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.multiselect(key="tiers").set_value(["gentle"]).run()
    assert (metrics(app)["Gentle reminders"], metrics(app)["Detailed reminders"]) == ("6", "filtered")


def test_the_agent_filter_lists_agents_not_run_keys(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    """Regression: 24 entries for 12 agents, the run keys (coder#32845f6266c53a36) zeroing every figure."""
    app = run_app(monkeypatch, seeded_db)
    options = app.multiselect(key="agents").options
    assert sorted(options) == [
        "analyst",
        "coder",
        "operator",
        "operator/log-reader",
        "researcher",
        "researcher/fact-checker",
    ]
    for agent in options:
        app.multiselect(key="agents").set_value([agent]).run()
        assert int(metrics(app)["Tool calls"]) > 0, agent


def test_filtering_on_an_excluded_tool_says_it_is_excluded(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.multiselect(key="tools").set_value(["todo_write"]).run()
    assert metrics(app)["Tool calls"] == "0"
    assert any("1 tool excluded from tracking" in m.value for m in app.markdown)
    goto(app, "blind_spots")
    assert any("`todo_write`: excluded from tracking" in info.value for info in app.info)


def test_terminal_and_page_agree_on_the_excluded_calls(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    """The demo prints "tool calls 64 (61 tracked, 3 excluded)"; the page says the same, not only in a tooltip."""
    app = run_app(monkeypatch, seeded_db)
    captions = " ".join(c.value for c in app.caption)
    assert "61 tracked tool calls; 3 calls of excluded tools are stored but not counted." in captions
    assert "Time in repeated calls is summed over concurrent agents." in captions
    assert "can exceed the wall-clock time" in str(
        next(f for f in figures(app) if f.label == "Time in repeated calls").help
    )


def test_over_time_draws_thirty_to_sixty_points_and_integer_counts(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    """Regression: "Last 24 hours" over a seconds-long demo drew 1,800 s buckets, one dot per series."""
    app = run_app(monkeypatch, seeded_db)
    app.session_state[OVER_TIME_KEY] = True  # the chart is folded until opened
    app.run()
    specs = chart_specs(app)
    title = next(t for t in specs if t.startswith("Repeats and reminders per "))
    assert title.endswith(" s")  # sub-minute buckets over a seconds-long demo
    spec = specs[title]
    assert float(title.removeprefix("Repeats and reminders per ").removesuffix(" s")) < 1
    layers = spec["layer"]
    assert {layer["mark"]["type"] for layer in layers} == {"line", "point"}
    point = next(layer for layer in layers if layer["mark"]["type"] == "point")
    assert {"shape", "size"} <= set(point["encoding"])  # coinciding series stay distinguishable
    for chart in specs.values():
        encoding = chart.get("encoding") or chart["layer"][0]["encoding"]
        counts = [
            axis for axis in (encoding.get("x"), encoding.get("y")) if axis and axis.get("type") == "quantitative"
        ]
        for axis in counts:
            assert axis.get("axis", {}).get("tickMinStep") == 1 or axis.get("stack") == "normalize"


def test_a_custom_time_range(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db)
    app.selectbox(key="time_range").set_value("Custom range").run()
    assert metrics(app)["Tool calls"] == "61"  # it defaults to the store's first and last call
    app.date_input(key="custom_to_day").set_value(dt.date(2000, 1, 1)).run()
    app.date_input(key="custom_from_day").set_value(dt.date(1999, 1, 1)).run()
    assert metrics(app)["Tool calls"] == "0"


def test_conversations_group_the_runs_and_open_a_timeline(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    app = run_app(monkeypatch, seeded_db, page="conversations")
    conversations = table(app, "conversation").set_index("conversation")
    assert conversations.loc["researcher-conversation", "runs"] == 3
    app.selectbox(key="conversation").set_value("researcher-conversation").run()
    box = app.selectbox(key="conversation_run:researcher-conversation")
    assert len(box.options) == 3
    assert set(timeline(app)["name"]) >= {"claude-sonnet-4-5", "web_search"}


def test_trace_link_template_is_configurable(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_TRACE_URL", "https://tempo.example/explore?trace={trace_id}&span={span_id}")
    calls = timeline(run_app(monkeypatch, seeded_db, page="runs"))
    assert calls["trace"].str.fullmatch(r"https://tempo\.example/explore\?trace=[0-9a-f]{32}&span=[0-9a-f]{16}").all()


def test_checkout_entry_point_draws_the_same_page(monkeypatch: pytest.MonkeyPatch, seeded_db: Path) -> None:
    assert metrics(run_app(monkeypatch, seeded_db, CHECKOUT_APP))["Tool calls"] == "61"


def test_empty_store_explains_how_to_feed_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    open_for_writing(db).close()
    app = run_app(monkeypatch, db)
    assert not metrics(app)
    assert "has no tool calls yet" in app.info[0].value
    assert "otel-repeat-guard demo" in app.info[0].value
    assert "otel-repeat-guard ingest" in app.info[0].value
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

    app = run_app(monkeypatch, db, page="blind_spots")
    (warning,) = [w.value for w in app.warning]
    assert warning.startswith("5 tool calls could not be compared") and "doctor" not in warning
    said = [m.value.replace("\\", "") for m in app.markdown]  # the page escapes Markdown: read as typed
    assert said == [
        "**No arguments recorded** · 3 calls: neither the tool span nor the model's request recorded the call's"
        " arguments.",
        f"**Fix:** {fix_for('no_arguments', None)}.",
        "**No agent run** · 2 calls: the tool span has no parent span in this process and no gen_ai.agent.id, so no"
        " agent run.",
        f"**Fix:** {fix_for('no_agent', None)}.",
    ]
    assert not any("no_arguments" in text or "no_agent" in text for text in said)
    tables = [df.value[["tool", "calls"]].values.tolist() for df in app.dataframe]
    assert tables == [[["lookup", 3]], [["lookup", 2]]]


def test_calls_with_no_result_under_progress_results_are_shown_with_the_setting_that_records_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
    from otel_repeat_guard.store import SQLiteSpanExporter

    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db)
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(progress="results")))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll", "gen_ai.tool.call.arguments": "{}"}
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(3):
            tracer.start_span("execute_tool poll", attributes=tool).end()  # no result recorded
        tracer.start_span("execute_tool poll", attributes={**tool, "gen_ai.tool.call.result": "done"}).end()
    provider.shutdown()

    app = run_app(monkeypatch, db, page="blind_spots")
    assert [w.value for w in app.warning] == [
        "3 tool calls recorded no result, so progress: results compared them by tool and arguments alone: a poll"
        " that moved counts as a repeat."
    ]
    said = [m.value.replace("\\", "") for m in app.markdown]
    assert said == [
        f"**No result recorded** · 3 calls: {explain('no_result')}.",
        f"**Fix:** {fix_for('no_result', None)}.",
    ]
    assert [df.value[["tool", "calls"]].values.tolist() for df in app.dataframe] == [[["poll", 3]]]


def test_an_empty_time_range_names_the_first_and_last_call_and_leads_to_all_time(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    """Zeros on every page and no word of where the calls were (last week's collector file, "Last 24 hours")."""
    with sqlite3.connect(seeded_db) as conn:
        first, last = conn.execute("SELECT MIN(end_ns), MAX(end_ns) FROM tool_calls").fetchone()
    app = run_app(monkeypatch, seeded_db)
    assert not [w for w in app.warning if "No calls in the time range" in w.value]
    app.selectbox(key="time_range").set_value("Custom range").run()
    app.date_input(key="custom_to_day").set_value(dt.date(2000, 1, 1)).run()
    app.date_input(key="custom_from_day").set_value(dt.date(1999, 1, 1)).run()
    (said,) = [w.value for w in app.warning if "No calls in the time range" in w.value]
    at = dt.datetime.fromtimestamp(first / 1e9, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    until = dt.datetime.fromtimestamp(last / 1e9, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    assert said == f"No calls in the time range (Custom range). The store's calls run from {at} UTC to {until} UTC."
    app.button(key="show_all_time").click().run()
    assert app.selectbox(key="time_range").value == "All time"
    assert metrics(app)["Tool calls"] == "61"
    assert not [w for w in app.warning if "No calls in the time range" in w.value]
