"""The protocol every loop detector follows, and the values it sees and answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from otel_repeat_guard.core.reminders import Kind


class Call(NamedTuple):
    """One tracked call of a run, as detectors compare it."""

    tool: str
    key: bytes | None
    """The arguments' digest; None when they are unknown (such a call is distinct from every call)."""
    outcome: bytes | None = None
    """The digest of the call's outcome (result, else error), for detectors that need it; None: not recorded."""
    awaits: str | None = None
    """With no outcome: the call id under which the run's next model request will carry it back (a
    ``tool_call_response``), for the detectors that compare outcomes to wait for (see ``outcomes``)."""


class Detection(NamedTuple):
    """A call that extends a loop of one shape: an event for its span, and maybe a reminder."""

    kind: Kind
    """``cycle`` or ``no_progress`` (``repeat`` from the exact-repeat detector, which words none)."""
    run_length: int
    """Calls in the loop so far (for a cycle: period x repetitions)."""
    threshold: int
    """What the configured thresholds are compared with: repetitions for a cycle, the run length otherwise."""
    fires: bool
    """The threshold value is configured: a reminder is due at this call."""
    period: int = 1
    tools: tuple[str, ...] = ()
    """A cycle's tools, in order."""
    outcome: bytes | None = None
    """The shared outcome's digest (no progress)."""


class Stateful(Protocol):
    """Per-run state that travels: ``state()`` is plain data (lists, str, bytes, int, None: what msgpack
    carries, digests only, never an argument payload), ``restore(state)`` puts it back into a fresh object
    made the same way. A state that does not fit raises (ValueError, TypeError or IndexError) and leaves the
    object as it was. The Redis chain store moves every detector's state through these two alone."""

    def state(self) -> list[Any]: ...

    def restore(self, state: list[Any]) -> None: ...


class Detector(Stateful, Protocol):
    """A loop shape. ``observe`` sees each tracked call of one run, in order; ``continues`` says whether
    a call would extend the loop a reminder was about (so the reminder was ignored); ``outcomes`` hands
    over outcomes that arrive after their calls (none for a shape that does not compare them)."""

    kind: str

    def observe(self, call: Call) -> Detection | None: ...

    def continues(self, call: Call, period: int) -> bool: ...

    def outcomes(self, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        """The run's next model request arrived with the outcomes (digests) of calls that await one, by call
        id: what the calls waiting for theirs extend now, each with its call (outcome filled in)."""
        ...
