"""A chain handed from one process to the next (the Claude Code hook): ``chain_state`` and ``restore_chain``."""

from __future__ import annotations

import pytest

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.core.chains import ChainTracker
from otel_repeat_guard.core.detectors import Call


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


def test_restoring_into_a_full_tracker_ends_the_least_recent_run() -> None:
    ended: list[tuple[str, int]] = []
    tracker = ChainTracker(1, lambda tool, run: ended.append((tool, run)))
    tracker.observe("old", "grep", b"k")
    tracker.observe("old", "grep", b"k")
    tracker.restore_chain("new", ["Bash", b"k", 2, []])
    assert ended == [("grep", 2)] and tracker.chain_state("old") is None and tracker.run_length("new") == 2


def test_a_forked_child_tracker_holds_no_run_of_the_parent() -> None:
    tracker = ChainTracker(10)
    tracker.observe("run", "grep", b"k")
    tracker.reminded("run", "repeat", "gentle")
    tracker.after_fork()
    assert (len(tracker), tracker.pending, tracker.chain_state("run")) == (0, 0, None)
    assert tracker.observe("run", "grep", b"k") == 1


@pytest.mark.parametrize("key", [None, 5, ["run"], b"run"], ids=repr)
def test_the_processors_handover_ignores_a_key_that_is_not_a_string_alike_on_both_builds(key: object) -> None:
    guard = RepeatGuardSpanProcessor()
    assert guard.chain_state(key) is None  # the compiled build raised TypeError, Python an unhashable one
    guard.restore_chain(key, ["Bash", b"k", 2, []])
    assert len(guard._chains) == 0


@pytest.mark.parametrize(
    "state", ["", None, ["Bash", b"k", 2], ["Bash", "k", 2, []], ["Bash", b"k", "2", []], [1, b"k", 2, 5]]
)
def test_the_processor_refuses_what_is_no_chain_state_with_a_type_error_on_both_builds(state: object) -> None:
    guard = RepeatGuardSpanProcessor()
    with pytest.raises(TypeError, match=r"^not a chain state"):  # Python said ValueError for some, as unpacking does
        guard.restore_chain("run", state)
    assert guard.chain_state("run") is None
