"""The GenAI conventions' invocation spans as the reference instrumentation library makes them
(``opentelemetry-util-genai``'s ``TelemetryHandler``): each form is a run of the tool calls under it.

- ``invoke_local_agent``: ``invoke_agent <name>``, span kind INTERNAL (``gen_ai.invoke_agent.internal``);
- ``invoke_remote_agent``: ``invoke_agent <name>``, span kind CLIENT, with ``gen_ai.provider.name``
  (``gen_ai.invoke_agent.client``);
- ``workflow``: ``invoke_workflow <name>``, span kind INTERNAL (the operation the 2026 conventions keep for a
  workflow, now a form of ``gen_ai.invoke_agent.internal``).

Three identical ``execute_tool`` calls (``handler.tool``, call ids and arguments recorded) under each: one run,
keyed by the invocation span, in the guard and in the store.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from otel_repeat_guard.core.facts import RUN

from .scenario import Guarded, provider_for, require, run_lengths, with_store

os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
require("opentelemetry.util.genai")
from opentelemetry.util.genai.handler import TelemetryHandler  # noqa: E402

FORMS: dict[str, tuple[Callable[[TelemetryHandler], Any], str, SpanKind]] = {
    "local_agent": (lambda h: h.invoke_local_agent(agent_name="booking"), "invoke_agent booking", SpanKind.INTERNAL),
    "remote_agent": (
        lambda h: h.invoke_remote_agent("aws.bedrock", agent_name="booking"),
        "invoke_agent booking",
        SpanKind.CLIENT,
    ),
    "workflow": (lambda h: h.workflow("trip"), "invoke_workflow trip", SpanKind.INTERNAL),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_of_the_invocation_span_is_a_run_of_its_tool_calls_in_the_guard_and_the_store(
    form: str, tmp_path: Path
) -> None:
    start, span_name, kind = FORMS[form]
    with with_store(tmp_path) as g:
        provider = provider_for(g)
        handler = TelemetryHandler(tracer_provider=provider)
        with start(handler):
            for i in range(3):
                with handler.tool("lookup") as tool:
                    tool.tool_call_id = f"call_{i}"
                    tool.arguments = {"city": "Paris", "units": "metric"}
        provider.shutdown()
    _check(g, span_name, kind, tmp_path / "store.db")


def _check(g: Guarded, span_name: str, kind: SpanKind, db: Path) -> None:
    spans = g.exporter.get_finished_spans()
    (invocation,) = [s for s in spans if s.name == span_name]
    assert invocation.kind is kind
    key = f"{span_name.split(' ', 1)[1]}#{invocation.context.span_id:016x}"  # type: ignore[union-attr]
    tools = [s for s in spans if s.name == "execute_tool lookup"]
    assert [(s.attributes or {})[RUN] for s in tools] == [key] * 3
    assert run_lengths(tools) == [1, 2, 3]
    assert [(r.agent_id, r.run_length, r.tier) for r in g.reminders] == [(key, 3, "gentle")]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT agent_key, run_length FROM tool_calls ORDER BY id").fetchall() == [
            (key, n) for n in (1, 2, 3)
        ]
        assert conn.execute("SELECT agent_key FROM agent_runs").fetchall() == [(key,)]
