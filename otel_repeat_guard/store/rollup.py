"""The exporter's roll-up upkeep: per-group figures of the calls it writes, added to (or taken from)
``call_rollup`` and ``model_rollup`` in the same transaction as the calls, so both always equal
:data:`~otel_repeat_guard.store.schema.ROLLUP_FROM_CALLS` and
:data:`~otel_repeat_guard.store.schema.MODEL_ROLLUP_FROM_CALLS`."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from otel_repeat_guard.store.storable import storable_int
from otel_repeat_guard.store.tables import ROLLUP_BUCKET_NS, SMALL_INPUT_TOKENS

_ADD_ROLLUP = """
INSERT INTO call_rollup (
    bucket_ns, service_name, agent, tool_name, tracked,
    calls, repeated_calls, gentle_reminders, detailed_reminders, longest_run, repeated_ns
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (bucket_ns, service_name, agent, tool_name, tracked) DO UPDATE SET
    calls = calls + excluded.calls,
    repeated_calls = repeated_calls + excluded.repeated_calls,
    gentle_reminders = gentle_reminders + excluded.gentle_reminders,
    detailed_reminders = detailed_reminders + excluded.detailed_reminders,
    longest_run = MAX(longest_run, excluded.longest_run),
    repeated_ns = repeated_ns + excluded.repeated_ns
"""
_SUBTRACT_ROLLUP = """
UPDATE call_rollup SET
    calls = calls - ?, repeated_calls = repeated_calls - ?, gentle_reminders = gentle_reminders - ?,
    detailed_reminders = detailed_reminders - ?, repeated_ns = repeated_ns - ?
WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND tool_name = ? AND tracked = ?
RETURNING calls, longest_run
"""
_DROP_EMPTY_ROLLUP = """
DELETE FROM call_rollup WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND tool_name = ? AND tracked = ?
"""
# The longest run left in a group that lost calls to another agent label (rare: only when
# the group still holds calls and lost its longest); reads one day of calls by time.
_RECOUNT_LONGEST = """
UPDATE call_rollup SET longest_run = (
    SELECT COALESCE(MAX(run_length), 0) FROM tool_calls
    WHERE end_ns >= :bucket AND end_ns < :bucket + :width AND service_name = :service
      AND COALESCE(agent_name, agent_key) = :agent AND tool_name = :tool AND tracked = :tracked
)
WHERE bucket_ns = :bucket AND service_name = :service AND agent = :agent AND tool_name = :tool AND tracked = :tracked
"""
_ADD_MODEL_ROLLUP = """
INSERT INTO model_rollup (
    bucket_ns, service_name, agent, model, provider, wasted_tool,
    calls, input_tokens, output_tokens, total_tokens, unsplit_calls, cache_read_tokens, cache_write_tokens,
    reasoning_tokens
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (bucket_ns, service_name, agent, model, provider, wasted_tool) DO UPDATE SET
    calls = calls + excluded.calls,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    total_tokens = total_tokens + excluded.total_tokens,
    unsplit_calls = unsplit_calls + excluded.unsplit_calls,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens
"""
_DROP_EMPTY_MODEL_ROLLUP = """
DELETE FROM model_rollup WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND model = ? AND provider = ?
  AND wasted_tool = ? AND calls <= 0
"""


def agent_label(name: str | None, key: str) -> str:
    """The agent label the dashboard shows: ``COALESCE(agent_name, agent_key)``."""
    return name if name is not None else key


RollupKey = tuple[int, str, str, str, bool]  # bucket_ns, service, agent label, tool, tracked


class RolledCall(NamedTuple):
    """What the roll-up counts of one stored call, under its agent label."""

    end_ns: int
    service: str
    agent: str
    tool: str
    tracked: bool
    run_length: int | None
    tier: str | None
    duration_ns: int


class CallRollup:
    """Per-group figures of some calls: added to (or taken from) ``call_rollup`` in one statement each."""

    def __init__(self) -> None:
        # calls, repeated calls, gentle, detailed, longest run, repeated ns
        self.groups: dict[RollupKey, list[int]] = {}

    def add(self, call: RolledCall) -> None:
        end_ns, service, agent, tool, tracked, run_length, tier, duration_ns = call
        key = (end_ns - end_ns % ROLLUP_BUCKET_NS, service, agent, tool, bool(tracked))
        figures = self.groups.setdefault(key, [0, 0, 0, 0, 0, 0])
        repeated = run_length is not None and run_length >= 2
        figures[0] += 1
        figures[1] += repeated
        figures[2] += tier == "gentle"
        figures[3] += tier == "detailed"
        figures[4] = max(figures[4], run_length or 0)
        figures[5] = storable_int(figures[5] + duration_ns) if repeated else figures[5]  # a wrong-unit end: clamped

    def labels(self) -> set[str]:
        """The agent labels of these figures."""
        return {key[2] for key in self.groups}

    def apply(self, conn: sqlite3.Connection) -> None:
        conn.executemany(_ADD_ROLLUP, [(*key, *figures) for key, figures in sorted(self.groups.items())])

    def take_from(self, conn: sqlite3.Connection) -> None:
        """Subtract these calls from their groups (after they moved to another agent label)."""
        for key, (calls, repeated, gentle, detailed, longest, repeated_ns) in sorted(self.groups.items()):
            left = conn.execute(_SUBTRACT_ROLLUP, (calls, repeated, gentle, detailed, repeated_ns, *key)).fetchone()
            if left is None:  # pragma: no cover - every stored call is in the roll-up
                continue
            if left[0] <= 0:
                conn.execute(_DROP_EMPTY_ROLLUP, key)
            elif longest >= left[1]:
                bucket, service, agent, tool, tracked = key
                conn.execute(
                    _RECOUNT_LONGEST,
                    {
                        "bucket": bucket,
                        "width": ROLLUP_BUCKET_NS,
                        "service": service,
                        "agent": agent,
                        "tool": tool,
                        "tracked": tracked,
                    },
                )


ModelRollupKey = tuple[int, str, str, str, str, str]  # bucket_ns, service, agent label, model, provider, wasted tool


class ModelFigures(NamedTuple):
    """A model call's row as the roll-up reads it: the columns of ``sql.MODEL_FIGURES``, by name."""

    id: int | None
    end_ns: int
    service_name: str
    agent_key: str
    agent_name: str | None
    agent_known: bool
    agent_pending: bool
    model: str | None
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    wasted_tool: str | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None = None


class ModelRollup:
    """Token sums of some model calls, added to (or, with ``sign=-1``, taken from) ``model_rollup``."""

    def __init__(self) -> None:
        self.groups: dict[ModelRollupKey, list[int]] = {}  # calls, input, output, total, unsplit, cache r/w, reasoning

    def add(self, row: ModelFigures, agent: str, wasted_tool: str | None, sign: int = 1) -> None:
        """Add (or take) one model call."""
        end = int(row.end_ns)
        tokens_in, tokens_out, total = row.input_tokens, row.output_tokens, row.total_tokens
        read, write = row.cache_read_tokens, row.cache_write_tokens
        key = (
            end - end % ROLLUP_BUCKET_NS,
            str(row.service_name),
            agent,
            str(row.model or ""),
            str(row.provider or ""),
            wasted_tool or "",
        )
        figures = self.groups.setdefault(key, [0, 0, 0, 0, 0, 0, 0, 0])
        known_in = tokens_in if isinstance(tokens_in, int) else None
        known_out = tokens_out if isinstance(tokens_out, int) else None
        figures[0] += sign
        figures[1] += sign * (known_in or 0)
        figures[2] += sign * (known_out or 0)
        figures[3] += sign * (total if isinstance(total, int) else (known_in or 0) + (known_out or 0))
        figures[4] += sign * (known_in is None or known_out is None)
        figures[5] += sign * (read if isinstance(read, int) else 0)
        figures[6] += sign * (write if isinstance(write, int) else 0)
        reasoning = row.reasoning_tokens
        figures[7] += sign * (reasoning if isinstance(reasoning, int) else 0)

    def apply(self, conn: sqlite3.Connection) -> None:
        rows = [(*key, *figures) for key, figures in sorted(self.groups.items()) if any(figures)]
        conn.executemany(_ADD_MODEL_ROLLUP, rows)
        conn.executemany(
            _DROP_EMPTY_MODEL_ROLLUP, [key for key, figures in sorted(self.groups.items()) if figures[0] < 0]
        )


def rolled_up(pending: object, tokens_in: object) -> bool:
    """Whether ``model_rollup`` holds a model call (schema.ROLLED_UP_MODEL_CALL)."""
    return not pending and (tokens_in if isinstance(tokens_in, int) else 0) <= SMALL_INPUT_TOKENS
