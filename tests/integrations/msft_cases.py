"""Shared by the AutoGen and Semantic Kernel suites: the three OpenAI-client instrumentations, the
global provider behind a switchboard, and the scenario assertions with the framework's tool names.

Both frameworks trace with the global tracer provider only (``trace.get_tracer(...)`` at import),
so the provider is set once per process, behind :data:`BOARD`; each test points the board at its
own guard. The model client is the real ``openai`` SDK talking to :class:`FakeOpenAI`; each test
instruments it with one of:

- ``openai-v2``: ``opentelemetry-instrumentation-openai-v2``. With ``opentelemetry-util-genai``
  1.x it always writes the latest experimental conventions, and content capture is
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (or ``span_and_event``):
  ``gen_ai.output.messages`` on the ``chat <model>`` span. The legacy value ``true`` is not a
  mode any more and captures nothing (it logs a warning).
- ``openinference``: ``openinference-instrumentation-openai``, content on by default
  (``llm.output_messages.*``); ``OPENINFERENCE_HIDE_OUTPUTS=true`` hides it.
- ``openllmetry``: OpenLLMetry's ``opentelemetry-instrumentation-openai``,
  ``TRACELOOP_TRACE_CONTENT=true`` (its default): ``gen_ai.output.messages`` on ``openai.chat``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from .scenario import (
    EXPECTED_RUNS,
    PARIS,
    Guarded,
    Switchboard,
    _repeat,
    assert_no_event_on_non_tool_spans,
    guard_events,
    is_tool_span,
    run_lengths,
    tool_spans_by_run,
)

INSTRUMENTATIONS = ("openai-v2", "openinference", "openllmetry")
OUTER = "outer request"

# What each instrumentation needs in the environment to record the tool calls the model asked for.
CONTENT_ON: dict[str, dict[str, str]] = {
    "openai-v2": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
    "openinference": {},
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "true"},
}
# Content capture off, each the way a user would have it. "openai-v2-true" is the documented legacy
# value, which util-genai 1.x no longer understands: it captures nothing.
CONTENT_OFF: dict[str, tuple[str, dict[str, str]]] = {
    "openai-v2": ("openai-v2", {}),
    "openai-v2-true": ("openai-v2", {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}),
    "openinference": ("openinference", {"OPENINFERENCE_HIDE_OUTPUTS": "true"}),
    "openllmetry": ("openllmetry", {"TRACELOOP_TRACE_CONTENT": "false"}),
}
# The setting a blind spot's fix must name, per model-client instrumentation (``true`` does nothing
# for openai-v2 with util-genai 1.x; OpenInference hides the model's tool calls with its *outputs*).
CONTENT_SETTING = {
    "openai-v2": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
    "openai-v2-true": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
    "openinference": "OPENINFERENCE_HIDE_OUTPUTS",
    "openllmetry": "TRACELOOP_TRACE_CONTENT=true",
}
CONTENT_VARIABLES = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT",
    "OPENINFERENCE_HIDE_OUTPUTS",
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES",
    "TRACELOOP_TRACE_CONTENT",
)

BOARD = Switchboard()
_installed: list[TracerProvider] = []


def global_provider() -> TracerProvider:
    """The process-wide SDK provider, with :data:`BOARD` on it (added once)."""
    if not _installed:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(BOARD)
        _installed.append(provider)
    return _installed[0]


def _instrumentor(name: str) -> Any:
    if name == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as V2

        return V2()  # type: ignore[no-untyped-call]
    if name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OI

        return OI()
    if name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LL

        return LL()
    raise ValueError(name)


@contextmanager
def instrumented(name: str | None, monkeypatch: pytest.MonkeyPatch, content: bool = True) -> Iterator[None]:
    """The openai SDK instrumented with ``name`` (None: not at all), content capture on or off."""
    for variable in CONTENT_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    if name is None:
        yield
        return
    instrumentation, env = (name, CONTENT_ON[name]) if content else CONTENT_OFF[name]
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    instrumentor = _instrumentor(instrumentation)
    instrumentor.instrument(tracer_provider=global_provider())
    try:
        yield
    finally:
        instrumentor.uninstrument()
        unwrap_openai()


def unwrap_openai() -> list[str]:
    """Remove every wrapper an instrumentation left on the openai SDK; returns what was left.

    OpenLLMetry's ``uninstrument`` (0.62.4) unwraps nothing: it calls
    ``unwrap("openai.resources.chat.completions", "Completions.create")``, which
    ``opentelemetry.instrumentation.utils.unwrap`` reads as the attribute ``Completions.create``
    of the *module* ``completions``. Its spans would go on in every later test.
    """
    import wrapt

    proxy = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)  # wrapt 2 wraps functions in BaseObjectProxy

    left: list[str] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "openai" or name.startswith("openai.")):
            continue
        for cls in [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == name]:
            for attribute, found in list(vars(cls).items()):
                value = found
                while isinstance(value, proxy) and hasattr(value, "__wrapped__"):
                    left.append(f"{name}.{cls.__name__}.{attribute}")
                    value = value.__wrapped__
                    setattr(cls, attribute, value)
    return left


@contextmanager
def guarded_board(g: Guarded) -> Iterator[Guarded]:
    global_provider()
    BOARD.targets = g.processors
    try:
        yield g
    finally:
        BOARD.targets = []


# -- the scenario with the framework's tool names ---------------------------------------------


def assert_scenario_run(g: Guarded, spans: Sequence[ReadableSpan], lookup: str = "lookup") -> str:
    """:func:`scenario.assert_scenario_run` with the lookup tool called ``lookup``; returns the chain key."""
    assert run_lengths(spans) == EXPECTED_RUNS, (run_lengths(spans), [(s.name, _repeat(s)) for s in spans])
    repeats = [_repeat(s) for s in spans]
    (agent_id,) = {r["repeat_tool_guard.agent_id"] for r in repeats[1:6] if r}
    assert repeats[7] is not None and repeats[7]["repeat_tool_guard.agent_id"] == agent_id
    assert [r["repeat_tool_guard.error"] for r in repeats if r] == [False] * 5 + [True]
    mine = [r for r in g.reminders if r.agent_id == agent_id]
    assert [(r.tool_name, r.run_length, r.tier) for r in mine] == [(lookup, 3, "gentle"), (lookup, 5, "detailed")]
    assert mine[1].arguments_preview == json.dumps(PARIS, separators=(",", ":"))
    return str(agent_id)


def assert_runs(g: Guarded, runs: int, lookup: str = "lookup", outer: str | None = None) -> list[str]:
    """``runs`` runs each followed SCRIPT in a chain of its own (per trace, or per child of ``outer``)."""
    by_run = tool_spans_by_run(g, outer=outer)
    assert len(by_run) == runs, {run: [s.name for s in spans] for run, spans in by_run.items()}
    ids = [assert_scenario_run(g, spans, lookup) for spans in by_run.values()]
    assert len(set(ids)) == runs, ids
    assert_no_event_on_non_tool_spans(g)
    return ids


def assert_runs_interleaved(g: Guarded, outer: str | None = None) -> None:
    """The tool spans of the runs really alternated in time."""
    run_of = {id(s): run for run, spans in tool_spans_by_run(g, outer=outer).items() for s in spans}
    order = [run_of[id(s)] for s in g.exporter.get_finished_spans() if id(s) in run_of]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


def assert_arguments_not_on_tool_spans(g: Guarded) -> None:
    """The framework recorded no arguments on its tool spans: the guard had them from the model span."""
    tools = [s for s in g.exporter.get_finished_spans() if is_tool_span(s)]
    assert tools
    for span in tools:
        attributes = span.attributes or {}
        assert "gen_ai.tool.call.arguments" not in attributes, (span.name, attributes)
        assert attributes.get("gen_ai.tool.call.id"), (span.name, attributes)


def assert_fully_guarded(g: Guarded) -> None:
    """Nothing the guard recognised went uncompared: counter and doctor agree."""
    from otel_repeat_guard.cli.doctor import diagnose

    assert g.unguarded() == {}, g.unguarded()
    report = diagnose(list(g.exporter.get_finished_spans()))
    assert report.blind_spots == [], report.blind_spots
    assert report.exit_code == 0, report


def assert_blind(g: Guarded, scope: str, expected: dict[tuple[str, str], int], fixes: Sequence[str]) -> None:
    """The guard compared nothing, and said so: counter, doctor (reason, calls, a fix naming one of ``fixes``)."""
    from otel_repeat_guard.cli.doctor import diagnose

    tools = [s for s in g.exporter.get_finished_spans() if is_tool_span(s)]
    assert run_lengths(tools) == [1] * len(tools), [(s.name, _repeat(s)) for s in tools]
    assert guard_events(g) == [] and guard_events(g, "repeat_tool_guard.reminder") == [], guard_events(g)
    assert g.reminders == [], g.reminders
    assert g.unguarded() == expected, g.unguarded()
    report = diagnose(list(g.exporter.get_finished_spans()))
    got: dict[tuple[str, str], int] = defaultdict(int)
    for spot in report.blind_spots:
        assert spot.scope == scope, spot
        assert any(fix in spot.fix for fix in fixes), (spot.fix, fixes)
        got[(spot.reason, spot.tool)] += spot.calls
    assert dict(got) == expected, report.blind_spots
    assert report.exit_code == 1, report


# -- a readable dump of the spans (for reports, not asserted) -------------------------------------

_RELEVANT = (
    "gen_ai.operation.name",
    "gen_ai.agent.id",
    "gen_ai.agent.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.output.messages",
    "openinference.span.kind",
    "traceloop.span.kind",
    "error.type",
)


def dump_spans(spans: Sequence[ReadableSpan], width: int = 160) -> str:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    lines = []
    for span in spans:
        parent = by_id.get(span.parent.span_id).name if span.parent and span.parent.span_id in by_id else None  # type: ignore[union-attr]
        scope = span.instrumentation_scope.name if span.instrumentation_scope else "?"
        lines.append(f"{span.name!r} scope={scope} parent={parent!r} status={span.status.status_code.name}")
        for key, value in (span.attributes or {}).items():
            if (
                key in _RELEVANT
                or (".output_messages." in key and "tool_call" in key)
                or key.startswith("gen_ai.completion.")
            ):
                lines.append(f"    {key} = {str(value)[:width]}")
        for event in span.events:
            lines.append(f"    event {event.name} {str(dict(event.attributes or {}))[:width]}")
    return "\n".join(lines) + "\n"
