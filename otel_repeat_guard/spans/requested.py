"""What each agent run's last model call asked for, until the run's tool spans answer it.

A model-call span ends with the tool calls the model requested (call id, tool, arguments).
The guard keeps the last such step per run, *unread*: parsing the model's output costs more
than the rest of a span's handling, and most runtimes never need it. It is read only when

- a tool span of the run has a call id but no arguments: the arguments are joined by id;
- the run's next model call starts (or the run ends) and no tool span answered the step:
  the runtime runs tools without spans, so the requested calls are counted as the run's calls.

A step whose tool spans may end while it is still open (a convention's ``issues_while_open``: the Vercel
AI SDK's streamed steps run each tool as soon as the stream delivers its call, and its millisecond clock
can put a tool span's end a little before its step's) is kept from its start as its run's *open* step,
their issuer; what it wasted is counted when it ends, with its usage.

Bounded: one step per run, at most ``max_runs`` runs (the least recently active goes), and a
bounded memory of call ids already counted, so a late tool span is never counted twice.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from otel_repeat_guard.conventions.base import MISSING, EventLike, RequestedCall
from otel_repeat_guard.core.facts import WASTED
from otel_repeat_guard.core.rules import evict_oldest, put_bounded
from otel_repeat_guard.spans.run import Run

logger = logging.getLogger("otel_repeat_guard")
_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
_TOOL_FINISH: Final = frozenset({"tool_call", "tool_calls", "tool_use", "function_call", "tool-calls"})  # last: AI SDK
_REQUEST_KEYS: Final = (
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",  # OpenInference
    "gen_ai.completion.0.tool_calls.0.name",  # OpenLLMetry before 0.62
    "ai.response.toolCalls",  # the Vercel AI SDK
)


def may_request(attributes: dict[str, Any], events: Sequence[EventLike]) -> bool:
    """Whether a model-call span may hold tool-call requests, or say it asked for tools: a few dict
    lookups, so a text answer (most model calls) is never kept as a step, let alone parsed.

    A span that says how the model finished but not what it said (content capture off; google-adk's
    legacy schema, which records the response on its own ``call_llm`` span) may have asked for tools
    whatever the reason (Gemini finishes a request for tools with ``STOP``): it is kept, unread, so
    the tool spans that answer it find the model call that issued them."""
    output = attributes.get("gen_ai.output.messages")
    if output is not None:  # a text answer, unless the finish reason says the text is not all of it
        return not isinstance(output, str) or "tool_call" in output or _finished_for_tools(attributes)
    if _REQUEST_KEYS[0] in attributes or _REQUEST_KEYS[1] in attributes or _REQUEST_KEYS[2] in attributes:
        return True
    return _FINISH_REASONS in attributes or bool(len(events))  # the older gen_ai.choice events


def _finished_for_tools(attributes: Mapping[str, Any]) -> bool:
    reasons = attributes.get(_FINISH_REASONS)
    if reasons is not None and isinstance(reasons, Sequence):
        for reason in reasons:
            if isinstance(reason, str) and reason in _TOOL_FINISH:
                return True
    return False


RequestReader = Callable[[str, Mapping[str, Any], Sequence[EventLike]], list[RequestedCall]]


class Step:
    """One model call's requests, read on first use."""

    __slots__ = (
        "_by_id",
        "_calls",
        "_events",
        "_read",
        "_taken",
        "attributes",
        "ended_ns",
        "name",
        "scope",
        "span_context",
        "spanned",
        "wasted",
        "wasted_tool",
    )

    def __init__(  # noqa: PLR0913, PLR0917 - the record's own fields
        self,
        read: RequestReader,
        name: str,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        span_context: Any,
        scope: str = "",
        ended_ns: int = 0,
    ) -> None:
        self._read = read
        self.name = name
        self.attributes = attributes
        self._events = events
        self.span_context = span_context
        self.scope = scope  # the model span's instrumentation scope
        self.ended_ns = ended_ns  # when the model span ended
        self.spanned = False  # a tool span of the run came after it
        self.wasted = False  # it asked for a call that repeats or extends a loop: its tokens are counted
        self.wasted_tool: str | None = None  # charged while open: counted at its end, for this tool
        self._calls: list[RequestedCall] | None = None
        self._by_id: dict[str, RequestedCall] = {}
        self._taken: set[int] = set()

    def charge(
        self, tool: str, facts: dict[str, Any] | None, wasted_tokens: Callable[[str, str, Mapping[str, Any]], None]
    ) -> None:
        """A call it asked for repeats or extends a loop: its tokens are wasted, once (``WASTED`` on the call
        that charged it), as ``wasted_tokens(tool, scope, attributes)`` reads them off the model call. A step
        still open (``issues_while_open``) is counted at its end, with its usage."""
        if self.wasted:
            return
        self.wasted = True
        if facts is not None:
            facts[WASTED] = True
        if self.ended_ns:
            wasted_tokens(tool, self.scope, self.attributes)
        else:
            self.wasted_tool = tool

    def asked_for_tools(self) -> bool:
        """The model's finish reason says it asked for tools, whether or not its content was recorded."""
        return _finished_for_tools(self.attributes)

    def calls(self) -> list[RequestedCall]:
        """What the model asked for, read once. A reader that fails (a convention of the application's own,
        on a message it did not foresee) costs only this step's requests: logged once, read as none, so
        the run's tool spans and next model call go on as if content capture were off."""
        if self._calls is None:
            try:
                calls = self._read(self.name, self.attributes, self._events)
            except Exception:
                logger.warning("repeat guard could not read what model call %r asked for", self.name, exc_info=True)
                calls = []
            self._calls = calls
            self._by_id = {call.call_id: call for call in calls if call.call_id is not None}
        return self._calls

    def by_id(self, call_id: str) -> RequestedCall | None:
        self.calls()
        return self._by_id.get(call_id)

    def arguments_of(self, tool: str, call_id: str | None) -> Any:
        """The arguments the model asked ``tool`` with: for the call ``call_id``, else the step's one call of
        ``tool``; MISSING when unknown or ambiguous (two calls of ``tool``, no id). Takes nothing, as
        :meth:`by_name` does: a tool span that has its own arguments only quotes the model's."""
        if call_id is not None:
            call = self.by_id(call_id)
            return MISSING if call is None or call.tool_name != tool else call.arguments
        found = [call for call in self.calls() if call.tool_name == tool]
        return found[0].arguments if len(found) == 1 else MISSING

    def by_name(self, tool: str) -> RequestedCall | None:
        """The first request of ``tool`` not taken yet, for a tool span with no call id (MCP)."""
        for i, call in enumerate(self.calls()):
            if call.tool_name == tool and i not in self._taken:
                self._taken.add(i)
                return call
        return None


