"""Which agent run a span belongs to: live-span bookkeeping and the run resolver.

The guard keys each chain by agent run. A tool span rarely says its run; its ancestors do.
The resolver keeps the open spans of this process (from ``on_start``, bounded, dropped at
their end) so it can walk a span's ancestors on whichever thread the span ends, and finds,
nearest first:

1. an **agent-run ancestor** (any convention's ``agent_run``): its key is its
   ``gen_ai.agent.id`` or its name, joined with its span id (:func:`agent_run_key`), so two
   concurrent runs of one agent object never share a chain;
2. else the nearest ancestor that **encloses the run's model calls**: every model-call span
   marks its live ancestors when it starts (a model-call span itself is never marked, so a
   client call nested in a framework's model span still finds the run; an ancestor is a model
   call by its model mark, or by an attribute only a model call carries, which some
   instrumentations set before the mark: :meth:`SpanRouter.is_model_call`), so two runs under
   one outer span (an HTTP request serving several runs, a trace around a batch) get two chains;
3. else the **local root**, the top of the span's live ancestor chain that is not an RPC
   client span (a parentless ``MCP send`` span is a call, not an agent loop).

A **per-step span** is never the run, nor is anything under it: a LangGraph node its model call
names, or a span whose name ends as a convention's ``step_names`` (LlamaIndex's ``run_agent_step``,
whose model calls' tools run in a sibling step), so a step's model calls and its tool calls find
the same run above it.

A span with no live parent in this process has no run, unless its parent is **remote** (in
another process) and the W3C baggage it arrived with names the run (``repeat_tool_guard.run``,
:mod:`otel_repeat_guard.spans.baggage`): a worker's tool span then belongs to the agent process's run
(``how="baggage"``), and so does every span under it here, unless an agent-run span nearer to it
stands for a run of its own (the span under the remote parent counts as one only by the attributes
it started with). Such a run is never ended from here (the agent process owns it). The
first answer for an ancestor is kept until that ancestor ends, so a run's key never changes while
it is open.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import Span
from opentelemetry.trace import SpanContext, SpanKind

from otel_repeat_guard.conventions import (
    AgentRun,
    Convention,
    RawToolCall,
    agent_run_key,
    find_agent_run,
)
from otel_repeat_guard.core.rules import evict_oldest
from otel_repeat_guard.spans.nesting import InnerCall, OpenSpans, call_of_record
from otel_repeat_guard.spans.run import BAGGAGE, Run
from otel_repeat_guard.spans.span_events import IS_VALID, SPAN_ID, Attributes, LiveSpan, name_of

logger = logging.getLogger("otel_repeat_guard")
OVERFLOW_WARNING: Final = (
    "repeat guard tracks at most max_live_spans=%d open spans and dropped the oldest: spans that start and never "
    "end, or more open at once. A tool call whose agent-run span was dropped has no run, and is counted as "
    "no_agent. To fix it: end the spans that leak, or raise max_live_spans."
)

_MAX_ANCESTRY: Final = 64
_OUTRANK_ENCLOSING: Final[tuple[str, ...]] = ("agent_span", BAGGAGE)  # any length: not boxed anew per test
"""A run found further up than an enclosing span that still wins: an agent-run span, a remote run's name."""


