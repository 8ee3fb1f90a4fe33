"""AttributeConvention: describe your own harness's spans as data, without writing a class."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from otel_repeat_guard.conventions.base import (
    MISSING,
    AgentRun,
    EventLike,
    ToolCall,
    first_present,
    str_or_none,
)

SpanPredicate: TypeAlias = Callable[[str, Mapping[str, Any]], object]
"""A predicate answers anything with a truth: ``attributes.get("my.is_tool")`` will do (None is false). Typed
``object``, not ``bool``: the compiled build checks a declared ``bool`` and would reject every other answer."""
SpanMatcher: TypeAlias = str | Mapping[str, Any] | SpanPredicate
"""Which spans qualify: a span-name prefix, attribute values that must all match, or a predicate."""


def _keys(field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{field} must be a sequence of attribute names (e.g. ({value!r},)), got {value!r}")
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str) or not key:
            raise ValueError(f"{field} must hold non-empty attribute names, got {key!r}")
    return keys


class _Matcher:
    """One compiled SpanMatcher; ``prefix`` is set when it matches by span name."""

    __slots__ = ("attributes", "predicate", "prefix")

    def __init__(self, field: str, spec: object) -> None:
        self.prefix: str | None = None
        self.attributes: tuple[tuple[str, Any], ...] = ()
        self.predicate: SpanPredicate | None = None
        if isinstance(spec, str):
            if not spec:
                raise ValueError(f"{field} must be a non-empty span-name prefix, got {spec!r}")
            self.prefix = spec
        elif isinstance(spec, Mapping):
            if not spec or not all(isinstance(k, str) and k for k in spec):
                raise ValueError(f"{field} must map at least one attribute name to its value, got {spec!r}")
            self.attributes = tuple(spec.items())
        elif callable(spec):
            self.predicate = spec
        else:
            raise ValueError(f"{field} must be a name prefix, an attribute mapping or a predicate, got {spec!r}")

    def __call__(self, name: str, attributes: Mapping[str, Any]) -> bool:
        if self.prefix is not None:
            return name.startswith(self.prefix)
        if self.predicate is not None:
            return bool(self.predicate(name, attributes))
        return all(attributes.get(key, MISSING) == value for key, value in self.attributes)

    def rest_of(self, name: str) -> str | None:
        """The span name after the prefix (the tool or agent name), if matching by prefix."""
        return str_or_none(name[len(self.prefix) :].strip()) if self.prefix is not None else None


class AttributeConvention:
    """A convention described declaratively, for harnesses with their own span vocabulary.

    ``tool_span`` says which spans are tool calls: a span-name prefix (``"tool:"``), a
    mapping of attribute values that must all match (``{"my.kind": "tool"}``; put the most
    selective attribute first, it is checked first), or a predicate ``(name, attributes) ->
    bool`` (keep it cheap: it runs on every ending span). The other arguments are attribute
    names, tried in order:

    - ``tool_name``: the tool's name; else the span name after a prefix; else the span name.
    - ``arguments``: the call's arguments (a JSON string or a structured value). When none
      is present the arguments are unknown and the call is never identical to another.
    - ``agent``: an explicit agent key on the tool span. It becomes the chain key, exactly
      like ``gen_ai.agent.id``; without it the agent is found among the span's ancestors.
    - ``agent_name``: a readable agent name on the tool span (defaults to the key).
    - ``error``: attributes whose truthy value marks the call failed or denied (on top of
      span status ERROR, ``error.type`` and ``exception`` events, which always count).
    - ``agent_span``: recognizes agent-run spans among the ancestors (same forms as
      ``tool_span``), with ``agent_span_id`` (a run key) and ``agent_span_name``
      (a readable name; else the span name after a prefix, else the span name).

    Example: spans named ``tool:<name>`` with arguments in ``my.args`` and the agent in
    ``my.agent``::

        AttributeConvention(tool_span="tool:", arguments=("my.args",), agent=("my.agent",))
    """

    __slots__ = (
        "_agent",
        "_agent_name",
        "_agent_span",
        "_agent_span_id",
        "_agent_span_name",
        "_arguments",
        "_error",
        "_tool_name",
        "_tool_span",
    )

    def __init__(  # noqa: PLR0913 - a public constructor: keyword options
        self,
        *,
        tool_span: SpanMatcher,
        tool_name: Sequence[str] = ("gen_ai.tool.name",),
        arguments: Sequence[str] = ("gen_ai.tool.call.arguments",),
        agent: Sequence[str] = (),
        agent_name: Sequence[str] = (),
        error: Sequence[str] = (),
        agent_span: SpanMatcher | None = None,
        agent_span_id: Sequence[str] = (),
        agent_span_name: Sequence[str] = (),
    ) -> None:
        self._tool_span = _Matcher("tool_span", tool_span)
        self._tool_name = _keys("tool_name", tool_name)
        self._arguments = _keys("arguments", arguments)
        self._agent = _keys("agent", agent)
        self._agent_name = _keys("agent_name", agent_name)
        self._error = _keys("error", error)
        self._agent_span = None if agent_span is None else _Matcher("agent_span", agent_span)
        self._agent_span_id = _keys("agent_span_id", agent_span_id)
        self._agent_span_name = _keys("agent_span_name", agent_span_name)

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        if not self._tool_span(name, attributes):
            return None
        tool = (
            str_or_none(first_present(attributes, self._tool_name))
            or self._tool_span.rest_of(name)
            or (None if self._tool_span.prefix is not None else str_or_none(name))
        )
        if tool is None:
            return None
        agent_id = str_or_none(first_present(attributes, self._agent))
        return ToolCall(
            tool_name=tool,
            arguments=first_present(attributes, self._arguments),
            agent_id=agent_id,
            agent_name=str_or_none(first_present(attributes, self._agent_name)) or agent_id,
            error=bool(self._error) and any(attributes.get(key) for key in self._error),
        )

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        matcher = self._agent_span
        if matcher is None or not matcher(name, attributes):
            return None
        agent_name = (
            str_or_none(first_present(attributes, self._agent_span_name)) or matcher.rest_of(name) or str_or_none(name)
        )
        return AgentRun(agent_id=str_or_none(first_present(attributes, self._agent_span_id)), agent_name=agent_name)
