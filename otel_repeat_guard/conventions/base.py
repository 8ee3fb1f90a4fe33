"""The convention interface and the helpers every built-in vocabulary shares.

A convention sees only a span's name, attributes and events (plain Python values, no
OpenTelemetry types), so adding support for another instrumentation is one small class,
not an edit across the processor.

Performance contract: the processor asks every convention about every span that ends, so
``tool_call`` must reject a span that is not one of its tool spans with one or two dict
lookups (check the discriminating attribute, or the name, first) and must not iterate
``events`` before it knows the span is a tool span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, NamedTuple, Protocol

from opentelemetry.trace import StatusCode


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""The arguments value of a tool call whose arguments were not recorded."""


class EventLike(Protocol):
    """The part of a span event a convention may read."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, Any] | None: ...


class ToolCall(NamedTuple):
    """One tool call read off a tool span (a named tuple: immutable, and built on every tool span
    at a quarter of a frozen dataclass's cost).

    ``arguments`` is ``MISSING`` when the span recorded none: such a call is never
    identical to another. ``agent_id`` is an explicit agent key on the tool span itself
    (it then is the chain key); leave it None to let the processor find the agent run
    among the span's ancestors. ``error`` says the call failed or was denied by a signal
    of this convention's own; the common ones (span status ERROR and what :func:`failed`
    reads) are checked by the guard and the store themselves, and only for the calls
    where it matters, never on the hot path of every tool span.
    """

    tool_name: str
    arguments: Any = MISSING
    agent_id: str | None = None
    agent_name: str | None = None
    error: bool = False
    call_id: str | None = None
    """The id the model gave the call (``gen_ai.tool.call.id``): joins a tool span without
    arguments to the model request that asked for it."""


class RequestedCall(NamedTuple):
    """One tool call a model asked for, read off its model-call span."""

    call_id: str | None
    tool_name: str
    arguments: Any = MISSING


class Mark(NamedTuple):
    """A span a vocabulary recognizes by one value: of an attribute, or (``key`` None) of the span name."""

    key: str | None
    value: str


class AgentRun(NamedTuple):
    """What an agent-run span says about its agent; both fields may be unknown."""

    agent_id: str | None = None
    agent_name: str | None = None
    nested: bool = False
    """Invoked from inside another invocation of this process (``gen_ai.invocation.is_nested``): a run
    of its own, but no new prompt for its agent (it does not reset the chain of the agent's id)."""


class Convention(Protocol):
    """Reads tool calls and agent runs in one instrumentation's vocabulary."""

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        """The tool call if this span is a tool span in this convention, else None."""
        ...

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        """The agent if this span is an agent-run span in this convention, else None."""
        ...


def str_or_none(value: object) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


TOOL_NAME_KEYS: Final[tuple[str, ...]] = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
"""A tuple of any length: compiled, looped over in place (a fixed-length one is boxed anew for each loop)."""
EXECUTE_TOOL_PREFIX: Final = "execute_tool "
"""A GenAI tool span's name before its tool's (``tool_name``'s last resort)."""


def tool_name(name: str, attributes: dict[str, Any]) -> str | None:
    """The tool's name: ``gen_ai.tool.name``, ``tool.name``, ``traceloop.entity.name``, then the span name."""
    for key in TOOL_NAME_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    if name.startswith(EXECUTE_TOOL_PREFIX):
        return name[len(EXECUTE_TOOL_PREFIX) :].strip() or None
    return None


def first_present(attributes: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of ``keys`` present in ``attributes``, else ``MISSING``."""
    for key in keys:
        value = attributes.get(key, MISSING)
        if value is not MISSING:
            return value
    return MISSING


def event_name(event: object) -> Any:
    """An event's name, compared as it is: the SDK never checks that it is a string, and mypyc, reading it as
    the ``str`` ``EventLike`` declares, would raise ``TypeError`` (so the compiled build would lose the call)."""
    return getattr(event, "name", None)


def failed(attributes: Mapping[str, Any], events: Sequence[EventLike]) -> bool:
    """Whether a tool span says its call failed or was denied (span status aside).

    ``error.type`` (OTel), ``gen_ai.tool.status == "error"`` (strands-agents),
    ``gen_ai.task.status == "failure"`` (OpenLLMetry) or an ``exception`` event.
    """
    if "error.type" in attributes:
        return True
    if attributes.get("gen_ai.tool.status") == "error" or attributes.get("gen_ai.task.status") == "failure":
        return True
    # len() first: iterating the SDK's event list copies it under a lock, and most spans have none
    return bool(len(events)) and any(event_name(event) == "exception" for event in events)


def call_failed(
    said: bool, status: StatusCode | None, attributes: Mapping[str, Any], events: Sequence[EventLike]
) -> bool:
    """The one rule for whether a tool or model call failed: its reader ``said`` so, its span's ``status`` is
    ERROR, or what the span carries says so (:func:`failed`)."""
    return said or status is StatusCode.ERROR or failed(attributes, events)


RawToolCall = tuple[str, Any, str | None, str | None, bool, str | None]
"""A tool call's fields as a plain tuple, in :class:`ToolCall`'s order (a ``ToolCall`` is one).

The built-in conventions read spans into these on the hot path: building a named tuple
costs more than reading the span."""


class SpanReader:
    """What reads a tool span of one shape: one signature, implemented by each built-in vocabulary, by a user
    convention's guard (its answers held to :class:`ToolCall`'s types) and by the reader that asks several in
    turn. The router picks one per span shape, once (CPython's ``make_scanner``: implementations of one signature,
    never "ask the other one"); compiled, its ``read`` is a native call."""

    __slots__ = ()

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        """The span's tool call as a plain tuple, in :class:`ToolCall`'s order, if it is a tool span this reader
        knows, else None. ``attributes`` is the span's own ``dict`` (:mod:`otel_repeat_guard.spans.span_events` reads
        it): compiled, a reader's lookups are then the dict's own, not a generic ``Mapping`` method call each."""
        raise NotImplementedError


class BuiltInConvention(SpanReader):
    """A built-in vocabulary: ``read`` gives the hot path a plain tuple, ``tool_call`` the public
    :class:`ToolCall`.

    Its marks are data: ``tool_marks`` say which spans are its tool spans, ``model_marks``
    which are model calls. The router that sends each span to the right readers is built
    from these declarations (see :func:`otel_repeat_guard.conventions.span_router`), so
    ``read`` and ``requested_calls`` only ever see spans that carry one of their marks.
    ``model_request_keys`` name attributes only a model call's span carries, which some
    instrumentations set when the call starts and the model mark only at its end: an open
    span with one of them is a model call when the run resolver asks (a model call nested
    in it belongs to the run above it, not to it).

    Two more declarations say what the marks alone get wrong about a span shape, by how span
    names end (a class's method, whatever the class): ``not_model_names``, spans that carry a
    model mark but call no model; ``step_names``, per-step spans that hold a run's model calls
    while its tool calls run in a sibling step (the resolver climbs past them: never the run).
    ``issues_while_open`` names (whole) the model calls whose tool spans may end while they are still
    open (a streamed step running each tool as its call arrives, or clocks too coarse to order them): a
    tool span of the run that ends while one is open, started after it, was issued by it, not by the
    run's last model call to end.
    """

    __slots__ = ()
    tool_marks: ClassVar[tuple[Mark, ...]] = ()
    model_marks: ClassVar[tuple[Mark, ...]] = ()
    model_request_keys: ClassVar[tuple[str, ...]] = ()
    not_model_names: ClassVar[tuple[str, ...]] = ()
    step_names: ClassVar[tuple[str, ...]] = ()
    issues_while_open: ClassVar[tuple[str, ...]] = ()
    agent_id_marks: ClassVar[tuple[Mark, ...]] = ()
    """The attribute marks of the spans whose ``gen_ai.agent.id`` its ``agent_run`` reads as the run's agent id."""
    agent_id_name_starts: ClassVar[tuple[str, ...]] = ()
    """How the names of such spans start, for spans that carry their mark only at their end."""

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        raw = self.read(name, attributes if isinstance(attributes, dict) else dict(attributes), events)
        return None if raw is None else ToolCall(*raw)

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        """The tool calls a model-call span of this vocabulary says the model asked for, in order."""
        return []

    def tool_responses(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> dict[str, Any]:
        """The tool results a model-call span of this vocabulary carries back to the model, by call id."""
        return {}


def call_id_of(attributes: dict[str, Any]) -> str | None:
    """The model's id for a tool call on its tool span: ``gen_ai.tool.call.id``, else OpenInference's ``tool_call.id``."""
    value = attributes.get("gen_ai.tool.call.id") or attributes.get("tool_call.id")
    return value if type(value) is str else None  # on every tool span: no further call


def gen_ai_agent(attributes: dict[str, Any]) -> tuple[str | None, str | None]:
    """The agent id and name that ``gen_ai.agent.*`` attributes on a tool span itself give."""
    return str_or_none(attributes.get("gen_ai.agent.id")), str_or_none(attributes.get("gen_ai.agent.name"))


def agent_run_key(agent_id: str | None, name: str, span_id: int) -> str:
    """The chain key of an agent run found through its span: its agent id (else its name) plus its
    span id, so that two concurrent runs of one agent (one agent object) never share a chain."""
    return f"{agent_id or name}#{span_id:016x}"


_HEX = frozenset("0123456789abcdef")


def agent_run_label(key: str) -> str | None:
    """The readable part of a key :func:`agent_run_key` built (the agent id or the run's name, before
    ``#<span id>``), for a reader that has the key but not the name; None for any other key."""
    head, sep, span = key.rpartition("#")
    return head if sep and head and len(span) == 16 and _HEX.issuperset(span) else None