class RunResolver:
    """Tracks the open spans of this process and answers which run a span belongs to."""

    __slots__ = (
        "_agent_runs",
        "_conventions",
        "_is_model_call",
        "_lock",
        "_on_run_ended",
        "_open",
        "_overflowed",
        "_remote_open",
        "_remote_parent",
        "_steps",
        "live",
        "marked",
        "max_live_spans",
        "owned",
        "wrappers",
    )

    def __init__(
        self,
        conventions: Sequence[Convention],
        max_live_spans: int,
        on_run_ended: Callable[[Run], None],
        is_model_call: Callable[[str, Attributes], bool] = lambda name, attributes: False,
        read_tool: Callable[[str, Attributes], RawToolCall | None] | None = None,
    ) -> None:
        self._conventions = tuple(conventions)
        self.max_live_spans = max_live_spans
        self._on_run_ended = on_run_ended
        self._is_model_call = is_model_call
        self._steps = tuple(ending for c in self._conventions for ending in getattr(c, "step_names", ()))
        """How the names of per-step spans end (every convention's ``step_names``): never the run."""
        self.live: dict[int, LiveSpan] = {}  # what it needs of the open spans of this process, by span id
        self.owned: dict[int, Run] = {}
        """Run span id -> the run it stands for (read directly by the processor's hot path)."""
        self.marked: dict[int, None] = {}  # open spans that enclose a model call (an ordered set)
        self.wrappers: dict[int, None] = {}  # open model-call spans a model call started in (an ordered set)
        self._agent_runs: dict[str, dict[str, None]] = {}  # agent id -> keys of its open runs
        self._remote_parent: dict[int, int] = {}  # open span with a remote parent -> that parent's span id
        self._remote_open: dict[int, int] = {}  # remote parent span id -> its open children here
        self._lock = threading.Lock()
        self._overflowed = False  # the live-span map has passed its bound (warned of once)
        # the open spans as the rule of one call's two tool spans reads them (read_tool: an open span's tool call)
        self._open = None if read_tool is None else OpenSpans(self.live, self.owned, read_tool)

    # -- bookkeeping -------------------------------------------------------------------

    def opened(self, span_id: int, kept: LiveSpan) -> None:
        """A span started: what resolving a run needs of it (not the span, see ``span_events.LiveSpan``). Past
        ``max_live_spans`` open spans, the oldest goes; the first time, a warning says so, since an agent run's span
        dropped leaves its calls with no run."""
        live = self.live
        live[span_id] = kept
        if len(live) > self.max_live_spans:
            evict_oldest(live)
            if not self._overflowed:
                self._overflowed = True
                logger.warning(OVERFLOW_WARNING, self.max_live_spans)

    def closed(self, span_id: int) -> None:
        """A span ended: stop tracking it (it may have been evicted while open, or started before the guard was
        added); if it stood for a run, or enclosed a model call, that run's state ends with it (:meth:`ended`)."""
        key: object = span_id  # boxed once for the three maps (compiled, an ``int`` is boxed at each use)
        try:  # noqa: SIM105 - one lookup; suppress() is a context manager, dict.pop a method call compiled
            del self.live[key]  # type: ignore[arg-type]
        except KeyError:
            pass
        if key in self.owned or (self.marked and key in self.marked):  # nearly always no model call is marked
            self.ended(span_id)

    def agent_id_at_start(self, name: str, attributes: Attributes) -> str | None:
        """The agent id an agent-run span names at its start, if any (each agent run is a new prompt for the chain
        of that id). The guard asks only for a span that starts with attributes and that its router says may name
        one (``SpanRouter.may_name_agent_id``); the processor tells it of every span (:meth:`opened`, :meth:`closed`)."""
        run = find_agent_run(self._conventions, name, attributes)
        if run is not None and not run.nested:  # a nested invocation is no new prompt
            return run.agent_id
        return None

    def ended(self, span_id: int) -> None:
        """Stop tracking a span; if it stood for a run, that run has ended."""
        self.live.pop(span_id, None)
        self.marked.pop(span_id, None)
        run = self.owned.pop(span_id, None)
        if run is not None:
            if run.how == BAGGAGE:  # a span of a remote run: the run goes on, in the agent process
                self._remote_child_ended(span_id)
                return
            if self._remote_parent:  # an agent-run span under a remote parent, say
                self._remote_child_ended(span_id)
            if run.agent_id is not None:
                with self._lock:
                    keys = self._agent_runs.get(run.agent_id)
                    if keys is not None:
                        keys.pop(run.key, None)
                        if not keys:
                            del self._agent_runs[run.agent_id]
            self._on_run_ended(run)

    def after_fork(self) -> None:
        """In a forked child: a fresh lock, no open span and no run (they were the parent's); the conventions stay."""
        self._lock = threading.Lock()
        maps: tuple[dict[Any, Any], ...] = (self.live, self.owned, self.marked, self.wrappers, self._agent_runs)
        for mapping in (*maps, self._remote_parent, self._remote_open):
            mapping.clear()

    def remote_child(self, span: Span, parent: SpanContext, run_key: str, attributes: Mapping[str, Any]) -> None:
        """``span`` started under the remote ``parent``, whose baggage names the run ``run_key``: a span that
        resolves through the span or its parent here belongs to that run, unless the span is an agent run
        itself (by the attributes it started with)."""
        span_id, parent_id = span.context[SPAN_ID], parent[SPAN_ID]
        run = Run(run_key, None, None, None, BAGGAGE)
        agent_run = find_agent_run(self._conventions, name_of(span), attributes) is not None
        owned, children, open_ = self.owned, self._remote_parent, self._remote_open
        with self._lock:
            owned[parent_id] = run  # a tool span whose own parent is the remote one
            if not agent_run:
                owned[span_id] = run  # ended() sees it end, and never ends the run
            children[span_id] = parent_id
            open_[parent_id] = open_.get(parent_id, 0) + 1
            maps: tuple[dict[int, Any], ...] = (owned, children, open_)
            for mapping in maps:
                if len(mapping) > self.max_live_spans:
                    evict_oldest(mapping)

    def _remote_child_ended(self, span_id: int) -> None:
        """A span with a remote parent ended: when it was the parent's last open child here, forget the parent."""
        with self._lock:
            parent_id = self._remote_parent.pop(span_id, None)
            if parent_id is None:
                return
            left = self._remote_open.pop(parent_id, 1) - 1
            if left > 0:
                self._remote_open[parent_id] = left
            else:
                self.owned.pop(parent_id, None)  # the run itself goes on in the agent process

    def mark_model_call(self, parent: SpanContext | None) -> None:
        """A model call starts under ``parent``: its live ancestors enclose a run's model calls."""
        if parent is None:
            return
        live, marked, wrappers = self.live, self.marked, self.wrappers
        span_id = parent[SPAN_ID]
        for _ in range(_MAX_ANCESTRY):
            if span_id in marked:
                return  # marked before, and so are its ancestors
            ancestor = live.get(span_id)
            if ancestor is None:
                return
            _, _, grandparent, _, attributes = ancestor
            into = wrappers if self._is_model_call(_name(ancestor), attributes) else marked
            into[span_id] = None  # a model call nested in another marks it a wrapper instead
            if len(into) > self.max_live_spans:
                evict_oldest(into)
            if grandparent is None:
                return
            span_id = grandparent[SPAN_ID]

    def wraps_model_call(self, span_id: int) -> bool:
        """Whether a model call started inside the ending model-call span ``span_id``: a wrapper of it when
        marked so at that start, or marked as enclosing it when this span was known as a model call only later."""
        wrappers = self.wrappers  # nearly always empty: no call to pop from it
        return (bool(wrappers) and wrappers.pop(span_id, 0) is None) or span_id in self.marked

    def same_call_above(
        self,
        parent: SpanContext | None,
        run: Run,
        tool: str,
        arguments: Any,
        call_id: str | None,
        attributes: Mapping[str, Any],
    ) -> int | None:
        """The span id of the open tool span that is the call of record for a tool span with this parent and
        ``attributes``, within ``run`` (the rule: :func:`otel_repeat_guard.spans.nesting.call_of_record`); None when
        there is none, nearly always at once: the parent is the run's span itself."""
        spans = self._open
        if parent is None or spans is None:
            return None
        span_id, run_span = parent[SPAN_ID], run.span_id
        if (run_span is not None and span_id == run_span) or span_id in self.owned:  # an int compare, compiled
            return None
        return call_of_record(spans, span_id, run_span, InnerCall(tool, arguments, call_id, attributes))

    def owner(self, span_id: int) -> Run | None:
        """The run that the span ``span_id`` stands for, if any."""
        return self.owned.get(span_id)

    def runs_of_agent(self, agent_id: str) -> list[str]:
        """The keys of the open runs whose run span carries ``agent_id``."""
        with self._lock:
            return list(self._agent_runs.get(agent_id, ()))

    # -- resolving ---------------------------------------------------------------------

    def resolve(self, parent: SpanContext | None, step: str | None = None) -> Run | None:
        """The run that a span with this parent belongs to (see the module docstring). ``step`` names the
        per-step spans to climb past (a LangGraph node, which its model call names), as the conventions'
        ``step_names`` do for every span: they are never the run."""
        if parent is None or not parent[IS_VALID]:
            return None
        owned, live, marked = self.owned, self.live, self.marked
        span_id = parent[SPAN_ID] if step is None else self._above_step(parent[SPAN_ID], step)
        enclosing: tuple[int, str] | None = None
        root: tuple[int, str] | None = None
        steps = self._steps
        for _ in range(_MAX_ANCESTRY):
            known = owned.get(span_id)
            if known is not None and (enclosing is None or known.how in _OUTRANK_ENCLOSING):
                return known
            ancestor = live.get(span_id)
            if ancestor is None:
                break
            _, _, grandparent, kind, attributes = ancestor
            name = _name(ancestor)
            if steps and name.endswith(steps):  # a per-step span: the run is above it, and so is what encloses it
                enclosing = None
            else:
                run = find_agent_run(self._conventions, name, attributes)
                if run is not None:
                    return self._own(span_id, run, name)
                if enclosing is None and span_id in marked:
                    enclosing = (span_id, name)
            if kind is not SpanKind.CLIENT:  # an RPC's client span (MCP's "send") is no agent loop
                root = (span_id, name)
            if grandparent is None:
                break
            span_id = grandparent[SPAN_ID]
        if enclosing is not None:
            return self._own(enclosing[0], None, enclosing[1], "enclosing_span")
        if root is not None:
            return self._own(root[0], None, root[1], "local_root")
        return None

    def _above_step(self, span_id: int, step: str) -> int:
        """The parent of the nearest live ancestor named ``step`` (the node a model call ran in, with the spans
        inside it), else ``span_id`` itself."""
        live, at = self.live, span_id
        for _ in range(_MAX_ANCESTRY):
            ancestor = live.get(at)
            if ancestor is None:
                return span_id
            _, _, parent, _, _ = ancestor
            if parent is None:
                return span_id
            if _name(ancestor) == step:
                return parent[SPAN_ID]
            at = parent[SPAN_ID]
        return span_id

    def _own(self, span_id: int, run: AgentRun | None, span_name: str, how: str = "agent_span") -> Run:
        agent_id = None if run is None else run.agent_id
        name = (None if run is None else run.agent_name) or span_name
        found = Run(agent_run_key(agent_id, name, span_id), name, span_id, agent_id, how)
        owned = self.owned
        owned[span_id] = found
        if len(owned) > self.max_live_spans:
            evict_oldest(owned)
        if agent_id is not None:
            with self._lock:
                self._agent_runs.setdefault(agent_id, {})[found.key] = None
        return found


def _name(live: LiveSpan) -> str:
    """An open span's name now (an instrumentation may rename a span while it is open), or at its start if the
    application dropped it unended."""
    reference, started_as, _, _, _ = live
    span = reference()
    return started_as if span is None else name_of(span)
