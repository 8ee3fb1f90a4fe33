"""An agent run as the guard keys it (:class:`Run`): the value :mod:`otel_repeat_guard.spans.runs` resolves a span
to, and every chain, event and fact names."""

from __future__ import annotations

from typing import Any, Final

from otel_repeat_guard.core.facts import run_facts

AGENT_ID_RUN: Final = "agent_id_run"
"""``Run.how`` of a call naming its agent's id, counted in the enclosing run of that agent (agents.py)."""
BAGGAGE: Final = "baggage"
"""``Run.how`` of a run named by a remote parent's baggage."""


class Run:
    """An agent run as the guard keys it: a value (compared and hashed by its fields), never changed once made.

    A plain class, not a named tuple: the compiled build makes it natively (a call naming its agent's id
    makes one), where a named tuple's ``__new__`` stays interpreted.

    - ``key``: the chain key: what ``reset``, ``forget``, ``Reminder.agent_id`` and the events carry.
    - ``name``: a readable name (the agent's, else the run span's).
    - ``span_id``: the span that stands for the run, when it was found through one.
    - ``agent_id``: the ``gen_ai.agent.id`` the run span carried, if any.
    - ``how``: how it was resolved: ``agent_id`` (on the tool span), ``agent_id_run`` (on the tool span, counted
      in the enclosing run of that agent), ``agent_span``, ``enclosing_span``, ``local_root``, or ``baggage``
      (named by the baggage of a remote parent).
    """

    __slots__ = ("_kept_facts", "agent_id", "how", "key", "name", "span_id")

    def __init__(
        self,
        key: str,
        name: str | None,
        span_id: int | None = None,
        agent_id: str | None = None,
        how: str = "agent_span",
    ) -> None:
        self.key = key
        self.name = name
        self.span_id = span_id
        self.agent_id = agent_id
        self.how = how
        self._kept_facts: dict[str, Any] | None = None

    def _fields(self) -> tuple[str, str | None, int | None, str | None, str]:
        return self.key, self.name, self.span_id, self.agent_id, self.how

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        key, name, span_id, agent_id, how = self._fields()
        return f"Run(key={key!r}, name={name!r}, span_id={span_id!r}, agent_id={agent_id!r}, how={how!r})"

    @property
    def address(self) -> str:
        """Whom its events and reminders name (``Reminder.agent_id``): the chain key, or the agent id that a
        call counted in its agent's run named, as the harness that tagged it asks."""
        return self.agent_id if self.how == AGENT_ID_RUN and self.agent_id is not None else self.key

    @property
    def facts(self) -> dict[str, Any]:
        """What every span of the run carries (:func:`otel_repeat_guard.core.facts.run_facts`): a new dict."""
        return run_facts(self.key, self.name)

    def named_by(self, agent_id: str) -> Run:
        """This run as the run of a call that names its agent's id (``how`` ``agent_id_run``): the same key and
        name, so the same facts, kept once for both."""
        run = Run(self.key, self.name, self.span_id, agent_id, AGENT_ID_RUN)
        run._kept_facts = self.kept_facts
        return run

    @property
    def kept_facts(self) -> dict[str, Any]:
        """:attr:`facts` made once and shared by the run's calls: for a decision that adds nothing to them, so
        never to be written to (a span's attributes take a copy)."""
        kept = self._kept_facts
        if kept is None:
            kept = self._kept_facts = run_facts(self.key, self.name)
        return kept
