"""How tool calls and agents are read from span data, one vocabulary per module.

The default set covers the OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry
(Traceloop), pydantic-ai's format 2 and the Vercel AI SDK's ``ai.*`` spans. Pass ``conventions=[...]`` to
``RepeatGuardSpanProcessor`` to add your own, e.g. an :class:`AttributeConvention`, or
any object with the :class:`Convention` methods: ``[my_convention, *DEFAULT_CONVENTIONS]``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_repeat_guard.conventions.base import (
    MISSING,
    AgentRun,
    BuiltInConvention,
    Convention,
    EventLike,
    Mark,
    RawToolCall,
    RequestedCall,
    SpanReader,
    ToolCall,
    agent_run_key,
    agent_run_label,
    failed,
    str_or_none,
)
from otel_repeat_guard.conventions.declarative import AttributeConvention, SpanMatcher
from otel_repeat_guard.conventions.genai import AGENT_ID as AGENT_ID_KEY
from otel_repeat_guard.conventions.genai import GenAIConvention
from otel_repeat_guard.conventions.openinference import OpenInferenceConvention
from otel_repeat_guard.conventions.pydantic_ai import PydanticAIV2Convention
from otel_repeat_guard.conventions.traceloop import TraceloopConvention, unwrap_langchain_inputs
from otel_repeat_guard.conventions.vercel_ai import VercelAIConvention

DEFAULT_CONVENTIONS: tuple[Convention, ...] = (
    PydanticAIV2Convention(),  # by span name only; before GenAI, whose attributes its tool spans also carry
    TraceloopConvention(),  # before GenAI: OpenLLMetry's gen_ai.tool.call.arguments is a wrapper to unwrap
    GenAIConvention(),
    OpenInferenceConvention(),
    VercelAIConvention(),  # by span name only: its spans carry no other vocabulary's marks
)
"""Every built-in vocabulary, in the order they are asked (the first that recognizes a span wins)."""


logger = logging.getLogger("otel_repeat_guard")
_warned: set[int] = set()  # the user conventions that answered outside their contract, each said once

ToolCallReader = Callable[[str, Mapping[str, Any], Sequence[EventLike]], RawToolCall | None]
RequestReader = Callable[[str, Mapping[str, Any], Sequence[EventLike]], list[RequestedCall]]


def find_tool_call(
    conventions: Sequence[Convention], name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
) -> ToolCall | None:
    """The tool call read by the first convention that recognizes the span, if any."""
    for convention in conventions:
        call = convention.tool_call(name, attributes, events)
        if call is not None:
            return call
    return None


def find_agent_run(conventions: Sequence[Convention], name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
    """The agent run read by the first convention that recognizes the span, if any (a user's convention's
    answer held to :class:`AgentRun`'s types, see :func:`sound_agent_run`)."""
    for convention in conventions:
        read: Any = convention.agent_run  # Any: its answer is checked here, not by a cast that raises
        run = read(name, attributes)
        if run is not None:
            return run if isinstance(convention, BuiltInConvention) else sound_agent_run(convention, run)
    return None


def _odd(convention: object, answer: object, what: str) -> None:
    if id(convention) not in _warned:
        _warned.add(id(convention))
        kind = type(convention).__name__
        logger.warning("convention %s answered %r, not %s: ignored (said once per convention)", kind, answer, what)


def sound_agent_run(convention: object, run: object) -> AgentRun | None:
    """A user convention's ``agent_run`` answer as :class:`AgentRun` declares it, alike on both builds: an id
    or name that is not a non-empty string is unknown; an answer that is no ``AgentRun`` is none (warned once)."""
    if not isinstance(run, tuple) or len(run) != 3:
        _odd(convention, run, "an AgentRun")
        return None
    agent_id, agent_name, nested = run
    sound = AgentRun(str_or_none(agent_id), str_or_none(agent_name), nested is True)
    return run if isinstance(run, AgentRun) and run == sound else sound


class _SoundToolCalls(SpanReader):
    """A user convention's ``tool_call`` with its answer held to :class:`ToolCall`'s types, alike on both builds
    (compiled, a wrong type would raise ``TypeError`` where Python duck-types): a tool name that is not a
    non-empty string makes no call (warned once), an agent id, agent name or call id that is not one is unknown."""

    def __init__(self, convention: object, read: Callable[..., Any]) -> None:
        self._convention, self._read = convention, read

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        call = self._read(name, attributes, events)
        if call is None:
            return None
        if not isinstance(call, tuple) or len(call) != 6 or not isinstance(call[0], str) or not call[0]:
            _odd(self._convention, call, "a ToolCall with a tool name")
            return None
        tool, arguments, agent_id, agent_name, error, call_id = call
        return tool, arguments, str_or_none(agent_id), str_or_none(agent_name), error is True, str_or_none(call_id)


def _only_built_in(conventions: Sequence[Convention]) -> bool:
    return all(isinstance(convention, BuiltInConvention) for convention in conventions)


class SpanRouter:
    """Which conventions may read a span, from the marks they declare (see :class:`BuiltInConvention`).

    ``route(name, attributes)`` answers a bit mask: bit ``k`` when the span carries a tool mark
    of ``conventions[k]``, bit ``len(conventions) + k`` for a model-call mark. It is 0 for nearly
    every span, at the cost of one dict lookup per marked attribute. A convention that declares
    no marks (a user's own) is asked about every span, as :func:`find_tool_call` would. A span
    whose name ends as one of a convention's ``not_model_names`` carries none of its model bits.
    """

    __slots__ = (
        "_agent_ids_declared",
        "_agent_starts",
        "_always",
        "_by_attribute",
        "_by_name",
        "_models",
        "_not_model_bits",
        "_not_models",
        "_request_keys",
        "_tools",
        "agent_bit",
        "conventions",
        "issues_while_open",
        "model_bits",
        "tool_bits",
    )

    def __init__(self, conventions: Sequence[Convention]) -> None:
        self.conventions = tuple(conventions)
        count = len(self.conventions)
        self.tool_bits = (1 << count) - 1
        self.model_bits = self.tool_bits << count
        self._always = 0
        by_name: dict[str, int] = {}
        by_attribute: dict[str, dict[str, int]] = {}
        for k, convention in enumerate(self.conventions):
            tool_marks = getattr(convention, "tool_marks", None)
            if tool_marks is None:
                self._always |= 1 << k
            for bit, marks in ((1 << k, tool_marks or ()), (1 << (count + k), getattr(convention, "model_marks", ()))):
                for key, value in marks:
                    table = by_name if key is None else by_attribute.setdefault(key, {})
                    table[value] = table.get(value, 0) | bit
        self.agent_bit = 1 << (2 * count)
        """Set for a span carrying an attribute mark of a convention's ``agent_id_marks``: read in the same pass as
        the tool and model marks, for :meth:`may_name_agent_id`."""
        self._agent_ids_declared = _only_built_in(self.conventions)  # a user's agent_run: no marks to go by
        for convention in self.conventions:
            for key, value in getattr(convention, "agent_id_marks", ()):
                if key is not None:  # attribute marks; names are agent_id_name_starts
                    table = by_attribute.setdefault(key, {})
                    table[value] = table.get(value, 0) | self.agent_bit
        self._agent_starts = tuple(
            start for convention in self.conventions for start in getattr(convention, "agent_id_name_starts", ())
        )
        self._by_name = by_name
        self._by_attribute = tuple(by_attribute.items())
        keys = (key for convention in self.conventions for key in getattr(convention, "model_request_keys", ()))
        self._request_keys = tuple(dict.fromkeys(keys))
        self._not_models = tuple(
            (1 << (count + k), endings)
            for k, convention in enumerate(self.conventions)
            if (endings := tuple(getattr(convention, "not_model_names", ())))
        )
        self._not_model_bits = sum(bit for bit, _ in self._not_models)
        self.issues_while_open = frozenset(
            name for convention in self.conventions for name in getattr(convention, "issues_while_open", ())
        )
        """The names of model calls that issue tool calls while open (see :class:`BuiltInConvention`)."""
        self._tools: dict[int, SpanReader | None] = {}
        self._models: dict[int, RequestReader | None] = {}

    def route(self, name: str, attributes: dict[str, Any]) -> int:
        """The span's bit mask. ``attributes`` is the plain dict :mod:`otel_repeat_guard.spans.span_events` reads (a dict's
        lookups compile to the dict's own; a Mapping's, to a generic method call per mark)."""
        mask = self._always | self._by_name.get(name, 0)
        for key, values in self._by_attribute:
            value = attributes.get(key)
            if value is not None and isinstance(value, str):  # absent first; isinstance is native when compiled
                mask |= values.get(value, 0)
        if mask & self._not_model_bits:  # only a span with the model mark of a convention that declares names
            for bit, endings in self._not_models:
                if mask & bit and name.endswith(endings):
                    mask &= ~bit
        return mask

    def may_name_agent_id(self, name: str, attributes: dict[str, Any], mask: int) -> bool:
        """False when no convention would read an agent id off a span that ``route`` answered ``mask`` for, from the
        marks the built-in conventions declare beside their ``agent_run`` (``agent_id_marks``,
        ``agent_id_name_starts``); always True with a convention of the user's in the set (what its ``agent_run``
        reads is unknown)."""
        if not self._agent_ids_declared:
            return True
        if AGENT_ID_KEY not in attributes:  # the only attribute a built-in convention reads an agent id from
            return False
        return bool(mask & self.agent_bit) or name.startswith(self._agent_starts)

    def is_model_call(self, name: str, attributes: dict[str, Any]) -> bool:
        """Whether an open span is a model call: it carries a model mark, or an attribute only a model call's
        span carries (``model_request_keys``: an instrumentation that sets the mark only at the span's end)."""
        if self.route(name, attributes) & self.model_bits:
            return True
        if not any(key in attributes for key in self._request_keys):
            return False
        return not any(name.endswith(endings) for _, endings in self._not_models)  # marked but calls no model

    def tool_readers(self) -> tuple[SpanReader | None, ...]:
        """Per tool mask, the one reader of a span with those tool marks (:meth:`tool_reader`): picked by an index."""
        return tuple(self.tool_reader(mask) for mask in range(self.tool_bits + 1))

    def open_tool_reader(self) -> Callable[[str, dict[str, Any]], RawToolCall | None]:
        """An open span's tool call, if it is a tool span by what it carries so far (its events are not read)."""
        readers, route, bits = self.tool_readers(), self.route, self.tool_bits

        def read(name: str, attributes: dict[str, Any]) -> RawToolCall | None:
            reader = readers[route(name, attributes) & bits]
            return None if reader is None else reader.read(name, attributes, ())

        return read

    def tool_reader(self, mask: int) -> SpanReader | None:
        """One reader asking, in their configured order, the conventions whose tool bits are in ``mask``."""
        mask &= self.tool_bits
        if mask in self._tools:
            return self._tools[mask]
        readers: tuple[SpanReader, ...] = tuple(
            c if isinstance(c, BuiltInConvention) else _SoundToolCalls(c, c.tool_call)
            for k, c in enumerate(self.conventions)
            if mask >> k & 1
        )
        reader = self._tools[mask] = _first_of(readers)
        return reader

    def request_reader(self, mask: int) -> RequestReader | None:
        """One reader of the tool calls requested on a model-call span with the model bits of ``mask``."""
        mask = (mask & self.model_bits) >> len(self.conventions)
        if mask in self._models:
            return self._models[mask]
        readers: tuple[RequestReader, ...] = tuple(
            c.requested_calls for k, c in enumerate(self.conventions) if mask >> k & 1 and hasattr(c, "requested_calls")
        )

        def first_nonempty(
            name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
        ) -> list[RequestedCall]:
            for read in readers:
                found = read(name, attributes, events)
                if found:
                    return found
            return []

        reader = self._models[mask] = first_nonempty if readers else None
        return reader

    def tool_responses(
        self, mask: int, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> dict[str, Any]:
        """The tool results a model-call span with the model bits of ``mask`` carries back to the model, by
        call id (:mod:`~otel_repeat_guard.conventions.responses`); read only for runs whose calls await them."""
        bits = (mask & self.model_bits) >> len(self.conventions)
        for k, convention in enumerate(self.conventions):
            if bits >> k & 1 and hasattr(convention, "tool_responses"):
                found: dict[str, Any] = convention.tool_responses(name, attributes, events)
                if found:
                    return found
        return {}


def tool_call_reader(conventions: Sequence[Convention]) -> ToolCallReader:
    """:func:`find_tool_call` over ``conventions`` for the hot path, answering a plain tuple.

    Built from the conventions' declared marks (:class:`SpanRouter`): only the conventions
    whose tool-span mark the span carries are asked, in their configured order.
    """
    router = SpanRouter(conventions)
    readers = router.tool_readers() if len(conventions) <= 8 else ()
    route = router.route

    def read(name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        held = attributes if isinstance(attributes, dict) else dict(attributes)  # what the readers take
        mask = route(name, held) & router.tool_bits
        if not mask:
            return None
        reader = readers[mask] if readers else router.tool_reader(mask)
        return None if reader is None else reader.read(name, held, events)

    return read


def _first_of(readers: tuple[SpanReader, ...]) -> SpanReader | None:
    """One reader asking ``readers`` in turn; None for none."""
    if len(readers) <= 1:
        return readers[0] if readers else None
    return _FirstOf(readers)


class _FirstOf(SpanReader):
    """The first call any of ``readers`` reads, asked in their configured order."""

    def __init__(self, readers: tuple[SpanReader, ...]) -> None:
        self._readers = readers

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        for reader in self._readers:
            call = reader.read(name, attributes, events)
            if call is not None:
                return call
        return None


__all__ = [
    "DEFAULT_CONVENTIONS",
    "MISSING",
    "AgentRun",
    "AttributeConvention",
    "Convention",
    "EventLike",
    "GenAIConvention",
    "Mark",
    "OpenInferenceConvention",
    "PydanticAIV2Convention",
    "RawToolCall",
    "RequestReader",
    "RequestedCall",
    "SpanMatcher",
    "SpanReader",
    "SpanRouter",
    "ToolCall",
    "ToolCallReader",
    "TraceloopConvention",
    "VercelAIConvention",
    "agent_run_key",
    "agent_run_label",
    "failed",
    "find_agent_run",
    "find_tool_call",
    "tool_call_reader",
    "unwrap_langchain_inputs",
]
