"""The facts the guard decides once per span, as the attribute names it puts them under.

The guard resolves each model and tool span's agent run, the model call that issued each tool
call, and whether a call charged that model call's tokens as wasted; it writes these on the span
as it ends (and on the span that carries a call counted from a model's request, in its
``repeat_tool_guard.call`` event). The store, ``doctor`` and ``ingest --replay`` read them back and
never decide them again. Plain strings, no OpenTelemetry types: the pure core may import this.
"""

from __future__ import annotations

from typing import Any, Final

RUN: Final = "repeat_tool_guard.run"
"""The chain key of the span's agent run (``Reminder.agent_id``)."""
RUN_NAME: Final = "repeat_tool_guard.run_name"
"""The run's readable name (its agent's, else its span's)."""
ISSUER: Final = "repeat_tool_guard.issuer"
"""On a tool call: the span id (16 hex digits) of the model call that asked for it."""
WASTED: Final = "repeat_tool_guard.wasted"
"""On a tool call: True when it is the call that charged its issuer's tokens as wasted (each model call once)."""
WRAPPER: Final = "repeat_tool_guard.wrapper"
"""On a model call: True when a model-call span ran inside it (a framework's span around its client's) and
this one issued nothing itself: the inner span is the call of record, and the store keeps no row for this one."""
NESTED: Final = "repeat_tool_guard.nested_in"
"""On a tool call: the span id (16 hex digits) of the open tool span of the same call that is its call of record
(an MCP server's span under its client's, or beside it in one trace: :mod:`otel_repeat_guard.spans.nesting`):
that span is counted once, and the store keeps no row for this one."""
UNGUARDED: Final = "repeat_tool_guard.unguarded_reason"
"""On a tracked tool call the guard could not key by a run: why (``no_agent``). A fact, not an event: its
parent may be in another process, or a replay's trace may lack its root, so the store cannot see it alone."""
REQUESTED: Final = "repeat_tool_guard.requested_arguments"
"""On a tool call: the arguments (canonical JSON) the model's request sent for it, where they read otherwise than
the tool span's (whose arguments key the chain still): what its reminder and the store's preview quote."""
VARIANT: Final = "repeat_tool_guard.variant"
"""On a call that fired a reminder while ``reminder_variants`` runs an experiment: the wording variant its run drew
(also on the reminder event). Absent when no experiment runs."""
CALL_EVENT: Final = "repeat_tool_guard.call"
"""The event of a call counted from a model's request, with no tool span of its own: the store's row for it."""


def run_facts(key: str, name: str | None) -> dict[str, Any]:
    """The facts every span of a run carries."""
    return {RUN: key} if name is None else {RUN: key, RUN_NAME: name}
