"""The chains of an agent named by ``gen_ai.agent.id``.

The id names an agent, not a run (the GenAI conventions: its stable identity). A call that names it
is counted in the run of that agent that encloses it, so two concurrent runs of one agent never share
a chain; a call with no such run around it (a harness that tags bare tool spans with its agent's id)
is counted under the id itself.

A harness that tags its calls with the id asks by that id too (``run_length``, ``reset``, ``forget``).
So the run whose calls named the id **outlives its span**: its chain stays until the agent's next run
starts, as a chain keyed by the id always did, and the id's questions reach it and the agent's open runs.
A run whose calls never named the id ends with its span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanContext

from otel_repeat_guard.conventions.base import gen_ai_agent
from otel_repeat_guard.core.facts import WRAPPER
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.spans.run import AGENT_ID_RUN, Run
from otel_repeat_guard.spans.runs import RunResolver
from otel_repeat_guard.spans.span_events import SPAN_ID


def run_of_agent(enclosing: Run | None, agent_id: str, agent_name: str | None) -> Run:
    """The run of a span that names its agent (``gen_ai.agent.id``, the stable identity of an agent): the
    run of that agent that encloses it, so concurrent runs of one agent never share a chain; else, for a
    harness that tags bare spans with its agent's id, the id itself."""
    if enclosing is not None and enclosing.agent_id == agent_id:
        return enclosing.named_by(agent_id)
    return Run(agent_id, agent_name or agent_id, how="agent_id")


class AgentChains:
    """Which run keys an agent id's questions reach, and when a run whose calls named the id is over."""

    __slots__ = ("_lasting", "_max_runs", "_named", "_runs")

    def __init__(self, max_runs: int, runs: RunResolver) -> None:
        self._max_runs = max_runs
        self._runs = runs  # the open runs, read to find the one a call belongs to
        self._named: dict[str, Run] = {}  # open run key -> that run as its calls that named the id are counted in
        self._lasting: dict[str, str] = {}  # agent id -> the key of its last ended run, kept until its next run

    def run_of(self, parent: SpanContext | None, agent_id: str | None, agent_name: str | None) -> Run | None:
        """The run of a tool span under ``parent`` that names ``agent_id`` (if any): that agent's run enclosing it
        (noted, its chain outliving its span; made once per run), else the id's own; with no id, (nearly always)
        the span straight above it that stands for a run (one lookup), else what the resolver finds among its
        ancestors."""
        if agent_id:
            enclosing = self.run_of(parent, None, None) if parent else None
            named = None if enclosing is None else self._named.get(enclosing.key)
            if named is not None and named.agent_id == agent_id:
                return named
            of_agent = run_of_agent(enclosing, agent_id, agent_name)
            if of_agent.how == AGENT_ID_RUN:
                self.named(of_agent)  # its chain outlives its span, as the id's would
            return of_agent
        runs = self._runs
        run = runs.owner(parent[SPAN_ID]) if parent is not None else None
        return run if run is not None else runs.resolve(parent)

    def named(self, run: Run) -> None:
        """A call naming its agent's id was counted in ``run``, that agent's run."""
        if run.agent_id is not None and run.key not in self._named:
            put_bounded(self._named, run.key, run, self._max_runs)

    def ended(self, run: Run) -> str | None:
        """``run``'s span ended: the key whose state is over now (the run's own, or for a run whose calls
        named the id, the agent's previous ended run, if any)."""
        named = self._named.pop(run.key, None) if self._named else None
        if named is None or named.agent_id is None:
            return run.key
        agent_id = named.agent_id
        previous = self._lasting.pop(agent_id, None)
        put_bounded(self._lasting, agent_id, run.key, self._max_runs)
        return previous

    def started(self, agent_id: str) -> str | None:
        """A run of ``agent_id`` starts (a new prompt): the key of its last ended run, over now."""
        return self._lasting.pop(agent_id, None) if self._lasting else None

    def after_fork(self) -> None:
        """In a forked child: no run (they were the parent's, and their chains are gone with them)."""
        self._named.clear()
        self._lasting.clear()

    def keys(self, agent_id: str) -> tuple[str, ...]:
        """The chain keys the id's questions reach besides its open runs: the id's own, and its last ended run's."""
        lasting = self._lasting.get(agent_id) if self._lasting else None
        return (agent_id,) if lasting is None else (agent_id, lasting)


def model_facts(run: Run, attributes: dict[str, Any], wrapper: bool = False) -> dict[str, Any]:
    """A model span's run (``run``, resolved through its ancestors), as its tool spans are keyed: by its own
    ``gen_ai.agent.id`` when it has one and no run of that agent encloses it; and ``WRAPPER`` when it only
    wraps the model call of record (see :data:`otel_repeat_guard.core.facts.WRAPPER`)."""
    agent_id, name = gen_ai_agent(attributes)  # as a tool span's are read
    if agent_id is not None:
        run = run_of_agent(run, agent_id, name)
    if not wrapper:
        return (
            run.kept_facts
        )  # the run's shared dict: nothing adds to a model span's facts (a span's attributes copy it)
    facts = run.facts
    facts[WRAPPER] = True
    return facts
