"""A thread-safe mailbox for harnesses that pull reminders instead of being called; and its shared form,
in Redis, for agent runs whose tool calls run in other processes (``docs/distributed.md``)."""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict, deque

import orjson
from opentelemetry.metrics import MeterProvider

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.reminders import REMINDER_SOURCE, Reminder
from otel_repeat_guard.forks import renew_after_fork
from otel_repeat_guard.inputs import positive_int
from otel_repeat_guard.state.connection import (
    INBOX_DRAIN,
    INBOX_PREFIX,
    INBOX_PUT,
    StoreHealth,
    connect,
    reconnect,
    store_health,
    text_of,
    wire,
)
from otel_repeat_guard.state.deadline import Deadline

logger = logging.getLogger("otel_repeat_guard")


SCAN_SECONDS = 2.0
"""How long :meth:`RedisReminderInbox.pending` may scan Redis's keys for inboxes (a large keyspace takes longer
than one call's ``store_timeout_ms``)."""


class ReminderInbox:
    """Holds reminders per agent until the harness drains them before its next model request.

    Bounded: at most ``per_agent`` reminders per agent (oldest dropped) and ``max_agents``
    agents (least recently written dropped), so an agent nobody drains cannot grow it.
    """

    __slots__ = ("__weakref__", "_boxes", "_lock", "_max_agents", "_per_agent")

    def __init__(self, *, per_agent: int = 16, max_agents: int = 10_000) -> None:
        per_agent, max_agents = positive_int("per_agent", per_agent), positive_int("max_agents", max_agents)
        self._lock = threading.Lock()
        self._boxes: OrderedDict[str, deque[Reminder]] = OrderedDict()
        self._per_agent = per_agent
        self._max_agents = max_agents
        renew_after_fork(self)

    def after_fork(self) -> None:
        """In a forked child (:mod:`otel_repeat_guard.forks`): a fresh lock, and no reminder (they were for the
        parent's runs)."""
        self._lock = threading.Lock()
        self._boxes.clear()

    def put(self, reminder: Reminder) -> None:
        """Store a reminder; usable directly as ``on_reminder``. Anything else is a ``ValueError``."""
        if not isinstance(reminder, Reminder):
            raise ValueError(f"reminder must be a Reminder, got {reminder!r}")
        with self._lock:
            self._box(reminder.agent_id).append(reminder)

    def _box(self, agent_id: str) -> deque[Reminder]:
        """The agent's box, made (past ``max_agents``, the least recently written agent's dropped) or moved to the
        end as the most recently written. Called under the lock."""
        box = self._boxes.get(agent_id)
        if box is None:
            box = self._boxes[agent_id] = deque(maxlen=self._per_agent)
            if len(self._boxes) > self._max_agents:
                self._boxes.popitem(last=False)
        else:
            self._boxes.move_to_end(agent_id)
        return box

    def drain(self, agent_id: object) -> list[Reminder]:
        """Take and return the agent's pending reminders, oldest first; none for an id that is not a string
        (``inbox.drain(guard.current_agent_id())`` outside a span passes None)."""
        if not isinstance(agent_id, str):
            return []
        with self._lock:
            box = self._boxes.pop(agent_id, None)
        return list(box) if box else []

    def give_back(self, reminders: list[Reminder]) -> None:
        """Reminders drained for a model request that could not carry them, back before any that came since,
        for the run's next request (an adapter's edit failed). Kept in this process, as ``put`` keeps one
        while a shared store is down; the bound still holds, the oldest dropped first."""
        with self._lock:
            for reminder in reversed(reminders):
                box = self._box(reminder.agent_id)
                if len(box) < self._per_agent:  # a full box keeps the newer reminders, as put() does
                    box.appendleft(reminder)

    def peek(self, agent_id: object) -> list[Reminder]:
        """The agent's pending reminders, oldest first, left in place (none for an id that is not a string)."""
        if not isinstance(agent_id, str):
            return []
        with self._lock:
            box = self._boxes.get(agent_id)
            return list(box) if box else []

    def pending(self) -> list[str]:
        """The agent ids that have reminders waiting."""
        with self._lock:
            return list(self._boxes)


def _encode(reminder: Reminder) -> bytes:
    """The reminder as JSON; a text holding a lone surrogate (which orjson refuses) as its ``\\udXXX`` escape."""
    fields = {
        "agent_id": reminder.agent_id,
        "agent_name": reminder.agent_name,
        "tool_name": reminder.tool_name,
        "run_length": reminder.run_length,
        "threshold": reminder.threshold,
        "tier": reminder.tier,
        "text": reminder.text,
        "arguments_preview": reminder.arguments_preview,
        "trace_id": reminder.trace_id,
        "span_id": reminder.span_id,
        "source": dict(reminder.source),
        "kind": reminder.kind,
        "period": reminder.period,
    }
    if reminder.variant is not None:  # an experiment's variant (a worker's and the agent's must agree)
        fields["variant"] = reminder.variant
    try:
        return orjson.dumps(fields)
    except TypeError:
        return json.dumps(fields).encode()


