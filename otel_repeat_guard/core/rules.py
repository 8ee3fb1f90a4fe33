"""Rules written once, for every part that applies them: what makes a call repeat the run's last, and how
a bounded map makes room. Pure: no OTel imports.

The Redis chain store applies :func:`same_call` inside Redis, in its Lua script
(``state.scripts.OBSERVE``), which mirrors it line for line; ``tests/distributed/test_rules.py`` holds
the two equal.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def same_call(tool: str, key: bytes | None, last_tool: str, last_key: bytes | None) -> bool:
    """Whether a call (``tool``, arguments digest ``key``) repeats the run's last call: the same tool and
    the same digest, known. Unknown arguments (None, or the empty digest, which is how Redis stores
    None) repeat nothing and are repeated by nothing."""
    return bool(key) and key == last_key and tool == last_tool


def evict_oldest(mapping: dict[K, V]) -> tuple[K, V] | None:
    """Remove the map's oldest entry and return it (None if it is empty, or lost a race with another thread:
    the next call evicts). Oldest is first in iteration order: least recently inserted in a dict, least
    recently moved to the end in an ``OrderedDict`` (least recently active, when every use moves it).

    O(1) on an ``OrderedDict``. On a plain dict it first steps over the slots earlier deletions left at
    the front until the dict next resizes: a map that evicts on every insert at scale wants an ``OrderedDict``.
    """
    try:
        key = next(iter(mapping))
        return key, mapping.pop(key)
    except (StopIteration, KeyError, RuntimeError):
        return None


def put_bounded(mapping: dict[K, V], key: K, value: V, limit: int) -> tuple[K, V] | None:
    """``mapping[key] = value``, then past ``limit`` entries the oldest is evicted and returned."""
    mapping[key] = value
    return evict_oldest(mapping) if len(mapping) > limit else None
