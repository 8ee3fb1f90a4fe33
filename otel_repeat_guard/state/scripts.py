"""What the Redis chain store runs and keeps (:mod:`otel_repeat_guard.state.redis`): its Lua scripts, each one
atomic step of a run's hash, the list of reminders waiting for the run's next call, and the opt-in detectors' state
as msgpack (digests only, no argument payload).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from otel_repeat_guard.core.detectors import Detector, Stateful
from otel_repeat_guard.state.connection import text_of

logger = logging.getLogger("otel_repeat_guard")

_ENTRY, _FIELD = "\x1e", "\x1f"  # separators of the waiting reminders' list: (kind, tier, period) entries

OBSERVE = """
-- rules.same_call, line for line: the same tool and the same digest, known ('' is None here)
local function same_call(tool, key, last_tool, last_key)
  return key ~= '' and key == last_key and tool == last_tool
end
local key = KEYS[1]
local old = redis.call('HMGET', key, 't', 'k', 'n', 'p')
local run, ended_tool, ended_run = 1, '', 0
if same_call(ARGV[1], ARGV[2], old[1], old[2]) then
  run = redis.call('HINCRBY', key, 'n', 1)
else
  if old[3] then ended_tool, ended_run = old[1] or '', tonumber(old[3]) end
  redis.call('HSET', key, 't', ARGV[1], 'k', ARGV[2], 'n', 1)
end
local waiting = ''
if old[4] then waiting = old[4]; redis.call('HDEL', key, 'p') end
redis.call('PEXPIRE', key, ARGV[3])
return {run, ended_tool, ended_run, waiting}
"""
"""The exact-repeat chain, atomically: compare the call with the run's last (:func:`~otel_repeat_guard.core.rules.same_call`,
which tests/distributed/test_rules.py holds the function here to), increment or restart, take the
repeat reminders that waited for this call. Returns (run length, ended tool, ended run length, waiting)."""

REKEY = """
local old = redis.call('HMGET', KEYS[1], 't', 'k', 'n')
if not (ARGV[2] ~= '' and ARGV[2] == old[2] and ARGV[1] == old[1]) or ARGV[2] == ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'k', ARGV[3], 'n', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return tonumber(old[3] or '0')
"""
"""Under ``progress: results``: the run's last call, counted before its result was seen, rekeyed with it; a run it
extended restarts at it (same_call as in OBSERVE). Returns the length of the run that ended there (0: nothing)."""

REMINDED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], (redis.call('HGET', KEYS[1], ARGV[1]) or '') .. ARGV[2])
if ARGV[1] == 'w' then redis.call('HINCRBY', KEYS[1], 'v', 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
"""A reminder fired: it waits for the run's next call (field ``p`` for repeats, ``w`` for the detectors')."""

FORGET = """
local old = redis.call('HMGET', KEYS[1], 't', 'n', 'p', 'w')
redis.call('DEL', KEYS[1])
return {old[1] or '', tonumber(old[2] or '0'), old[3] or '', old[4] or ''}
"""

COMPARE_AND_SET = """
local version = redis.call('HGET', KEYS[1], 'v') or ''
if version ~= ARGV[1] then return 0 end
for i = 3, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('HINCRBY', KEYS[1], 'v', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
"""The detectors' state: written only if no other process wrote it since it was read (version ``v``)."""


def waiting_entry(kind: str, tier: str, period: int) -> str:
    """One entry of a waiting list: a reminder that waits for the run's next call."""
    return f"{kind}{_FIELD}{tier}{_FIELD}{period}{_ENTRY}"


def waiting_reminders(raw: Any) -> list[tuple[str, str, int]]:
    """The reminders in a waiting list: (kind, tier, period) entries."""
    found = []
    for entry in text_of(raw).split(_ENTRY):
        parts = entry.split(_FIELD)
        if len(parts) == 3 and parts[2].isdigit():
            found.append((parts[0], parts[1], int(parts[2])))
    return found


# -- the opt-in detectors' state, serialized --------------------------------------------------


def dump_state(detectors: Sequence[Detector] = (), parallel: Stateful | None = None) -> bytes:
    """The detectors' state (``[kind, *state()]`` each) and the parallel-duplicate window as msgpack: digests
    only, no argument payload."""
    states = [[detector.kind, *detector.state()] for detector in detectors]
    return msgspec.msgpack.encode([states, None if parallel is None else parallel.state()])


def load_state(blob: bytes | None, detectors: Sequence[Detector] = (), parallel: Stateful | None = None) -> None:
    """Restore what :func:`dump_state` wrote into fresh detectors; a state that does not fit (another version,
    another configuration) is left out, and that detector starts afresh."""
    if not blob:
        return
    try:
        states, recent = msgspec.msgpack.decode(blob)
    except Exception:
        logger.debug("repeat guard: unreadable detector state in the chain store; starting afresh", exc_info=True)
        return
    restores = [
        (detector.restore, state[1:])
        for detector, state in zip(detectors, states, strict=False)
        if state and state[0] == detector.kind
    ]
    if parallel is not None and recent:
        restores.append((parallel.restore, recent))
    for restore, state in restores:
        try:
            restore(state)
        except Exception:
            logger.debug("repeat guard: a detector state that does not fit; that detector starts afresh", exc_info=True)