def _decode(blob: bytes) -> Reminder | None:
    try:
        try:
            fields = orjson.loads(blob)
        except orjson.JSONDecodeError:  # a lone surrogate's escape, which orjson refuses to read
            fields = json.loads(blob)
        source = fields.pop("source", None)
        reminder = Reminder(**fields)
    except Exception:
        logger.warning("repeat guard: an unreadable reminder in the shared inbox was dropped", exc_info=True)
        return None
    if source is not None and source != REMINDER_SOURCE:
        reminder = Reminder(**fields, source=source)
    return reminder


class RedisReminderInbox(ReminderInbox):
    """A :class:`ReminderInbox` whose boxes are Redis lists (``repeat_tool_guard:inbox:<run key>``), shared by
    the agent process and its workers. ``put`` is usable as a worker guard's ``on_reminder``; the agent
    process's adapters ``drain`` the run's box before each model request. A drain reads and deletes the box
    in one script, so a reminder is delivered once, to one drainer. At most ``per_agent`` reminders per box
    (oldest dropped), each box expiring ``expiry_seconds`` after its last write. When Redis fails, the
    reminder goes to (and is drained from) this process's own boxes, the parent class's."""

    # Here, in an interpreted module, not beside the chain store: mypyc cannot compile a subclass of a class
    # with __slots__ that it does not compile (and adapters accept only a ReminderInbox).

    def __init__(
        self,
        url: str,
        *,
        per_agent: int = 16,
        max_agents: int = 10_000,
        timeout_ms: int = 50,
        expiry_seconds: int = 86_400,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        super().__init__(per_agent=per_agent, max_agents=max_agents)
        self._url, self._timeout_ms = url, timeout_ms
        self._client = connect(url, timeout_ms)
        self._seconds = timeout_ms / 1000  # each call's deadline, all its commands and reads together
        self._health = store_health(url, meter_provider)
        self._expiry_ms = expiry_seconds * 1000
        self._scripts()

    def _scripts(self) -> None:
        self._put_script = self._client.register_script(INBOX_PUT)
        self._drain_script = self._client.register_script(INBOX_DRAIN)

    def after_fork(self) -> None:
        """In a forked child: no reminder here, and a client of its own (the parent's left alone); the shared
        boxes stay in Redis."""
        super().after_fork()
        self._client = reconnect(self._client, self._url, self._timeout_ms)
        self._scripts()

    @classmethod
    def from_config(cls, config: GuardConfig, *, meter_provider: MeterProvider | None = None) -> RedisReminderInbox:
        return cls(
            config.chain_store,
            timeout_ms=config.store_timeout_ms,
            expiry_seconds=config.store_expiry_seconds,
            meter_provider=meter_provider,
        )

    @property
    def health(self) -> StoreHealth:
        return self._health

    def put(self, reminder: Reminder) -> None:
        if not isinstance(reminder, Reminder):
            raise ValueError(f"reminder must be a Reminder, got {reminder!r}")
        if self._health.usable("inbox_put"):
            try:
                with Deadline(self._seconds):
                    self._put_script(
                        keys=[wire(INBOX_PREFIX + reminder.agent_id)],
                        args=[_encode(reminder), self._per_agent, self._expiry_ms],
                    )
            except Exception as error:
                self._health.failed("inbox_put", error)
            else:
                self._health.succeeded()
                return
        super().put(reminder)

    def drain(self, agent_id: object) -> list[Reminder]:
        local = super().drain(agent_id)  # what was kept here while Redis was down
        if not isinstance(agent_id, str) or not self._health.usable("inbox_drain"):
            return local
        try:
            with Deadline(self._seconds):
                items = self._drain_script(keys=[wire(INBOX_PREFIX + agent_id)], args=[])
        except Exception as error:
            self._health.failed("inbox_drain", error)
            return local
        self._health.succeeded()
        return local + [reminder for blob in items if (reminder := _decode(blob)) is not None]

    def peek(self, agent_id: object) -> list[Reminder]:
        local = super().peek(agent_id)
        if not isinstance(agent_id, str) or not self._health.usable("inbox_peek"):
            return local
        try:
            with Deadline(self._seconds):
                items = self._client.lrange(wire(INBOX_PREFIX + agent_id), 0, -1)
        except Exception as error:
            self._health.failed("inbox_peek", error)
            return local
        self._health.succeeded()
        return local + [reminder for blob in items if (reminder := _decode(blob)) is not None]

    def pending(self) -> list[str]:
        local = super().pending()
        if not self._health.usable("inbox_pending"):
            return local
        try:
            with Deadline(max(self._seconds, SCAN_SECONDS)):  # a scan of the whole keyspace, not one call
                names = list(self._client.scan_iter(match=INBOX_PREFIX + "*", count=500))
        except Exception as error:  # the answer is this process's only; the store stays up for the runs' calls
            self._health.missed("inbox_pending", error)
            return local
        self._health.succeeded()
        shared = [text_of(name)[len(INBOX_PREFIX) :] for name in names]
        return list(dict.fromkeys(local + shared))


def reminder_inbox(config: GuardConfig, *, meter_provider: MeterProvider | None = None) -> ReminderInbox:
    """The inbox that goes with ``config``: a :class:`RedisReminderInbox` on a shared store, else in memory."""
    if config.shared_store:
        return RedisReminderInbox.from_config(config, meter_provider=meter_provider)
    return ReminderInbox()
