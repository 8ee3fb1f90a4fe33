"""The harness's questions to the guard between spans (:mod:`otel_repeat_guard.decide.harness` asks them): reset or
drop a chain, read its length, find the run of an open span, and count what a run's last step requested before its
next model request goes out. Each answer comes from the parts that own the state; none is decided here again."""

from __future__ import annotations

import logging
from typing import Any

from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.decide.decision import Decision
from otel_repeat_guard.decide.model_calls import ModelCalls
from otel_repeat_guard.decide.shown import ShownReminders
from otel_repeat_guard.spans.agents import AgentChains
from otel_repeat_guard.spans.requested import PendingSteps
from otel_repeat_guard.spans.runs import RunResolver

logger = logging.getLogger("otel_repeat_guard")


class RunQuestions:
    """Answers about runs and their chains, by chain key or ``gen_ai.agent.id`` (see :mod:`otel_repeat_guard.spans.agents`)."""

    __slots__ = ("_agents", "_chains", "_models", "_runs", "_shown", "_steps")

    def __init__(
        self,
        chains: ChainStore,
        shown: ShownReminders,
        steps: PendingSteps,
        agents: AgentChains,
        runs: RunResolver,
        models: ModelCalls,
    ) -> None:
        self._chains, self._shown, self._steps = chains, shown, steps
        self._agents, self._runs, self._models = agents, runs, models

    def harness(self, what: str, agent_id: str) -> None:
        """``reset`` or ``forget`` a chain key, or a ``gen_ai.agent.id`` with the keys of its runs. Never raises."""
        try:
            for key in self._keys_of(agent_id):
                self._shown.settling(key)
                if what == "reset":
                    self._chains.reset(key)
                else:
                    self._chains.forget(key)
                    self._steps.forget(key)
        except Exception:
            logger.exception("repeat guard failed in %s(%r)", what, agent_id)
        self._shown.settling(None)

    def run_length(self, agent_id: str) -> int:
        """The consecutive count of a chain key, or the longest of a ``gen_ai.agent.id``'s runs (see agents.py)."""
        return max(self._chains.run_length(key) for key in self._keys_of(agent_id))

    def _keys_of(self, agent_id: str) -> tuple[str, ...]:
        return (*self._agents.keys(agent_id), *self._runs.runs_of_agent(agent_id))

    def current_run(self, current: Any) -> str | None:
        """The chain key of the run of the open span ``current``, as for a tool span started under it. Never raises."""
        try:
            run = self._runs.resolve(current.get_span_context())
        except Exception:
            logger.exception("repeat guard failed to resolve the current agent run")
            return None
        return None if run is None else run.key

    def model_call_due(self, current: Any) -> tuple[str | None, Decision | None]:
        """A model request is about to go out from the open span ``current``: its run's key, and the calls
        its last step requested that no tool span answered, counted now (see the processor's method)."""
        run = self._runs.resolve(current.get_span_context())  # as for a tool span started here
        if run is None:
            return None, None
        return run.key, (self._models.count_unanswered(run) if self._steps.any_step() else None)
