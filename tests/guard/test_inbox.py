"""ReminderInbox: a pull-based, bounded, thread-safe mailbox."""

from __future__ import annotations

import sys
import threading

import pytest

from otel_repeat_guard import GuardConfig, ReminderInbox, RepeatGuardSpanProcessor

from .conftest import make_harness


def test_inbox_as_callback_then_drain() -> None:
    inbox = ReminderInbox()
    h = make_harness(GuardConfig(thresholds=(2, 3)), on_reminder=inbox.put)
    for _ in range(3):
        h.call("grep", {"q": "X"}, agent_id="alice")
    h.call("grep", {"q": "X"}, agent_id="bob")
    assert inbox.pending() == ["alice"]
    assert [r.run_length for r in inbox.drain("alice")] == [2, 3]
    assert inbox.drain("alice") == []
    assert inbox.drain("bob") == []


def test_inbox_is_bounded() -> None:
    inbox = ReminderInbox(per_agent=2, max_agents=2)
    h = make_harness(GuardConfig(thresholds=(2, 3, 4)), on_reminder=inbox.put)
    for agent in ("a", "b", "c"):
        for _ in range(4):
            h.call("grep", {"q": "X"}, agent_id=agent)
    assert inbox.pending() == ["b", "c"]
    assert [r.run_length for r in inbox.drain("c")] == [3, 4]


def test_reminders_given_back_come_before_later_ones_and_the_bound_keeps_the_newest() -> None:
    inbox = ReminderInbox(per_agent=3)
    h = make_harness(GuardConfig(thresholds=(2, 3, 4, 5, 6)), on_reminder=inbox.put)
    for _ in range(3):
        h.call("grep", {"q": "X"}, agent_id="alice")
    drained = inbox.drain("alice")
    assert [r.run_length for r in drained] == [2, 3]
    h.call("grep", {"q": "X"}, agent_id="alice")  # raised while the request that drained was being edited
    inbox.give_back(drained)
    assert [r.run_length for r in inbox.peek("alice")] == [2, 3, 4]
    drained = inbox.drain("alice")
    for _ in range(2):
        h.call("grep", {"q": "X"}, agent_id="alice")
    inbox.give_back(drained)  # five for a box of three: the oldest given back go first
    assert [r.run_length for r in inbox.drain("alice")] == [4, 5, 6]
    inbox.give_back([])
    assert inbox.pending() == []


def test_inbox_under_concurrent_puts() -> None:
    inbox = ReminderInbox(per_agent=1000)
    guard_reminders = make_harness(GuardConfig(thresholds=(2,)))
    guard_reminders.call("g", "x", agent_id="a")
    guard_reminders.call("g", "x", agent_id="a")
    (reminder,) = guard_reminders.reminders
    threads = [threading.Thread(target=lambda: [inbox.put(reminder) for _ in range(100)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(inbox.drain("a")) == 800


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"per_agent": 0}, "per_agent"), ({"max_agents": True}, "max_agents"), ({"per_agent": 2**63}, "per_agent")],
)
def test_inbox_validation(kwargs: dict[str, int], field: str) -> None:
    """A bound past ``sys.maxsize`` too: a deque refuses it, and every reminder put would then be lost."""
    with pytest.raises(ValueError, match=f"{field} must be an integer from 1 to {sys.maxsize}, got {kwargs[field]!r}"):
        ReminderInbox(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"config": {"thresholds": [3]}}, "config must be a GuardConfig"),
        ({"on_reminder": "print"}, "on_reminder must be callable"),
        ({"max_agents": 0}, "max_agents must be an integer from 1 to .*, got 0"),
        ({"max_live_spans": -1}, "max_live_spans must be an integer from 1 to .*, got -1"),
        ({"max_agents": 2**63}, "max_agents must be an integer from 1 to .*, got 9223372036854775808"),
    ],
)
def test_processor_validates_at_construction(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RepeatGuardSpanProcessor(**kwargs)  # type: ignore[arg-type]
