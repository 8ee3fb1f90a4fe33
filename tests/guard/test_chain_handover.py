"""A chain handed from one process to the next (the Claude Code hook): ``chain_state`` and ``restore_chain``."""

from __future__ import annotations

import pytest

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.chains import ChainTracker
from otel_repeat_guard.detectors import Call


def test_a_restored_chain_goes_on_counting_where_the_last_process_left_it() -> None:
    first = ChainTracker(10)
    for _ in range(3):
        first.observe("run", "Bash", b"k1")
    first.reminded("run", "repeat", "gentle")
    state = first.chain_state("run")
    assert state == ["Bash", b"k1", 3, [["repeat", "gentle", 1]]]
    outcomes: list[tuple[str, str, str]] = []
    second = ChainTracker(10, on_reminder_outcome=lambda *outcome: outcomes.append(outcome))
    assert state is not None
    second.restore_chain("run", state)
    assert second.run_length("run") == 3 and second.pending == 1
    assert second.settle("run", "Bash", b"k1", Call("Bash", b"k1")) == [("ignored", "repeat", "gentle")]
    assert second.observe("run", "Bash", b"k1") == 4
    assert outcomes == [("ignored", "repeat", "gentle")]
    assert second.chain_state("run") == ["Bash", b"k1", 4, []]


def test_no_chain_has_no_state_and_a_malformed_state_is_refused() -> None:
    tracker = ChainTracker(10)
    assert tracker.chain_state("nobody") is None
    with pytest.raises(TypeError):
        tracker.restore_chain("run", ["Bash", "not bytes", 3, []])
    assert tracker.chain_state("run") is None


def test_the_processor_hands_over_its_in_memory_chains() -> None:
    guard = RepeatGuardSpanProcessor()
    guard.restore_chain("claude:s", ["Bash", b"k", 2, []])
    assert guard.run_length("claude:s") == 2
    assert guard.chain_state("claude:s") == ["Bash", b"k", 2, []]
