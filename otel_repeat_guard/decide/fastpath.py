"""Plain tool calls, counted lean: the same decision as :meth:`otel_repeat_guard.decide.guard.Guard.tool_call`, its
reference, without what a plain call never needs.

``read`` takes a tool span in place, by its vocabulary's :class:`~otel_repeat_guard.conventions.ReadPlan` (GenAI,
OpenInference and OpenLLMetry declare one; the router picks it by the span's marks, in the configured order)
instead of the convention's reader: its tool's name and short arguments text, with or without an agent of its
own, under its run's span or a step of it (its run found as the guard finds it, ``AgentChains.run_of``).
``call`` takes any vocabulary's tool call after its convention's reader. Both need no model step pending and nothing
opt-in (a reminder waiting for its run's next call is settled here, as ``opt_in`` settles it); anything else answers
``GENERAL`` and goes the general way. ``fast_path=False`` on the processor switches it off: a
property test (tests/guard/test_plain_path.py) holds the two ways to the same events, reminders and facts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_repeat_guard.conventions import MISSING, EventLike, RawToolCall, ReadPlan
from otel_repeat_guard.conventions.base import gen_ai_agent
from otel_repeat_guard.conventions.genai import AGENT_ID, AGENT_NAME
from otel_repeat_guard.core.canonical import RAW_KEY_MIN_CHARS, arguments_key, decoded_json, key_of_decoded
from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.rules import evict_oldest
from otel_repeat_guard.decide.guard_parts import opt_in
from otel_repeat_guard.decide.recorder import CountedCall, Decision
from otel_repeat_guard.spans.agents import AgentChains, run_of_agent
from otel_repeat_guard.spans.requested import PendingSteps
from otel_repeat_guard.spans.runs import Run, RunResolver
from otel_repeat_guard.spans.span_events import SPAN_ID, Attributes

GENERAL: Final[Any] = object()
"""What the plain-span reading answers for a span it leaves to the general path."""


class PlainToolSpans:
    """The plain-span read plans, built once per guard over the guard's own state (which it only reads and
    counts in, as ``Guard.tool_call`` does). ``plans[mask]``: the plan for a span of that tool mask, if any."""

    __slots__ = ("agents", "chains", "config", "facts", "plans", "repeated", "runs", "steps", "tracked")

    def __init__(
        self,
        steps: PendingSteps,
        chains: ChainStore,
        runs: RunResolver,
        tracked: ToolFilter,
        plans: tuple[ReadPlan | None, ...],
        facts: bool,
        repeated: Callable[[CountedCall, int], Decision | None],
        agents: AgentChains,
        config: GuardConfig,
    ) -> None:
        self.steps, self.chains, self.runs, self.tracked = steps, chains, runs, tracked
        self.config = config  # what settling a waiting reminder asks of the call (opt_in)
        self.plans = plans  # SpanRouter.read_plans
        self.facts = facts
        self.repeated = repeated  # Guard.repeated: a repeat is worded as the general path words it
        self.agents = agents  # the run of a call, resolved as the general path resolves it (a direct call)

    def read(  # noqa: PLR0911, PLR0912 - one pass over the span, inline: a helper's call costs the interpreted build
        self,
        plan: ReadPlan,
        span: ReadableSpan,
        attributes: Attributes,
        events: Sequence[EventLike],
        parent: SpanContext | None,
        ended: int | None,
    ) -> Any:
        """The common tool span read in place, exactly as its convention and ``Guard.tool_call`` would read it:
        its tool's name and short arguments text as ``plan`` says, nothing pending. Anything else: GENERAL."""
        names, argument_keys, wrapped, wrapper_keys, own_agent = plan  # one unpacking, not five attribute reads
        tool: Any = None
        for attribute in names:
            tool = attributes.get(attribute)
            if isinstance(tool, str) and tool:  # a native check in the compiled build
                break
        else:
            return GENERAL
        arguments: Any = MISSING
        for attribute in argument_keys:
            arguments = attributes.get(attribute, MISSING)
            if arguments is not MISSING:
                break
        steps = self.steps
        if (
            not isinstance(arguments, str)
            or len(arguments) >= RAW_KEY_MIN_CHARS
            or steps.steps  # a model step to answer, or
            or steps.counted  # calls counted from requests (their call ids), or
            or steps.open  # a step still open that issued this call: the general path
        ):
            return GENERAL
        for part in wrapped:  # a text the convention's reader would unwrap or drop
            if part in arguments:
                return GENERAL
        if not (self.tracked.answers.get(tool) or self.tracked[tool]):
            return GENERAL
        if wrapper_keys:  # its reader unwraps a JSON object by these keys: look at the object, not at the text
            try:
                decoded = decoded_json(arguments)
            except (ValueError, UnicodeEncodeError, RecursionError, TypeError):  # the reader's own parser decides
                return GENERAL  # (TypeError: a str subclass, which msgspec does not read)
            if type(decoded) is dict:
                for wrapper in wrapper_keys:
                    if wrapper in decoded:
                        return GENERAL
            key = key_of_decoded(arguments, decoded)
        else:
            key = arguments_key(arguments)
        if own_agent and (AGENT_ID in attributes or AGENT_NAME in attributes):
            agent_id, agent_name = gen_ai_agent(attributes)
            run = None if parent is None or not agent_id else self.runs.owned.get(parent[SPAN_ID])
            if run is not None and run.agent_id == agent_id:  # straight under a run of the agent it names
                self.agents.named(run)  # as AgentChains.run_of: the run's chain outlives its span
                return self._count(span, run, tool, arguments, key, attributes, events, ended, named=True)
            run = self.agents.run_of(parent, agent_id, agent_name)
        else:  # nearly always: the span straight above stands for the run (one lookup)
            run = None if parent is None else self.runs.owned.get(parent[SPAN_ID])
            if run is not None:  # straight under its run's span: no tool span of the same call encloses it
                return self._count(span, run, tool, arguments, key, attributes, events, ended)
            if parent is not None:
                run = self.agents.run_of(parent, None, None)
        if run is not None and self.runs.same_call_above(parent, run, tool, arguments, None) is not None:
            return GENERAL  # a tool span of the same call encloses it: counted once, the general way
        return self._count(span, run, tool, arguments, key, attributes, events, ended)

    def call(
        self,
        span: ReadableSpan,
        call: RawToolCall,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        ended: int | None,
    ) -> Any:
        """A tool span of any vocabulary, read by its convention's reader (OpenInference's, OpenLLMetry's, a
        GenAI span the in-place reading left): counted here when its arguments were recorded and are short
        and nothing is pending, exactly as ``Guard.tool_call`` would. Anything else answers GENERAL."""
        tool, arguments, agent_id, agent_name, error, call_id = call
        steps = self.steps
        if (
            arguments is MISSING
            or (isinstance(arguments, str) and len(arguments) >= RAW_KEY_MIN_CHARS)
            or steps.steps
            or steps.counted
            or steps.open  # a step still open issued this call (its facts, its tokens)
            or not (self.tracked.answers.get(tool) or self.tracked[tool])
        ):
            return GENERAL
        parent = span.parent
        run = self.agents.run_of(parent, agent_id, agent_name)
        if run is not None and self.runs.same_call_above(parent, run, tool, arguments, call_id) is not None:
            return GENERAL  # a tool span of the same call encloses it: counted once, the general way
        return self._count(span, run, tool, arguments, arguments_key(arguments), attributes, events, ended, error)

    def _count(
        self,
        span: ReadableSpan,
        run: Run | None,
        tool: str,
        arguments: Any,
        key: bytes | None,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        ended: int | None,
        error: bool = False,
        named: bool = False,
    ) -> Any:
        """Count a tracked plain call (``key``: its arguments' :func:`arguments_key`) in its run, as ``Guard._count``
        would with nothing opt-in: GENERAL when it has no run. A reminder of its run waiting for its outcome is
        settled by it, as ``opt_in`` settles it. ``named``: the call named the agent of ``run`` by its id, so a
        repeat is worded for that id (``run_of_agent``), made only then. The call's parts come as arguments and
        become a :class:`CountedCall` only for a repeat or a waiting reminder: a record made for every plain call
        would cost the interpreted build about 50 bytecodes a tool span (a repeat's record costs 55)."""
        chains, steps = self.chains, self.steps
        if run is None:
            return GENERAL
        ends = steps.tool_ends
        ends[run.key] = ended or 0
        if len(ends) > steps.max_runs:
            evict_oldest(ends)
        if chains.pending and chains.waiting(run.key):  # this call is what the run's last reminder led to
            opt_in(
                chains, self.config, CountedCall(run, tool, arguments, span, attributes, events, key=key, error=error)
            )
        length = chains.observe(run.key, tool, key)
        if length < 2:
            return Decision([], [], run.facts) if self.facts else None
        if named:
            run = run_of_agent(run, run.agent_id, None)  # type: ignore[arg-type]  # named: it has an agent id
        facts = run.facts if self.facts else None
        return self.repeated(
            CountedCall(run, tool, arguments, span, attributes, events, key=key, error=error, facts=facts), length
        )