def _nothing_requested(name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> list[RequestedCall]:
    return []  # an open step: what it asked for is known at its end


class OpenStep(NamedTuple):
    """A model call still open whose tool spans may end in it (``issues_while_open``): its run and start."""

    run_key: str
    step: Step
    started_ns: int


class PendingSteps:
    """The last model step of each run, by chain key; and the open steps, by model span id."""

    __slots__ = ("_any_key", "_lock", "_max_counted", "counted", "max_runs", "open", "steps", "tool_ends")

    def __init__(self, max_runs: int, max_counted: int = 4096, baggage_runs: bool = True) -> None:
        self.steps: OrderedDict[str, Step] = OrderedDict()
        """Run key -> its last step; test its truth for "any step pending" (no Python-level call)."""
        self.counted: dict[tuple[str, str], None] = {}
        """(run, call id) of the calls counted from a request, oldest first; empty for runtimes with tool spans."""
        self.tool_ends: dict[str, int] = {}
        """Run key -> when its last tool span ended (:meth:`tool_ended`)."""
        self.open: dict[int, OpenStep] = {}
        """Model span id -> a step still open (``issues_while_open``); empty for most runtimes."""
        self._lock = threading.Lock()
        self.max_runs = max_runs
        self._max_counted = max_counted
        self._any_key = baggage_runs
        """Whether a model span's run may have any key: a run a remote parent's baggage names (when the guard
        follows remote runs) is keyed by whatever string it names. Else its key has a ``#``: it is found through
        a span (``agent_run_key``)."""

    def any_step(self) -> bool:
        """Whether any run's last model step waits to be answered."""
        return bool(self.steps)

    def any_open(self) -> bool:
        """Whether any model call that issues tool calls while open is open."""
        return bool(self.open)

    def idle(self) -> bool:
        """Whether nothing is pending: no model step to answer, no call counted from a request, no step open."""
        return not (self.steps or self.counted or self.open)

    def tool_ended(self, run: Run, ended_ns: int) -> None:
        """A tool span of the run ended: a model span of it that ends later is answered already (:meth:`add`).
        Kept for no run that no model span can have: a tool span's own ``gen_ai.agent.id`` with no run of that agent
        around it (a harness's bare spans), whose key (the id, no ``#``) no model span's run has, unless baggage
        may name any key. So a million such agents keep a chain each and nothing here."""
        key = run.key
        if run.how != "agent_id" or self._any_key or "#" in key:
            put_bounded(self.tool_ends, key, ended_ns, self.max_runs)

    def opened(self, run_key: str, span_context: Any, name: str, scope: str, started_ns: int) -> None:
        """A model call whose tool spans may end in it started: until it ends, it is its run's issuer."""
        step = Step(_nothing_requested, name, {}, (), span_context, scope)
        self.open[span_context.span_id] = OpenStep(run_key, step, started_ns)
        if len(self.open) > self.max_runs:
            evict_oldest(self.open)

    def open_issuer(self, run_key: str, started_ns: int) -> Step | None:
        """The run's latest open step that started before a tool span that started at ``started_ns`` (strictly:
        a step stamped with the same coarse instant is the next one, started as the tool ended)."""
        found: OpenStep | None = None
        for candidate in list(self.open.values()):  # a copy: another thread may end a step meanwhile
            if (
                candidate.run_key == run_key
                and candidate.started_ns < started_ns
                and (found is None or candidate.started_ns >= found.started_ns)
            ):
                found = candidate
        return None if found is None else found.step

    def closed(self, span_id: int) -> Step | None:
        """The open step of the model span ``span_id``, which ends now (None if it was none)."""
        found = self.open.pop(span_id, None)
        return None if found is None else found.step

    def add(self, run_key: str, step: Step, started_ns: int) -> None:
        """The run's model call that started at ``started_ns`` ended with ``step``. If a tool span of the
        run ended since it started (google-adk ends its model span after the tools it asked for), the
        step is answered already."""
        step.spanned = self.tool_ends.get(run_key, -1) >= started_ns
        with self._lock:
            self.steps[run_key] = step
            self.steps.move_to_end(run_key)
            if len(self.steps) > self.max_runs:
                self.steps.popitem(last=False)

    def latest_end(self, run_key: str) -> int:
        """When the model span of the run's last step ended; -1 if the run has none."""
        step = self.steps.get(run_key)
        return -1 if step is None else step.ended_ns

    def answered(self, run_key: str) -> Step | None:
        """A tool span of the run ended (its end is in ``tool_ends``): the run's last step is answered
        by tool spans (returned, if any)."""
        step = self.steps.get(run_key)
        if step is not None:
            step.spanned = True
        return step

    def unanswered(self, run_key: str) -> tuple[Step | None, list[RequestedCall]]:
        """The run moves on (its next model call starts, or it ends): its last step, if no tool span
        answered it, and that step's requests, in request order, each counted at most once."""
        with self._lock:
            step = self.steps.pop(run_key, None)
        if step is None or step.spanned:
            return None, []
        out: list[RequestedCall] = []
        for call in step.calls():
            if call.call_id is not None:
                key = (run_key, call.call_id)
                if key in self.counted:
                    continue
                self.counted[key] = None
                if len(self.counted) > self._max_counted:
                    evict_oldest(self.counted)
            out.append(call)
        return step, out

    def was_counted(self, run_key: str, call_id: str) -> bool:
        """Whether the run's call with this id was counted from its request already (its tool span came late)."""
        return (run_key, call_id) in self.counted

    def forget(self, run_key: str) -> None:
        with self._lock:
            self.steps.pop(run_key, None)
        self.tool_ends.pop(run_key, None)
        if self.open:
            for span_id in [k for k, open_step in self.open.items() if open_step.run_key == run_key]:
                self.open.pop(span_id, None)

    def after_fork(self) -> None:
        """In a forked child: a fresh lock, no run's step (they were the parent's)."""
        self._lock = threading.Lock()
        self.steps.clear()
        self.counted.clear()
        self.tool_ends.clear()
        self.open.clear()
