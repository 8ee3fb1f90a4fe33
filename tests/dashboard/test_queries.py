"""The query module against a store seeded by the demo scenario, checked against the replay."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from replay import Turn, replay

from otel_repeat_guard.dashboard import costs
from otel_repeat_guard.demo.scenario import AgentScript
from otel_repeat_guard.store import open_for_reading, queries
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.schema import ROLLUP_FROM_CALLS


@pytest.fixture
def conn(seeded_db: Path) -> Iterator[sqlite3.Connection]:
    connection, has_schema = open_for_reading(seeded_db)
    assert has_schema
    yield connection
    connection.close()


def test_headline_matches_the_replayed_scenario(conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]) -> None:
    expected = replay(scripts).headline()
    row = queries.headline(conn, Filters()).iloc[0].to_dict()
    assert {k: row[k] for k in expected} == pytest.approx(expected)
    assert row["reminders"] == expected["gentle_reminders"] + expected["detailed_reminders"]  # type: ignore[operator]


def test_headline_pins_the_scenario_numbers(conn: sqlite3.Connection) -> None:
    # The same numbers, written out, so a change to the scenario is a visible decision.
    row = queries.headline(conn, Filters()).iloc[0]
    assert (row["tool_calls"], row["untracked_calls"], row["repeated_calls"]) == (61, 3, 35)
    assert (row["gentle_reminders"], row["detailed_reminders"]) == (6, 6)
    assert (row["agents_with_loops"], row["longest_run"]) == (6, 12)
    assert row["repeated_seconds"] == pytest.approx(17.845)


@pytest.mark.parametrize(
    ("by", "query", "label"), [("tool", "hotspots_by_tool", "tool"), ("agent", "hotspots_by_agent", "agent")]
)
def test_hotspot_rows_match_the_replay(
    conn: sqlite3.Connection, scripts: tuple[AgentScript, ...], by: str, query: str, label: str
) -> None:
    expected = replay(scripts).grouped(by)
    frame = getattr(queries, query)(conn, Filters())
    got = {row.pop(label): row for row in frame.to_dict("records")}
    assert got.keys() == expected.keys()
    for name, figures in expected.items():
        assert got[name] == pytest.approx(figures), name
    assert list(frame["repeated_calls"]) == sorted(frame["repeated_calls"], reverse=True)


def test_run_length_distribution_is_the_final_run_lengths(
    conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]
) -> None:
    frame = queries.run_lengths(conn, Filters())
    assert dict(zip(frame["run_length"], frame["runs"], strict=True)) == dict(replay(scripts).final_runs)


def test_over_time_counts_repeats_and_reminders_by_tier(conn: sqlite3.Connection) -> None:
    frame = queries.over_time(conn, Filters(), bucket_s=86400)
    totals = frame.groupby("series")["count"].sum().to_dict()
    assert totals == {"repeated calls": 35, "gentle reminders": 6, "detailed reminders": 6}


def test_filters_narrow_every_figure(conn: sqlite3.Connection) -> None:
    by_tool = queries.headline(conn, Filters(tools=("sql_query",))).iloc[0]
    assert (by_tool["tool_calls"], by_tool["repeated_calls"], by_tool["longest_run"]) == (16, 12, 12)
    ops = queries.headline(conn, Filters(services=("ops-bot",))).iloc[0]
    assert (ops["tool_calls"], ops["repeated_calls"], ops["agents_with_loops"]) == (13, 7, 2)
    agent = queries.hotspots_by_tool(conn, Filters(agents=("coder",)))
    assert list(agent["tool"]) == ["run_tests", "grep"]
    gentle_only = queries.headline(conn, Filters(tiers=("gentle",))).iloc[0]
    assert (gentle_only["gentle_reminders"], gentle_only["detailed_reminders"]) == (6, 0)
    assert gentle_only["repeated_calls"] == 35  # the tier filter narrows reminders only
    future = queries.headline(conn, Filters(start_ns=2**62)).iloc[0]
    assert (future["tool_calls"], future["wasted_share"], future["longest_run"]) == (0, 0.0, 0)


def test_drill_down_lists_runs_and_their_ordered_calls(conn: sqlite3.Connection) -> None:
    runs = queries.hotspot_runs(conn, Filters(), "grep")
    assert list(runs["run_length"]) == [4]  # the operator's single grep is a run of one
    run = runs.iloc[0]
    calls = queries.chain(conn, str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    # todo_write is excluded but shown where it happened, between the repeated greps.
    assert list(calls["tool"]) == ["grep", "todo_write", "grep", "todo_write", "grep", "todo_write", "grep"]
    assert list(calls["run_length"].fillna(0).astype(int)) == [1, 0, 2, 0, 3, 0, 4]
    assert list(calls["reminder_tier"].fillna("")) == ["", "", "", "", "gentle", "", ""]
    assert calls["arguments"].iloc[0] == '{"path":"src","pattern":"def parse_config"}'


def test_drill_down_of_a_denied_call_shows_its_status(conn: sqlite3.Connection) -> None:
    run = queries.hotspot_runs(conn, Filters(), "shell").iloc[0]
    calls = queries.chain(conn, str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    assert len(calls) == 6
    assert set(calls["status"]) == {"error / denied"}


def test_drill_down_keeps_runs_split_by_a_new_prompt(conn: sqlite3.Connection) -> None:
    runs = queries.hotspot_runs(conn, Filters(), "web_search")
    assert list(runs["run_length"]) == [2, 2]  # 2 + 2 around the second prompt, never 4


def test_filter_options_and_bounds(conn: sqlite3.Connection) -> None:
    options = queries.filter_options(conn)
    services = list(options.loc[options["kind"] == "service", "value"])
    assert services == ["coding-agent", "ops-bot", "research-assistant"]
    assert "researcher/fact-checker" in set(options.loc[options["kind"] == "agent", "value"])
    bounds = queries.time_bounds(conn).iloc[0]
    assert bounds["rows"] == 1  # there are calls
    assert bounds["first_ns"] <= bounds["last_ns"]


@pytest.mark.parametrize(("span_s", "width"), [(0, 0.1), (12.8, 0.3), (600, 10), (3600, 60), (86400, 1800)])
def test_bucket_width_examples(span_s: float, width: float) -> None:
    assert queries.bucket_seconds(int(span_s * 1_000_000_000)) == width


@pytest.mark.parametrize("span_s", [6, 12.8, 59, 61, 900, 3600, 86400, 3 * 86400, 7 * 86400, 29 * 86400, 60 * 86400])
def test_bucket_width_gives_thirty_to_sixty_points_over_any_range(span_s: float) -> None:
    """The default "Last 24 hours" over a 12.8 s demo used to draw one 1,800 s bucket: now 43 of 0.3 s."""
    span_ns = int(span_s * 1_000_000_000)
    buckets = span_ns / (queries.bucket_seconds(span_ns) * 1_000_000_000)
    assert 30 <= buckets <= 60, buckets


def test_the_demo_store_rollup_equals_its_calls(conn: sqlite3.Connection) -> None:
    # The demo writes through the exporter with real batching, so first calls are resolved late.
    kept = conn.execute("SELECT * FROM call_rollup ORDER BY 1, 2, 3, 4, 5").fetchall()
    assert kept == conn.execute(f"{ROLLUP_FROM_CALLS} ORDER BY 1, 2, 3, 4, 5").fetchall()
    assert not [row for row in kept if str(row[2]).startswith("trace:")]


def test_model_tokens_are_the_scripted_turns(conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]) -> None:
    figures = replay(scripts)
    frame = queries.model_tokens(conn, Filters(), costs.bands())
    assert int(frame["calls"].sum()) == len(figures.turns) == 72
    by_model = frame.groupby("model")[["input_tokens", "output_tokens"]].sum()
    for model in {t.model for t in figures.turns}:
        turns = [t for t in figures.turns if t.model == model]
        assert by_model.loc[model, "input_tokens"] == sum(t.input_tokens for t in turns), model
        assert by_model.loc[model, "output_tokens"] == sum(t.output_tokens for t in turns), model
    assert set(frame["band"]) == {0}  # every demo request is below every price tier
    assert int(frame["unsplit_calls"].sum()) == 0


def test_wasted_tokens_are_those_of_the_model_calls_that_issued_repeats(
    conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]
) -> None:
    figures = replay(scripts)
    frame = queries.wasted_tokens(conn, Filters(), costs.bands())
    wasted = figures.wasted_turns
    assert int(frame["calls"].sum()) == len(wasted) == 35
    assert int(frame["total_tokens"].sum()) == sum(t.input_tokens + t.output_tokens for t in wasted)
    by_tool = frame.groupby("tool")["total_tokens"].sum().to_dict()
    expected: dict[str, int] = {}
    for turn in wasted:
        assert turn.call is not None
        expected[turn.call.tool] = expected.get(turn.call.tool, 0) + turn.input_tokens + turn.output_tokens
    assert by_tool == expected
    only_shell = queries.wasted_tokens(conn, Filters(tools=("shell",)), costs.bands())
    assert list(only_shell["tool"]) == ["shell"] and int(only_shell["calls"].sum()) == 5


def test_cost_is_genai_prices_per_call(conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]) -> None:
    """The cost the page shows equals genai-prices' price of each wasted model call, summed in the test."""
    import genai_prices

    def price_of(turns: list[Turn]) -> Decimal:
        return sum(
            (
                genai_prices.calc_price(
                    genai_prices.Usage(input_tokens=t.input_tokens, output_tokens=t.output_tokens), t.model
                ).total_price
                for t in turns
            ),
            Decimal(0),
        )

    figures = replay(scripts)
    wasted = costs.price(queries.wasted_tokens(conn, Filters(), costs.bands()))
    everything = costs.price(queries.model_tokens(conn, Filters(), costs.bands()))
    assert costs.total(wasted) == (
        sum(t.input_tokens + t.output_tokens for t in figures.wasted_turns),
        price_of(figures.wasted_turns),
        0,
        "",
    )
    assert costs.total(everything)[1] == price_of(figures.turns)
    assert costs.total(wasted)[1] == Decimal("0.34095900")  # pinned: a change of prices or scenario is visible


