"""One warning when a framework's adapter runs but none of the framework's spans reach the guard.

An adapter asks for reminders before each model request, from inside the framework's run. With
its instrumentation on (on the guard's tracer provider) that request has a span of the run
around it, and the guard finds the run; without, there is no span at all, the guard counts
nothing, and nothing says so. So: when a framework's adapter has asked before two model requests
(the first one has gone out) and the guard has found no run at any of them, the adapter logs one
warning, once per process and framework, naming the instrumentation to install and turn on.
Once a run is found the framework is seen, and it never warns.
"""

from __future__ import annotations

import logging
import threading
from typing import NamedTuple

logger = logging.getLogger("otel_repeat_guard")

REQUESTS_BEFORE_WARNING = 2  # the adapter's second model request: the first one went out unseen


class Instrumentation(NamedTuple):
    extra: str  # pip install 'otel-repeat-guard[extra]' installs it
    package: str | None  # the instrumentation's distribution; None where the framework traces itself
    turn_on: str  # what turns it on, as docs/runtimes.md shows it


def _openinference(extra: str, module: str, instrumentor: str) -> Instrumentation:
    package = f"openinference-instrumentation-{module.replace('_', '-')}"
    turn_on = f"{instrumentor}().instrument(tracer_provider=provider) from openinference.instrumentation.{module}"
    return Instrumentation(extra, package, turn_on)


INSTRUMENTATIONS: dict[str, Instrumentation] = {
    "langchain": _openinference("langchain", "langchain", "LangChainInstrumentor"),
    "openai-agents": _openinference("openai-agents", "openai_agents", "OpenAIAgentsInstrumentor"),
    "crewai": _openinference("crewai", "crewai", "CrewAIInstrumentor"),
    "smolagents": _openinference("smolagents", "smolagents", "SmolagentsInstrumentor"),
    "llama-index": _openinference("llama-index", "llama_index", "LlamaIndexInstrumentor"),
    "haystack": _openinference("haystack", "haystack", "HaystackInstrumentor"),
    "autogen": Instrumentation(
        "autogen",
        "openinference-instrumentation-openai",
        "trace.set_tracer_provider(provider) (AutoGen traces itself) and OpenAIInstrumentor().instrument("
        "tracer_provider=provider) from openinference.instrumentation.openai",
    ),
    "pydantic-ai": Instrumentation(
        "pydantic-ai", None, "Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))"
    ),
    "strands": Instrumentation("strands", None, "trace.set_tracer_provider(provider) before the first agent"),
    "google-adk": Instrumentation("google-adk", None, "trace.set_tracer_provider(provider) before the first agent"),
}


class _Watch:
    __slots__ = ("requests", "seen", "warned")

    def __init__(self) -> None:
        self.requests = 0
        self.seen = False
        self.warned = False


_lock = threading.Lock()
_watches: dict[str, _Watch] = {}


def warning_text(framework: str) -> str:
    known = INSTRUMENTATIONS.get(framework)
    if known is None:
        fix = "turn on the framework's tracing on the guard's tracer provider"
    elif known.package is None:
        fix = f"{framework} traces itself: {known.turn_on}"
    else:
        fix = f"install {known.package} (pip install 'otel-repeat-guard[{known.extra}]'), then {known.turn_on}"
    return (
        f"repeat guard: the {framework} adapter ran before {REQUESTS_BEFORE_WARNING} model requests, but no span of "
        f"that run reached the guard, so its tool calls are not counted: {fix} (docs/runtimes.md, "
        "'Turn it on, per framework')"
    )


def model_request(framework: str, run_found: bool) -> None:
    """An adapter of ``framework`` is about to send a model request; ``run_found``: the guard found its run."""
    with _lock:
        watch = _watches.get(framework)
        if watch is None:
            watch = _watches[framework] = _Watch()
        if watch.seen or watch.warned:
            return
        if run_found:
            watch.seen = True
            return
        watch.requests += 1
        if watch.requests < REQUESTS_BEFORE_WARNING:
            return
        watch.warned = True
    logger.warning(warning_text(framework))


def forget() -> None:
    """Start watching afresh (for tests: a process normally warns once per framework)."""
    with _lock:
        _watches.clear()
