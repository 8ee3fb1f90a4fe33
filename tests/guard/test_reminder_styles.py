"""Wording as a choice (issue 39 item 3) and experiments between wordings (item 4): ``reminder_style`` and
``reminder_variants``, through a real guard on a real TracerProvider."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor, register_reminder_style
from otel_repeat_guard.core import reminders as texts
from otel_repeat_guard.core.facts import VARIANT
from otel_repeat_guard.core.reminders import (
    known_styles,
    redirect_cycle_text,
    redirect_no_progress_text,
    redirect_text,
    reminder_text,
    stop_text,
    variant_for,
)

ARGS = '{"path": "secret-token-1234.txt"}'


class Agent:
    """A TracerProvider with the guard; each run calls one tool with the same arguments ``times`` times."""

    def __init__(self, config: GuardConfig, redact: Callable[[str], str] | None = None) -> None:
        self.reminders: list[Reminder] = []
        self.memory = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        self.provider = TracerProvider()
        guard = RepeatGuardSpanProcessor(
            config,
            self.reminders.append,
            meter_provider=MeterProvider(metric_readers=[self.metrics]),
            redact=redact,
            record_facts=True,
        )
        self.provider.add_span_processor(guard)
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("styles")

    def run(self, name: str, times: int, tool: str = "read_file", arguments: str = ARGS) -> list[Reminder]:
        before = len(self.reminders)
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes):
            for _ in range(times):
                call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
                with self.tracer.start_as_current_span(f"execute_tool {tool}", attributes=call) as span:
                    span.set_attribute("gen_ai.tool.call.arguments", arguments)
        return self.reminders[before:]

    def spans(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())


def test_the_seed_style_is_the_default_and_words_as_before() -> None:
    assert GuardConfig().reminder_style == "seed" and GuardConfig().reminder_variants == ()
    got = Agent(GuardConfig()).run("a", 5)
    assert [r.text for r in got] == [
        reminder_text("gentle", "read_file", 3, ""),
        reminder_text("detailed", "read_file", 5, ARGS.replace(" ", "")),
    ]
    assert all(r.variant is None for r in got)


def test_the_seed_style_puts_no_variant_on_the_events_facts_or_metrics() -> None:
    agent = Agent(GuardConfig(reminder_style="seed"))
    agent.run("a", 3)
    assert not any(VARIANT in (s.attributes or {}) for s in agent.spans())
    assert not any(VARIANT in (e.attributes or {}) for s in agent.spans() for e in s.events)
    assert VARIANT not in str(agent.metrics.get_metrics_data())


def test_redirect_quotes_no_argument_names_the_tool_and_run_length_and_says_what_to_do_next() -> None:
    got = Agent(GuardConfig(reminder_style="redirect", stop_at=9)).run("a", 9)
    assert [r.tier for r in got] == ["gentle", "detailed", "detailed", "stop"]
    for reminder in got[:3]:
        assert "secret-token" not in reminder.text and "{" not in reminder.text
        assert f"`read_file` has now run {reminder.run_length} times in a row" in reminder.text
        assert "result you already have" in reminder.text
        assert "different approach" in reminder.text and "conclude" in reminder.text
    assert got[0].text == redirect_text("gentle", "read_file", 3)
    assert got[1].text == redirect_text("detailed", "read_file", 5)
    assert got[3].text == stop_text("read_file", 9)  # the stop tier keeps its firm text
    assert got[1].arguments_preview == ARGS.replace(" ", "")  # the preview is still kept for the harness


def test_redirect_words_cycles_and_no_progress_without_quoting() -> None:
    config = GuardConfig(reminder_style="redirect", cycle_thresholds=(2,), no_progress_thresholds=(3,))
    agent = Agent(config)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "c"}
    with agent.tracer.start_as_current_span("invoke_agent c", attributes=attributes):
        for tool in ("open", "close") * 2:
            call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            with agent.tracer.start_as_current_span(f"execute_tool {tool}", attributes=call) as span:
                span.set_attribute("gen_ai.tool.call.arguments", '{"door": 1}')
        for pattern in ("a", "b", "c"):
            call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"}
            with agent.tracer.start_as_current_span("execute_tool grep", attributes=call) as span:
                span.set_attribute("gen_ai.tool.call.arguments", f'{{"q": "{pattern}"}}')
                span.set_attribute("gen_ai.tool.call.result", "no matches")
    by_kind = {r.kind: r.text for r in agent.reminders}
    assert by_kind["cycle"] == redirect_cycle_text(("open", "close"), 2)
    assert by_kind["no_progress"] == redirect_no_progress_text("grep", 3)
    assert "no matches" not in by_kind["no_progress"]
    reminder = agent.reminders[0]
    assert texts.redirect_of(reminder) == redirect_cycle_text((reminder.tool_name,), reminder.threshold)


def test_a_teams_callable_words_the_reminder_from_the_redacted_preview() -> None:
    seen: list[Reminder] = []

    def ours(reminder: Reminder) -> str:
        seen.append(reminder)
        return f"[{reminder.tier}] {reminder.tool_name} x{reminder.run_length}: {reminder.arguments_preview}"

    config = GuardConfig(thresholds=(3, 5), reminder_style=ours, arguments_preview_chars=12, stop_at=6)
    got = Agent(config, redact=lambda text: text.replace("secret", "***")).run("a", 6)
    assert [r.text for r in got[:2]] == [
        "[gentle] read_file x3: " + seen[0].arguments_preview,
        "[detailed] read_file x5: " + seen[1].arguments_preview,
    ]
    assert seen[1].arguments_preview == '{"path":"***… [17 more characters omitted]'  # redacted, then bounded
    assert seen[1].text == reminder_text("detailed", "read_file", 5, seen[1].arguments_preview)  # the seed's
    assert got[2].tier == "stop" and got[2].text == stop_text("read_file", 6) and len(seen) == 2


@pytest.mark.parametrize("answer", [ValueError("boom"), None, "  "], ids=["raises", "returns-none", "blank"])
def test_a_failing_style_keeps_the_seed_wording_and_says_so(answer: object, caplog: pytest.LogCaptureFixture) -> None:
    def broken(reminder: Reminder) -> str:
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    name = f"broken-{type(answer).__name__}"  # registered for the session: a name per case
    register_reminder_style(name, broken)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        got = Agent(GuardConfig(reminder_style=name)).run("a", 3)
    assert got[0].text == reminder_text("gentle", "read_file", 3, "")
    assert f"reminder style {name!r} failed" in caplog.text


def test_a_registered_style_is_named_in_python_the_environment_and_variants() -> None:
    register_reminder_style("terse", lambda r: f"stop repeating {r.tool_name}")
    assert "terse" in known_styles()
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_REMINDER_STYLE": " terse "}).reminder_style == "terse"
    config = GuardConfig.from_env({"OTEL_REPEAT_GUARD_REMINDER_VARIANTS": "seed, terse"})
    assert config.reminder_variants == ("seed", "terse")
    assert GuardConfig.from_mapping({"reminderVariants": ["redirect", "terse"]}).reminder_variants == (
        "redirect",
        "terse",
    )
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_REMINDER_VARIANTS": "-"}).reminder_variants == ()
    assert Agent(GuardConfig(reminder_style="terse")).run("a", 3)[0].text == "stop repeating read_file"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"reminder_style": "polite"}, "reminder_style names no known reminder style, got 'polite'"),
        ({"reminder_style": 3}, "reminder_style must be a style's name or a callable"),
        ({"reminder_variants": "seed,redirect"}, "reminder_variants must be a sequence of reminder style names"),
        ({"reminder_variants": ["seed", "loud"]}, "reminder_variants names no known reminder style, got 'loud'"),
        ({"reminder_variants": ["seed"]}, "reminder_variants must name two or more styles"),
        ({"reminder_variants": ["seed", "seed"]}, "reminder_variants must not repeat a style"),
    ],
)
def test_a_bad_style_setting_is_refused_naming_the_field_and_value(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        GuardConfig(**settings)  # type: ignore[arg-type]


def test_a_bad_variant_in_the_environment_names_the_variable() -> None:
    with pytest.raises(ValueError, match=r"^OTEL_REPEAT_GUARD_REMINDER_VARIANTS: reminder_variants names no known"):
        GuardConfig.from_env({"OTEL_REPEAT_GUARD_REMINDER_VARIANTS": "seed,nope"})


@pytest.mark.parametrize(
    ("name", "style", "message"),
    [
        ("", str, "reminder style name must be 1 to 64"),
        ("has space", str, "reminder style name must be 1 to 64"),
        ("x" * 65, str, "reminder style name must be 1 to 64"),
        ("redirect", str, "reminder style name 'redirect' is a built-in style's"),
        ("mine", "not callable", "reminder style 'mine' must be a callable"),
    ],
)
def test_registering_a_bad_style_is_refused(name: str, style: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message):
        register_reminder_style(name, style)  # type: ignore[arg-type]


def test_a_variant_is_stable_per_run_key_and_the_split_is_close_to_even_over_1000_runs() -> None:
    variants = ("seed", "redirect")
    keys = [f"agent-{i}#{i * 7919:016x}" for i in range(1000)]
    drawn = [variant_for(key, variants) for key in keys]
    assert drawn == [variant_for(key, variants) for key in keys]  # the same key, the same variant
    counts = Counter(drawn)
    assert abs(counts["seed"] - 500) <= 50, counts  # 3.2 standard deviations of a fair split
    three = Counter(variant_for(key, ("seed", "redirect", "terse")) for key in keys)
    assert set(three) == {"seed", "redirect", "terse"} and min(three.values()) >= 280, three
    assert variant_for("agent-1#0000000000001f3f", variants) == "redirect"  # no per-process hash salt: a fixed answer


def test_every_reminder_of_a_run_has_its_runs_variant_on_the_reminder_event_facts_and_metric() -> None:
    agent = Agent(GuardConfig(reminder_variants=("seed", "redirect")))
    runs = [agent.run(f"agent-{i}", 8) for i in range(40)]
    for got in runs:
        assert len(got) == 3 and len({r.variant for r in got}) == 1
        assert got[0].variant == variant_for(got[0].agent_id, ("seed", "redirect"))
        wording = redirect_text if got[0].variant == "redirect" else None
        if wording is not None:
            assert got[0].text == redirect_text("gentle", "read_file", 3)
        else:
            assert got[0].text == reminder_text("gentle", "read_file", 3, "")
    assert {r[0].variant for r in runs} == {"seed", "redirect"}
    reminded = [s for s in agent.spans() if any(e.name == "repeat_tool_guard.reminder" for e in s.events)]
    assert len(reminded) == 120
    for span in reminded:
        event = next(e for e in span.events if e.name == "repeat_tool_guard.reminder")
        assert (event.attributes or {})[VARIANT] == (span.attributes or {})[VARIANT]
    points = [
        point
        for metric in agent.metrics.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
        if metric.name == "repeat_tool_guard.reminders"
        for point in metric.data.data_points
    ]
    by_variant = Counter()
    for point in points:
        by_variant[point.attributes[VARIANT]] += point.value
    assert sum(by_variant.values()) == 120
    assert by_variant["seed"] == 3 * sum(r[0].variant == "seed" for r in runs)


def test_the_variant_stays_on_the_repeat_that_drew_it_and_not_on_the_runs_later_quiet_calls() -> None:
    agent = Agent(GuardConfig(reminder_variants=("seed", "redirect")))
    run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}
    with agent.tracer.start_as_current_span("invoke_agent coder", attributes=run):
        for path in ("a", "a", "a", "b", "c", "d"):  # the third is reminded of; the rest repeat nothing
            call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"}
            with agent.tracer.start_as_current_span("execute_tool read_file", attributes=call) as span:
                span.set_attribute("gen_ai.tool.call.arguments", f'{{"path": "{path}"}}')
    tools = [s for s in agent.spans() if s.name == "execute_tool read_file"]
    assert len(agent.reminders) == 1 and agent.reminders[0].variant in ("seed", "redirect")
    assert [VARIANT in (s.attributes or {}) for s in tools] == [False, False, True, False, False, False]
    assert all(
        (s.attributes or {})["repeat_tool_guard.run"] == (tools[0].attributes or {})["repeat_tool_guard.run"]
        for s in tools
    )