def test_unknown_models_are_unpriced_never_free() -> None:
    frame = pd.DataFrame(
        {
            "model": ["gpt-4o", "no-such-model-xyz", None, "gpt-4o"],
            "provider": ["openai", None, None, "openai"],
            "band": [0, 0, 0, 200000],
            "calls": [1, 2, 1, 1],
            "input_tokens": [1000, 500, 0, 250_000],
            "output_tokens": [100, 50, 0, 10],
            "total_tokens": [1100, 550, 70, 250_010],
            "unsplit_calls": [0, 0, 1, 0],
        }
    )
    priced = costs.price(frame)
    assert list(priced["unpriced_model"]) == [None, "no-such-model-xyz", "(model not recorded)", None]
    tokens, cost, unpriced, names = costs.total(priced)
    assert (tokens, unpriced, names) == (251_730, 620, "(model not recorded), no-such-model-xyz")
    assert costs.money(cost, unpriced, tokens).endswith(" + unpriced")
    assert costs.money(Decimal(0), 550, 550) == "price unknown"
    assert costs.money(Decimal(0), 0, 0) == "—"


def test_a_price_tier_applies_to_requests_past_its_threshold() -> None:
    """claude-sonnet-4-5 costs more per token past 200,000 input tokens: the band is priced at that tier."""
    import genai_prices

    below = genai_prices.calc_price(genai_prices.Usage(input_tokens=150_000, output_tokens=1000), "claude-sonnet-4-5")
    above = genai_prices.calc_price(genai_prices.Usage(input_tokens=250_000, output_tokens=1000), "claude-sonnet-4-5")
    frame = pd.DataFrame(
        {
            "model": ["claude-sonnet-4-5"] * 2,
            "provider": ["anthropic"] * 2,
            "band": [128000, 200000],
            "calls": [1, 1],
            "input_tokens": [150_000, 250_000],
            "output_tokens": [1000, 1000],
            "total_tokens": [151_000, 251_000],
            "unsplit_calls": [0, 0],
        }
    )
    assert list(costs.price(frame)["cost"]) == [below.total_price, above.total_price]
    assert 200000 in costs.bands() and 128000 in costs.bands()


