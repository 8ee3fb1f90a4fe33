"""A scripted looping agent emitting GenAI spans through whatever tracer provider it is given."""

from __future__ import annotations

import json

from opentelemetry import trace
from opentelemetry.trace import TracerProvider


def looping_agent(provider: TracerProvider | None = None, *, calls: int = 5, agent_id: str = "agent-1") -> None:
    """One agent run calling ``read_file`` with identical arguments ``calls`` times, then ``grep`` once."""
    tracer = (provider or trace.get_tracer_provider()).get_tracer("tests.production")
    run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "looper", "gen_ai.agent.id": agent_id}
    with tracer.start_as_current_span("invoke_agent looper", attributes=run):
        for tool, arguments in [("read_file", {"path": "README.md"})] * calls + [("grep", {"pattern": "x"})]:
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", tool)
                span.set_attribute("gen_ai.agent.id", agent_id)
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
