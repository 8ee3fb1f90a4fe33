"""The exact repeat: the same tool with the same arguments, back to back (:func:`~otel_repeat_guard.core.rules.same_call`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_repeat_guard.core.detectors.base import Call, Detection
from otel_repeat_guard.core.rules import same_call


def key_if_same_raw(keyed_raw: bytes | None, raw: bytes) -> bytes | None:
    """The arguments key in ``keyed_raw`` (a call's key + raw key), if its raw key was ``raw``."""
    if keyed_raw is None or keyed_raw[-len(raw) :] != raw:
        return None
    return keyed_raw[: -len(raw)]


class RepeatDetector:
    """The run's last call and how many calls in a row it has been made: the chain every run keeps.

    It runs on every tracked call of every run, so it is small (four fields: one per run of a million
    agents is 64 B) and :meth:`count`, what :class:`~otel_repeat_guard.core.chains.ChainTracker` calls, takes
    the call's parts instead of a :class:`Call`. ``keyed_raw`` is the key and the raw key of the last
    call that came with both, as one bytes object (read atomically, without a lock); ``run`` is 0 before
    the run's first counted call. The repeat's reminders are the guard's tiers over the run length, so
    :meth:`observe`'s detections never fire one.
    """

    __slots__ = ("key", "keyed_raw", "run", "tool")
    kind = "repeat"

    def __init__(self, tool: str = "", key: bytes | None = None, raw: bytes | None = None, run: int = 0) -> None:
        self.tool = tool
        self.key = key
        self.keyed_raw = None if key is None or raw is None else key + raw
        self.run = run

    def count(self, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        """Count a call: the run it extends, else a new run of one; returns the run length."""
        if same_call(tool, key, self.tool, self.key):
            self.run += 1
            if raw is not None and key is not None:
                self.keyed_raw = key + raw
            return self.run
        self.tool, self.key, self.run = tool, key, 1
        self.keyed_raw = None if key is None or raw is None else key + raw
        return 1

    def observe(self, call: Call) -> Detection | None:
        run = self.count(call.tool, call.key)
        return Detection("repeat", run_length=run, threshold=run, fires=False) if run > 1 else None

    def continues(self, call: Call, period: int = 1) -> bool:
        """Whether ``call`` would extend the run."""
        return same_call(call.tool, call.key, self.tool, self.key)

    def outcomes(self, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        return []  # a repeat is of calls, not outcomes

    def state(self) -> list[Any]:
        return [self.tool, self.key, self.run]

    def restore(self, state: list[Any]) -> None:
        tool, key, run = state
        if type(tool) is not str or not (key is None or type(key) is bytes) or type(run) is not int:
            raise TypeError(f"not a repeat state: {state!r}")
        self.tool, self.key, self.run, self.keyed_raw = tool, key, run, None