def test_reminder_outcomes_are_the_replayed_ones(conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]) -> None:
    figures = replay(scripts)
    frame = queries.reminder_outcomes(conn, Filters())
    assert frame.groupby("outcome")["reminders"].sum().to_dict() == dict(figures.outcome_counts())
    assert dict(figures.outcome_counts()) == {"ignored": 9, "broken": 2, "ended": 1}
    by_tool = {
        (tool, outcome): int(n) for (tool, outcome), n in frame.groupby(["tool", "outcome"])["reminders"].sum().items()
    }
    expected: dict[tuple[str, str], int] = {}
    for reminded, outcome in figures.outcomes:
        expected[(reminded.tool, outcome)] = expected.get((reminded.tool, outcome), 0) + 1
    assert by_tool == expected
    assert set(frame["model"]) == {t.model for t in figures.turns}
    gentle = queries.reminder_outcomes(conn, Filters(tiers=("gentle",)))
    assert set(gentle["tier"]) == {"gentle"} and int(gentle["reminders"].sum()) == 6


def test_the_timeline_tells_the_run_in_order(conn: sqlite3.Connection) -> None:
    run = queries.hotspot_runs(conn, Filters(), "run_tests").iloc[0]
    focus = queries.loop_start_ns(conn, str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    timeline = queries.run_timeline(conn, str(run["agent_key"]), focus_ns=focus)
    tools = timeline[timeline["kind"] == "tool"]
    assert list(timeline["kind"][:2]) == ["model", "tool"]  # each call after the model call that asked for it
    assert (timeline["kind"] == "model").sum() == len(tools) + 1  # and the answer at the end
    assert list(tools["position"][3:11]) == [str(i) for i in range(1, 9)]
    notes = list(tools["note"])
    assert notes[5] == "gentle reminder sent (call 3 in a row) → ignored: the same call again"
    assert notes[10] == "detailed reminder sent (call 8 in a row) → broken: the next call was different"
    assert notes[11] == "loop broken after 8 identical calls"
    assert notes[12] == "excluded tool: neither extends nor breaks a run"
    received = timeline[timeline["note"].str.startswith("received the")]
    assert list(received["kind"]) == ["model"] * 4
    assert timeline["tokens"].iloc[0] == "2,400 in / 48 out"
    assert tools["text"].iloc[3] == '{"path":"tests/unit","verbose":true}'


def test_a_subagent_reminder_with_no_next_call_ended_with_its_run(conn: sqlite3.Connection) -> None:
    run = queries.hotspot_runs(conn, Filters(), "read_url").iloc[0]
    timeline = queries.run_timeline(conn, str(run["agent_key"]))
    assert timeline["note"].iloc[-2] == "detailed reminder sent (call 5 in a row) → ended: the run ended first"


def test_conversations_group_the_runs(conn: sqlite3.Connection) -> None:
    listed = queries.conversations(conn, Filters())
    assert set(listed["conversation"]) == {
        "researcher-conversation",
        "coder-session",
        "operator-incident",
        "analyst-conversation",
    }
    research = listed.set_index("conversation").loc["researcher-conversation"]
    assert (research["runs"], research["model_calls"], research["repeated_calls"]) == (3, 18, 6)
    runs = queries.conversation_runs(conn, "researcher-conversation")
    assert list(runs["agent"]) == ["researcher", "researcher/fact-checker", "researcher"]


def test_excluded_tools_are_named(conn: sqlite3.Connection) -> None:
    assert list(queries.excluded_tools(conn, ("todo_write", "grep", "no-such-tool"))["tool"]) == ["todo_write"]


def test_the_over_time_series_count_zero_in_the_buckets_between_that_hold_no_repeats() -> None:
    """The line went straight from one burst of repeats to the next, as if the agents had looped all along."""
    from otel_repeat_guard.store.queries.overview import fill_buckets, long_form

    wide = pd.DataFrame(
        {"bucket_ns": [10, 40], "repeated_calls": [3, 2], "gentle_reminders": [1, 0], "detailed_reminders": [0, 1]}
    )
    filled = fill_buckets(wide, 10)
    assert filled["bucket_ns"].tolist() == [10, 20, 30, 40]
    assert filled["repeated_calls"].tolist() == [3, 0, 0, 2]
    series = long_form(filled)
    assert len(series) == 12 and series.loc[series["series"] == "gentle reminders", "count"].tolist() == [1, 0, 0, 0]


def test_the_over_time_axis_names_the_date_of_every_bucket() -> None:
    from otel_repeat_guard.dashboard import charts

    for bucket_s in (0.1, 5.0, 600.0, 86400.0 * 2):
        x = charts.over_time(bucket_s)["layer"][0]["encoding"]["x"]
        assert "%b %d" in x["axis"]["format"] and x["scale"]["type"] == "utc", bucket_s
