"""One call, two tool spans: a tool span nested in a tool span of the same call counts once.

When an MCP client and its server run in one process and both are instrumented, one call makes a tool span
on each side, the server's inside the client's (OpenLLMetry's ``<tool>.tool`` on both sides of FastMCP; a
framework's ``execute_tool`` span around the one the MCP server's middleware makes). The inner span ends
first; the enclosing one has the caller's view (the call id, the arguments as the model sent them), so it is
the call of record. The inner one is not counted, and carries :data:`otel_repeat_guard.core.facts.NESTED`, so
the store keeps no row for it.

The same call: the same tool, and the same call id where both spans have one, else the same arguments where
both have them; a span with neither is the enclosing call's own execution. Only the open spans between the
inner span and its run's span are looked at (``RunResolver.same_call_above``), and only the nearest tool span
among them: a tool that runs an agent (a run of its own) or calls another tool is never the same call as the
tools called inside it.
"""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.conventions import MISSING, RawToolCall
from otel_repeat_guard.core.canonical import arguments_key
from otel_repeat_guard.core.facts import NESTED


def same_call(tool: str, arguments: Any, call_id: str | None, outer: RawToolCall) -> bool:
    """Whether ``outer``, the call of an enclosing tool span, is the call ``tool`` / ``arguments`` / ``call_id``."""
    outer_tool, outer_arguments, _, _, _, outer_call_id = outer
    if outer_tool != tool:
        return False
    if call_id is not None and outer_call_id is not None:
        return call_id == outer_call_id
    if arguments is not MISSING and outer_arguments is not MISSING:
        return arguments_key(arguments) == arguments_key(outer_arguments)
    return True


def nested_facts(run_facts: dict[str, Any], outer: int) -> dict[str, Any]:
    """The facts of a tool span whose enclosing span ``outer`` carries the same call: its run's, and ``NESTED``."""
    run_facts[NESTED] = f"{outer:016x}"
    return run_facts
