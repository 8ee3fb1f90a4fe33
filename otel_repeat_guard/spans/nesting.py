"""One call, two tool spans: the rule, in one place, that a tool span is the same call as another open one.

When an MCP client and its server run in one process and both are instrumented, one call makes a tool span
on each side. Two shapes:

- **nested**: the server's span inside the client's (a framework's ``execute_tool`` span around the one the
  MCP server's middleware makes; mcp 2.x's built-in spans);
- **beside**: the server's span under a server-side span (span kind SERVER, or OpenLLMetry's
  ``traceloop.span.kind = server``: its ``mcp.server`` span) that is a sibling of the client's open tool span,
  not inside it. OpenLLMetry with FastMCP 2.x in one process: ``mcp.client.session`` holds the client's
  ``<tool>.tool`` and, beside it, ``mcp.server`` > ``<tool>.tool`` for the same call.

The server's span ends first, while the client's is open (their times overlap, in one trace); the client's has
the caller's view (the arguments as the model sent them, the call id), so it is the call of record. The inner
one is not counted, and carries :data:`otel_repeat_guard.core.facts.NESTED` (the call of record's span id):
the store and the ClickHouse reader keep no row for it. They read that fact; they never decide it again.

The same call (:func:`same_call`): the same tool, and the same MCP request id (``mcp.request.id``) where both
spans have one, else the same call id where both have one, else the same arguments where both have them; a
span with none of these is the enclosing call's own execution. Only the open spans below the run's span are
looked at: upward, only the nearest tool span below the run's span (a tool that runs an agent, a run of its
own, or calls another tool is never the same call as the tools called inside it); beside, only a client-side
tool span under the server-side span's parent (the client's session span, which an application often opens
before its agent loop: the server's spans then have the session for their run, the client's the agent loop). Two identical calls made at once by the agent (siblings, no server-side span
between them) stay two calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry.trace import SpanKind

from otel_repeat_guard.conventions import MISSING, RawToolCall
from otel_repeat_guard.core.canonical import arguments_key
from otel_repeat_guard.core.facts import NESTED
from otel_repeat_guard.spans.span_events import SPAN_ID, Attributes, LiveSpan, name_of

MCP_REQUEST_ID: Final = "mcp.request.id"
"""The JSON-RPC id of an MCP request, as OpenLLMetry records it: one call's id on both sides of it."""
SERVER_KIND: Final = "traceloop.span.kind"
MAX_ANCESTRY: Final = 64

ReadTool = Callable[[str, Attributes], RawToolCall | None]


class InnerCall:
    """The call of a tool span that ends, as :func:`same_call` compares it (a plain class: the compiled build
    makes it natively)."""

    __slots__ = ("arguments", "attributes", "call_id", "tool")

    def __init__(self, tool: str, arguments: Any, call_id: str | None, attributes: Mapping[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments
        self.call_id = call_id
        self.attributes = attributes


class OpenSpans:
    """What the rule reads of the run resolver's open spans: the spans (by id), the spans that stand for a run,
    and how an open span reads as a tool call."""

    __slots__ = ("live", "owned", "read_tool")

    def __init__(self, live: Mapping[int, LiveSpan], owned: Mapping[int, object], read_tool: ReadTool) -> None:
        self.live = live
        self.owned = owned
        self.read_tool = read_tool


def same_call(call: InnerCall, outer: RawToolCall, outer_attributes: Mapping[str, Any]) -> bool:
    """Whether ``outer``, the call of another open tool span (with ``outer_attributes``), is ``call``."""
    outer_tool, outer_arguments, _, _, _, outer_call_id = outer
    if outer_tool != call.tool:
        return False
    request = call.attributes.get(MCP_REQUEST_ID)
    outer_request = outer_attributes.get(MCP_REQUEST_ID)
    if request is not None and outer_request is not None:
        return str(request) == str(outer_request)
    if call.call_id is not None and outer_call_id is not None:
        return call.call_id == outer_call_id
    if call.arguments is not MISSING and outer_arguments is not MISSING:
        return arguments_key(call.arguments) == arguments_key(outer_arguments)
    return True


def server_side(kind: SpanKind, attributes: Mapping[str, Any]) -> bool:
    """Whether an open span is a server's side of a request: span kind SERVER, or OpenLLMetry's server span."""
    return kind is SpanKind.SERVER or attributes.get(SERVER_KIND) == "server"


def call_of_record(spans: OpenSpans, parent_id: int, run_span_id: int | None, call: InnerCall) -> int | None:
    """The span id of the open tool span that is the call of record for ``call``, a tool span whose parent is
    ``parent_id`` in the run of span ``run_span_id``: the nearest tool span above it when it is the same call,
    else a client's tool span of the same call beside the server-side span above it; None when there is none."""
    live, owned = spans.live, spans.owned
    span_id = parent_id
    beside: int | None = None  # the parent of the nearest server-side span passed: where the client's span is
    for _ in range(MAX_ANCESTRY):
        ancestor = live.get(span_id)
        if ancestor is None or span_id == run_span_id or span_id in owned:
            break  # the run's span, or another run's: what is above is no call of this one
        _, _, grandparent, kind, attributes = ancestor
        outer = spans.read_tool(live_name(ancestor), attributes)
        if outer is not None:  # the nearest tool span above: the same call, or another that encloses this one
            return span_id if same_call(call, outer, attributes) else None
        if grandparent is None:
            break
        if beside is None and server_side(kind, attributes):
            beside = grandparent[SPAN_ID]
        span_id = grandparent[SPAN_ID]
    return None if beside is None else _client_span_under(spans, beside, run_span_id, call)


def _client_span_under(spans: OpenSpans, common: int, run_span_id: int | None, call: InnerCall) -> int | None:
    """An open client-side tool span of ``call`` under the span ``common`` (no server-side span between them)."""
    live = spans.live
    try:
        candidates = list(live.items())  # another thread may open or close spans meanwhile
    except RuntimeError:
        return None
    for span_id, candidate in candidates:
        _, _, parent, kind, attributes = candidate
        if parent is None or server_side(kind, attributes):
            continue
        outer = spans.read_tool(live_name(candidate), attributes)
        if outer is not None and same_call(call, outer, attributes) and _under(spans, parent[SPAN_ID], common):
            return span_id
    return None


def _under(spans: OpenSpans, span_id: int, common: int) -> bool:
    """Whether the open span ``span_id`` is ``common`` or under it, with no server-side span between (an agent's
    run may be: an application opens its MCP client, and the session span, before its agent loop starts)."""
    live = spans.live
    for _ in range(MAX_ANCESTRY):
        if span_id == common:
            return True
        ancestor = live.get(span_id)
        if ancestor is None:
            return False
        _, _, parent, kind, attributes = ancestor
        if parent is None or server_side(kind, attributes):
            return False
        span_id = parent[SPAN_ID]
    return False


def live_name(live: LiveSpan) -> str:
    """An open span's name now (an instrumentation may rename a span while it is open), or at its start if the
    application dropped it unended."""
    reference, started_as, _, _, _ = live
    span = reference()
    return started_as if span is None else name_of(span)


def nested_facts(run_facts: dict[str, Any], outer: int) -> dict[str, Any]:
    """The facts of a tool span whose call of record is the open span ``outer``: its run's, and ``NESTED``."""
    run_facts[NESTED] = f"{outer:016x}"
    return run_facts
