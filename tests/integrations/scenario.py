"""The acceptance scenario every framework test drives, and the assertions on what came out.

The scripted model of each framework asks for ``SCRIPT[i]`` when it has seen ``i`` tool
results since the last user prompt, then answers in text. So concurrent runs each follow
the script on their own, and a second prompt starts it over.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, Reminder, ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, find_tool_call
from otel_repeat_guard.core.canonical import canonical_arguments
from otel_repeat_guard.decide.delivery import UNDELIVERED_EVENT as UNDELIVERED
from otel_repeat_guard.decide.delivery import UNDELIVERED_REMINDERS
from otel_repeat_guard.store import SQLiteSpanExporter

PARIS = {"city": "Paris", "units": "metric"}
PARIS_REORDERED = {"units": "metric", "city": "Paris"}
SCRIPT: tuple[tuple[str, dict[str, str]], ...] = (
    *(("lookup", PARIS),) * 5,
    ("lookup", PARIS_REORDERED),
    ("broken_lookup", PARIS),  # a failing tool: a different call, flagged as an error
    ("broken_lookup", PARIS),
)
EXPECTED_RUNS = [1, 2, 3, 4, 5, 6, 1, 2]
SHORT_SCRIPT = (("lookup", PARIS), ("lookup", PARIS))
FINAL_ANSWER = "Paris: 18 degrees, metric."


def next_call(
    tool_results_since_prompt: int, script: Sequence[tuple[str, dict[str, str]]] = SCRIPT
) -> tuple[str, dict[str, str]] | None:
    """What the scripted model asks for next: a tool call, or None for the final answer."""
    return script[tool_results_since_prompt] if tool_results_since_prompt < len(script) else None


def lookup_result(city: str, units: str) -> str:
    return f"{city}: 18 degrees ({units})"


def require(module: str) -> Any:
    """Import a framework, or skip the test module; in CI (OTEL_REPEAT_GUARD_REQUIRE_FRAMEWORKS=1) fail instead."""
    if os.environ.get("OTEL_REPEAT_GUARD_REQUIRE_FRAMEWORKS") == "1":
        return __import__(module, fromlist=["_"])
    return pytest.importorskip(module)


@dataclass
class Guarded:
    """A guard with an inbox, and everything exported after it."""

    guard: RepeatGuardSpanProcessor
    inbox: ReminderInbox
    exporter: InMemorySpanExporter
    reminders: list[Reminder] = field(default_factory=list)
    metrics: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    store: SQLiteSpanExporter | None = None  # the embedded store, written in-process as spans end

    @property
    def processors(self) -> list[SpanProcessor]:
        stored = [] if self.store is None else [SimpleSpanProcessor(self.store)]
        return [self.guard, SimpleSpanProcessor(self.exporter), *stored]

    def unguarded(self) -> dict[tuple[str, str], int]:
        """``repeat_tool_guard.unguarded_calls`` so far, as {(reason, tool): count}."""
        return {
            (str(p.attributes["reason"]), str(p.attributes["gen_ai.tool.name"])): int(p.value)
            for p in metric_points(self.metrics, "repeat_tool_guard.unguarded_calls")
        }


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [
        point
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


class RecordingInbox(ReminderInbox):
    """An inbox that also keeps every reminder put in it. The guard's ``on_reminder`` is its ``put``, as
    ``configure()`` wires the process-wide inbox, so the guard watches whether an adapter takes each one
    (``decide/delivery.py``): a reminder no adapter took is counted on ``undelivered_reminders``."""

    def __init__(self, reminders: list[Reminder]) -> None:
        super().__init__()
        self.reminders = reminders

    def put(self, reminder: Reminder) -> None:
        self.reminders.append(reminder)
        super().put(reminder)


def make_guarded(store: Path | None = None, **options: Any) -> Guarded:
    """A guard (``options`` go to :class:`RepeatGuardSpanProcessor`) whose reminders go to an inbox and a list.

    With ``store`` (a SQLite file) the spans are also exported into the embedded store; the guard records its
    facts on them by default, as ``configure()`` sets it up.
    """
    exporter = None
    if store is not None:
        exporter = SQLiteSpanExporter(store, config=options.get("config"))
    reminders: list[Reminder] = []
    inbox = RecordingInbox(reminders)
    metrics = InMemoryMetricReader()
    guard = RepeatGuardSpanProcessor(
        on_reminder=inbox.put, meter_provider=MeterProvider(metric_readers=[metrics]), **options
    )
    return Guarded(guard, inbox, InMemorySpanExporter(), reminders, metrics, exporter)


def provider_for(g: Guarded) -> TracerProvider:
    provider = TracerProvider()
    for processor in g.processors:
        provider.add_span_processor(processor)
    return provider


@contextlib.contextmanager
def with_store(tmp_path: Path, **options: Any) -> Iterator[Guarded]:
    """A guard whose spans also go into a fresh store in ``tmp_path`` (for :func:`assert_whole_chain`), closed
    at the end of the block. The body of the ``stored`` fixture, for a module whose own fixture wires it up."""
    guarded = make_guarded(store=tmp_path / "store.db", **options)
    assert guarded.store is not None
    try:
        yield guarded
    finally:
        guarded.store.shutdown()


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Guarded]:
    """:func:`with_store` as a fixture; not yet wired to a provider."""
    with with_store(tmp_path) as guarded:
        yield guarded


@pytest.fixture
def hand_wired(tmp_path: Path) -> Iterator[Guarded]:
    """The setup docs/runtimes.md showed before the facts were on by default, wired by hand: a bare
    ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter(path)``, nothing else set (the meter
    provider only lets the test read the guard's metrics). Not yet wired to a provider."""
    inbox, reminders, metrics = ReminderInbox(), [], InMemoryMetricReader()

    def on_reminder(reminder: Reminder) -> None:
        reminders.append(reminder)
        inbox.put(reminder)

    guard = RepeatGuardSpanProcessor(on_reminder=on_reminder, meter_provider=MeterProvider(metric_readers=[metrics]))
    store = SQLiteSpanExporter(tmp_path / "store.db")
    try:
        yield Guarded(guard, inbox, InMemorySpanExporter(), reminders, metrics, store)
    finally:
        store.shutdown()
    assert not store.facts_missing  # the store never had to say its figures were guesses


class Switchboard(SpanProcessor):
    """For frameworks that only use the global provider (set once per process): forwards to the current test's processors."""

    def __init__(self) -> None:
        self.targets: list[SpanProcessor] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        for target in self.targets:
            hook = getattr(target, "_on_ending", None)
            if hook is not None:
                hook(span)

    def on_end(self, span: ReadableSpan) -> None:
        for target in self.targets:
            target.on_end(span)


@contextlib.contextmanager
def wired(board: Switchboard, g: Guarded) -> Iterator[Guarded]:
    """``g``'s processors behind ``board`` for the block's duration."""
    board.targets = g.processors
    try:
        yield g
    finally:
        board.targets = []


# -- reading the output ----------------------------------------------------------------------


def is_tool_span(span: ReadableSpan) -> bool:
    return find_tool_call(DEFAULT_CONVENTIONS, span.name, span.attributes or {}, span.events) is not None


def _repeat(span: ReadableSpan) -> dict[str, Any] | None:
    for event in span.events:
        if event.name == "repeat_tool_guard.repeat":
            return dict(event.attributes or {})
    return None


def run_lengths(spans: Sequence[ReadableSpan]) -> list[int]:
    return [int(r["repeat_tool_guard.run_length"]) if (r := _repeat(s)) else 1 for s in spans]


def tool_spans_by_trace(g: Guarded) -> dict[int, list[ReadableSpan]]:
    """Tool spans in the order they ended, per trace (each framework run here is its own trace)."""
    out: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in g.exporter.get_finished_spans():
        if is_tool_span(span):
            out[span.context.trace_id].append(span)  # type: ignore[union-attr]
    return dict(out)


def tool_spans_by_run(g: Guarded, outer: str | None = None) -> dict[int, list[ReadableSpan]]:
    """Tool spans in the order they ended, per agent run.

    Without ``outer``, one run per trace (as :func:`tool_spans_by_trace`). With ``outer``, the
    name of one span that encloses every run (an HTTP request serving several runs), a run is
    each child of that span.
    """
    if outer is None:
        return tool_spans_by_trace(g)
    spans = g.exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    (outer_id,) = [s.context.span_id for s in spans if s.name == outer and s.context is not None]
    out: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        if not is_tool_span(span):
            continue
        top = span
        while top.parent is not None and top.parent.span_id != outer_id:
            top = by_id[top.parent.span_id]
        assert top.parent is not None, f"tool span {span.name} is not under {outer}"
        out[top.context.span_id].append(span)  # type: ignore[union-attr]
    return dict(out)


def guard_events(g: Guarded, name: str = "repeat_tool_guard.repeat") -> list[tuple[ReadableSpan, dict[str, Any]]]:
    """Every guard event called ``name``, with the span it is on, in the order the spans ended."""
    return [
        (span, dict(event.attributes or {}))
        for span in g.exporter.get_finished_spans()
        for event in span.events
        if event.name == name
    ]


def assert_no_event_on_non_tool_spans(g: Guarded) -> None:
    """No guard event on a span that is no tool call's, but the one a model call carries by design: a reminder that
    went out without it (``repeat_tool_guard.undelivered``, where the run has no adapter)."""
    for span in g.exporter.get_finished_spans():
        if not is_tool_span(span):
            names = [e.name for e in span.events if e.name.startswith("repeat_tool_guard") and e.name != UNDELIVERED]
            assert not names, span.name


def assert_scenario_run(g: Guarded, spans: Sequence[ReadableSpan]) -> str:
    """One run of SCRIPT: runs 1..6 in one chain, reminders at 3 and 5, the failing call distinct and flagged.

    Returns the chain key of the run.
    """
    assert run_lengths(spans) == EXPECTED_RUNS, [(s.name, dict(s.attributes or {})) for s in spans]
    repeats = [_repeat(s) for s in spans]
    (agent_id,) = {r["repeat_tool_guard.agent_id"] for r in repeats[1:6] if r}
    assert repeats[7] is not None and repeats[7]["repeat_tool_guard.agent_id"] == agent_id
    assert [r["repeat_tool_guard.error"] for r in repeats if r] == [False] * 5 + [True]
    mine = [r for r in g.reminders if r.agent_id == agent_id]
    assert [(r.tool_name, r.run_length, r.tier) for r in mine] == [("lookup", 3, "gentle"), ("lookup", 5, "detailed")]
    assert mine[1].arguments_preview == json.dumps(PARIS, separators=(",", ":"))
    return agent_id


def assert_separate_runs(g: Guarded, runs: int) -> list[str]:
    """``runs`` traces each followed SCRIPT in a chain of its own."""
    by_trace = tool_spans_by_trace(g)
    assert len(by_trace) == runs
    ids = [assert_scenario_run(g, spans) for spans in by_trace.values()]
    assert len(set(ids)) == runs
    assert_no_event_on_non_tool_spans(g)
    return ids


def assert_interleaved(g: Guarded) -> None:
    """The tool spans of the traces really alternated in time (ended in a mixed order)."""
    order = [s.context.trace_id for s in g.exporter.get_finished_spans() if is_tool_span(s)]  # type: ignore[union-attr]
    first_of_other = next(i for i, t in enumerate(order) if t != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


def assert_reminders_reached_model(requests: Sequence[Sequence[tuple[str, str]]], *, loop: bool = False) -> None:
    """``requests[i]`` is the (role, text) list the scripted model got on its i-th request.

    The request after the 3rd tool call carries the gentle text, the one after the 5th the
    detailed text, each in a user message tagged <system-reminder>, never in a tool result. With
    ``loop`` (the whole-chain scenario, ``LOOP``: nine identical calls) the request after the 8th carries
    the detailed text again (the default thresholds are 3, 5 and 8), and the two before it no new one.
    """

    def reminder_texts(request: Sequence[tuple[str, str]]) -> list[str]:
        return [text for role, text in request if "<system-reminder>" in text and role == "user"]

    assert not any("<system-reminder>" in text for request in requests for role, text in request if role != "user")
    assert not any(reminder_texts(r) for r in requests[:3])
    gentle = reminder_texts(requests[3])
    assert gentle and "identical arguments 3 times in a row" in gentle[-1] and gentle[-1].endswith("</system-reminder>")
    assert not any("5 times in a row" in t for t in reminder_texts(requests[4]))
    detailed = reminder_texts(requests[5])
    assert detailed and "5 times in a row" in detailed[-1] and "made no progress" in detailed[-1]
    if loop:
        assert not any("8 times in a row" in t for r in requests[6:8] for t in reminder_texts(r))
        third = reminder_texts(requests[8])
        assert third and "8 times in a row" in third[-1] and "made no progress" in third[-1]


def break_once(monkeypatch: Any, module: Any) -> list[int]:
    """The adapter ``module``'s first edit of a request that carries reminders fails: its ``reminder_message``
    raises once, then works. Returns how many reminders that failed edit held (a list, filled then)."""
    real, failed = module.reminder_message, []

    def once(reminders: Sequence[Any]) -> str:
        if not failed:
            failed.append(len(reminders))
            raise RuntimeError("the framework's request is not what the adapter expects")
        text: str = real(reminders)
        return text

    monkeypatch.setattr(module, "reminder_message", once)
    return failed


def assert_gentle_reminder_came_one_request_late(requests: Sequence[Sequence[tuple[str, str]]]) -> None:
    """The request due to carry the gentle reminder (the 4th, of SCRIPT or LOOP) went out without it, and the next
    one carried it, in a user message, once."""
    carried = [
        [text for role, text in request if role == "user" and "<system-reminder>" in text] for request in requests
    ]
    assert not any(carried[:4]), carried
    assert len(carried[4]) == 1 and carried[4][0].count(GENTLE) == 1, carried[4]


# -- delivering reminders (adapters) ------------------------------------------------------------

REPEAT3 = (("lookup", PARIS),) * 3
"""The adapter scenario: three identical calls, then the answer. The fourth request must carry the gentle reminder."""
LYON = {"city": "Lyon", "units": "metric"}
ONE_CALL = (("lookup", LYON),)
"""A second, concurrent run of the same agent (prompted about Lyon): one call, so no reminder is ever due to it."""
GENTLE = "You have called `lookup` with identical arguments 3 times in a row."


def assert_gentle_reminder_delivered_once(requests: Sequence[Sequence[tuple[str, str]]]) -> None:
    """``requests[i]`` is the (role, text) list the model got on its i-th request of one run of REPEAT3.

    The 4th request (after the 3rd identical call) carries the gentle reminder exactly once, in a
    user message that comes after the last tool result; no earlier request carries any reminder,
    no reminder is ever inside a tool result, and every tool result is the tool's own text.
    """
    assert len(requests) == 4, [len(r) for r in requests]
    assert not any("<system-reminder>" in text for request in requests[:3] for _, text in request)
    last = requests[3]
    assert not any("<system-reminder>" in text for role, text in last if role != "user")
    carrying = [i for i, (role, text) in enumerate(last) if role == "user" and "<system-reminder>" in text]
    assert len(carrying) == 1, last
    (i,) = carrying
    assert last[i][1].count(GENTLE) == 1, last[i][1]
    results = [j for j, (role, _) in enumerate(last) if role == "tool"]
    assert results and i > max(results), last
    assert [last[j][1] for j in results][-3:] == [lookup_result(**PARIS)] * 3, [last[j] for j in results]


def assert_nothing_delivered(requests: Sequence[Sequence[tuple[str, str]]]) -> None:
    assert not any("<system-reminder>" in text for request in requests for _, text in request)


def openai_messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A chat-completions request body as (role, text) pairs: text parts joined, tool calls as their JSON."""
    out: list[tuple[str, str]] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        out.append((message.get("role", ""), content or json.dumps(message.get("tool_calls") or "")))
    return out


# -- the whole chain: guard, store, dashboard and metrics agree (issue 21, item 5) -----------------

LOOP = (("lookup", PARIS),) * 9
"""The whole-chain scenario: nine identical calls, then the answer (reminders after calls 3, 5 and 8)."""


def model_usage(k: int) -> dict[str, int]:
    """The usage the scripted model reports on the ``k``-th model call of a run (from 1): 1000·k in, 10+k out.

    Every model call asks for one tool call, so model call k is the one that has seen k-1 tool results.
    """
    return {"input": 1000 * k, "output": 10 + k}


def usage_after(tool_results_since_prompt: int) -> dict[str, int]:
    """:func:`model_usage` of the model call that has seen ``tool_results_since_prompt`` tool results."""
    return model_usage(tool_results_since_prompt + 1)


Figures = dict[str, Any]


def expected_whole_chain(
    script: Sequence[tuple[str, dict[str, str]]] = LOOP,
    *,
    final_answer_tool: bool = False,
    config: GuardConfig | None = None,
) -> Figures:
    """What every part must say about one run of ``script`` (one tool call per model call, then the answer).

    Call i (from 1) is asked for by model call i; a call at run position 2 or more wastes its issuer's
    usage (each model call once). With ``final_answer_tool`` the last model call asks for a
    ``final_answer`` tool call (smolagents) instead of answering in text: one more tool call, no repeat.
    """
    thresholds = (config or GuardConfig()).thresholds
    calls = [(tool, canonical_arguments(arguments)) for tool, arguments in script]
    positions: list[int] = []
    for i, call in enumerate(calls):
        positions.append(positions[-1] + 1 if i and calls[i - 1] == call else 1)
    wasted = [model_usage(i + 1) for i, run in enumerate(positions) if run >= 2]
    tokens = {kind: sum(u[kind] for u in wasted) for kind in ("input", "output")}
    outcomes: dict[tuple[str, str], int] = {}
    for i, run in enumerate(positions):
        if run not in thresholds:
            continue
        tier = "gentle" if run == thresholds[0] else "detailed"
        following = positions[i + 1] if i + 1 < len(positions) else None
        outcome = "ended" if following is None else "ignored" if following == run + 1 else "broken"
        outcomes[(tier, outcome)] = outcomes.get((tier, outcome), 0) + 1
    tool_calls = len(script) + final_answer_tool
    return {
        "store: tool-call rows": tool_calls,
        "store: longest run": max(positions),
        "store: wasted tokens": tokens,
        "metric: wasted tokens": tokens,
        "store: run keys": 1,
        "timeline: model calls": len(script) + 1,
        "timeline: tool calls": tool_calls,
        "store: reminder outcomes": outcomes,
        "metric: reminder outcomes": outcomes,
        "store: undelivered reminders": 0,  # every reminder reached the model (decide/delivery.py)
        "metric: undelivered reminders": {},
    }


def _metric_sums(g: Guarded, name: str, *keys: str) -> dict[Any, int]:
    """A guard metric's points summed by the attributes ``keys`` (one key: its value; several: a tuple)."""
    out: dict[Any, int] = {}
    for point in metric_points(g.metrics, name):
        attributes = point.attributes or {}
        at = tuple(str(attributes.get(k, "")) for k in keys)
        key = at[0] if len(at) == 1 else at
        out[key] = out.get(key, 0) + int(point.value)
    return {k: v for k, v in out.items() if v}


def whole_chain(g: Guarded, tool: str = "lookup") -> Figures:
    """The figures of :func:`expected_whole_chain` as the store (through the dashboard's queries) and the
    guard's metrics give them. The run of the timeline is the one the dashboard drills into: that of
    the longest run of ``tool``."""
    from otel_repeat_guard.decide import metrics as names
    from otel_repeat_guard.store import open_for_reading, queries

    assert g.store is not None, "make the guard with make_guarded(store=...) or the `stored` fixture"
    conn, _ = open_for_reading(g.store.path)
    try:
        every = queries.Filters()
        head = queries.headline(conn, every).iloc[0]
        wasted = queries.wasted_tokens(conn, every)
        keys = sorted(
            str(key)
            for (key,) in conn.execute("SELECT agent_key FROM tool_calls UNION SELECT agent_key FROM model_calls")
        )  # no dashboard query lists run keys: each of them is a run the dashboard shows
        longest = queries.hotspot_runs(conn, every, tool, limit=1)
        timeline = queries.run_timeline(conn, str(longest["agent_key"].iloc[0])) if len(longest) else None
        outcomes = queries.reminder_outcomes(conn, every)
        undelivered = int(queries.undelivered_reminders(conn, every)["reminders"].sum())
    finally:
        conn.close()
    kinds = {} if timeline is None else timeline["kind"].value_counts().to_dict()
    return {
        "store: tool-call rows": int(head["tool_calls"] + head["untracked_calls"]),
        "store: longest run": int(head["longest_run"]),
        "store: wasted tokens": {
            "input": int(wasted["input_tokens"].sum()),
            "output": int(wasted["output_tokens"].sum()),
        },
        "metric: wasted tokens": _metric_sums(g, names.WASTED_TOKENS, "gen_ai.token.type") or {"input": 0, "output": 0},
        "store: run keys": len(keys) if len(keys) <= 1 else (len(keys), [k[:40] for k in keys]),
        "timeline: model calls": int(kinds.get("model", 0)),
        "timeline: tool calls": int(kinds.get("tool", 0)),
        "store: reminder outcomes": {
            (str(tier), str(outcome)): int(n)
            for (tier, outcome), n in outcomes.groupby(["tier", "outcome"])["reminders"].sum().items()
        },
        "metric: reminder outcomes": _metric_sums(g, names.REMINDER_OUTCOMES, "repeat_tool_guard.tier", "outcome"),
        "store: undelivered reminders": undelivered,
        "metric: undelivered reminders": _metric_sums(g, UNDELIVERED_REMINDERS, "repeat_tool_guard.tier", "reason"),
    }


def assert_whole_chain(g: Guarded, expected: Figures, tool: str = "lookup") -> None:
    """The store's rows, longest run, wasted tokens, run keys, timeline and reminder outcomes, and the
    guard's metrics, all as ``expected`` (see :func:`expected_whole_chain`); every figure at once, so a
    failure shows each wrong one."""
    actual = whole_chain(g, tool)
    wrong = {
        name: {"actual": actual[name], "expected": value} for name, value in expected.items() if actual[name] != value
    }
    assert not wrong, wrong


NO_PROGRESS_SCRIPT = tuple(
    ("broken_lookup", {"city": "Paris", "units": units}) for units in ("metric", "imperial", "kelvin", "rankine")
)
"""No progress: four calls of one failing tool, each with other arguments, each failing alike."""
NO_PROGRESS_CONFIG = GuardConfig(no_progress_thresholds=(3,))


def assert_no_progress_from_the_model_requests(g: Guarded, requests: Sequence[Sequence[str]]) -> None:
    """:data:`NO_PROGRESS_SCRIPT` ran on a runtime whose spans record no tool result: each outcome came back
    in the next model request (``requests``: each request's message texts), so each call's no-progress
    event is on that model call's span, named by its call id; the reminder after call 3 reaches the model
    in the request after the one that carried call 3's result; and the store has the same detections."""
    found = guard_events(g, "repeat_tool_guard.no_progress")
    assert [e["repeat_tool_guard.run_length"] for _, e in found] == [2, 3, 4]
    assert all(not is_tool_span(span) for span, _ in found)  # on the model calls that carried the outcomes
    assert len({e["gen_ai.tool.call.id"] for _, e in found}) == 3
    assert len({e["repeat_tool_guard.outcome_digest"] for _, e in found}) == 1
    assert [(r.kind, r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("no_progress", "broken_lookup", 3, "gentle")
    ]
    (reminder,) = g.reminders
    assert "broken_lookup" in reminder.text
    carried = [i for i, texts in enumerate(requests) if any(reminder.text in text for text in texts)]
    assert carried == [len(NO_PROGRESS_SCRIPT)]  # request 5 (the answer's): call 3's result came with request 4
    from otel_repeat_guard.store import open_for_reading

    assert g.store is not None
    conn, _ = open_for_reading(g.store.path)
    try:
        stored = conn.execute(
            "SELECT c.tool_name, d.run_length, d.reminder_tier FROM detections d JOIN tool_calls c"
            " ON c.id = d.call_id WHERE d.kind = 'no_progress' ORDER BY c.end_ns"
        ).fetchall()
    finally:
        conn.close()
    assert stored == [("broken_lookup", 2, None), ("broken_lookup", 3, "gentle"), ("broken_lookup", 4, None)]
