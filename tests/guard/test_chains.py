"""ChainTracker: the pure chain logic, without OTel."""

from __future__ import annotations

from otel_repeat_guard.core.chains import ChainTracker


def make(max_agents: int = 100) -> tuple[ChainTracker, list[tuple[str, int]]]:
    ended: list[tuple[str, int]] = []
    return ChainTracker(max_agents, lambda tool, run: ended.append((tool, run))), ended


def test_identical_calls_extend_the_run_and_a_different_call_restarts_it() -> None:
    chains, ended = make()
    assert [chains.observe("a", "grep", b"x") for _ in range(3)] == [1, 2, 3]
    assert chains.observe("a", "grep", b"y") == 1
    assert chains.observe("a", "read", b"y") == 1
    assert ended == [("grep", 3)]
    assert chains.run_length("a") == 1


def test_unknown_arguments_never_extend_a_run() -> None:
    chains, ended = make()
    assert chains.observe("a", "grep", None) == 1
    assert chains.observe("a", "grep", None) == 1
    assert chains.observe("a", "grep", b"x") == 1
    assert ended == []


def test_agents_are_independent() -> None:
    chains, _ = make()
    chains.observe("a", "grep", b"x")
    assert chains.observe("b", "grep", b"x") == 1
    assert chains.observe("a", "grep", b"x") == 2
    assert chains.run_length("b") == 1
    assert chains.run_length("nobody") == 0


def test_reset_and_forget_record_the_final_run() -> None:
    chains, ended = make()
    chains.observe("a", "grep", b"x")
    chains.observe("a", "grep", b"x")
    chains.reset("a")
    assert chains.run_length("a") == 0
    assert chains.observe("a", "grep", b"x") == 1
    chains.forget("a")
    chains.forget("a")  # forgetting twice is harmless
    assert ended == [("grep", 2)]
    assert len(chains) == 0


def test_least_recently_active_agent_is_evicted() -> None:
    chains, ended = make(max_agents=2)
    chains.observe("a", "grep", b"x")
    chains.observe("a", "grep", b"x")
    chains.observe("b", "grep", b"x")
    chains.observe("a", "grep", b"x")  # a is now the most recent
    chains.observe("c", "grep", b"x")  # evicts b
    assert len(chains) == 2
    assert chains.run_length("b") == 0
    assert chains.run_length("a") == 3
    chains.observe("d", "grep", b"x")  # evicts a, whose run of 3 ends
    assert ended == [("grep", 3)]


def test_without_a_run_ended_callback() -> None:
    chains = ChainTracker(1)
    chains.observe("a", "t", b"k")
    chains.observe("a", "t", b"k")
    chains.observe("b", "t", b"k")
    assert chains.run_length("a") == 0
    chains.observe("b", "t", b"k")
    assert chains.observe("b", "t", b"j") == 1  # a run of 2 ends, with no one to tell


def test_the_raw_key_hint_gives_back_the_key_of_the_same_text() -> None:
    chains, _ = make()
    assert chains.key_if_same_raw("a", b"raw") is None  # no chain yet
    chains.observe("a", "grep", b"key", b"raw")
    assert chains.key_if_same_raw("a", b"raw") == b"key"
    assert chains.key_if_same_raw("a", b"other") is None
    assert chains.observe("a", "grep", b"key", b"raw2") == 2  # same arguments, new text
    assert chains.key_if_same_raw("a", b"raw2") == b"key"
    assert chains.observe("a", "grep", b"key") == 3  # a short text keeps the last raw key
    assert chains.key_if_same_raw("a", b"raw2") == b"key"
    chains.observe("a", "grep", b"new")
    assert chains.key_if_same_raw("a", b"raw2") is None


def test_detectors_and_reminder_outcomes_live_in_the_run_state() -> None:
    from otel_repeat_guard.core.detectors import Call, CycleDetector

    tracker = ChainTracker(10)  # no detectors, no outcome callback
    assert tracker.detect("a", Call("t", b"k")) == []
    tracker.observe("a", "t", b"k")
    tracker.reminded("a", "repeat", "gentle")
    assert tracker.pending == 1
    assert tracker.settle("a", "t", b"k", Call("t", b"k")) == [("ignored", "repeat", "gentle")]
    assert tracker.pending == 0 and tracker.settle("a", "t", b"k", Call("t", b"k")) == []
    tracker.reminded("a", "repeat", "gentle")
    tracker.forget("a")  # ended, with no callback to tell
    assert tracker.pending == 0

    told: list[tuple[str, str, str]] = []
    tracker = ChainTracker(
        10, detectors=lambda: (CycleDetector((2,), 3),), on_reminder_outcome=lambda *o: told.append(o)
    )
    for key in (b"A", b"B", b"A", b"B"):
        tracker.observe("a", "t", key)
        found = tracker.detect("a", Call("t", key))
    assert [(d.kind, d.period, d.threshold, d.fires) for d in found] == [("cycle", 2, 2, True)]
    tracker.reminded("a", "cycle", "gentle", 2)
    assert tracker.settle("a", "t", b"A", Call("t", b"A")) == [("ignored", "cycle", "gentle")]  # the cycle goes on
    tracker.reminded("a", "cycle", "gentle", 2)
    assert tracker.settle("a", "t", b"C", Call("t", b"C")) == [("broken", "cycle", "gentle")]
    assert told == [("ignored", "cycle", "gentle"), ("broken", "cycle", "gentle")]


def test_a_cycle_never_continues_with_unknown_arguments_or_before_it_has_a_past() -> None:
    from otel_repeat_guard.core.detectors import Call, CycleDetector, ParallelCollapse

    cycle = CycleDetector((2,), 4)
    assert cycle.continues(Call("t", b"A"), 2) is False  # no history yet
    cycle.observe(Call("t", b"A"))
    cycle.observe(Call("t", b"B"))
    assert cycle.continues(Call("t", None), 2) is False
    assert cycle.continues(Call("t", b"A"), 2) is True
    parallel = ParallelCollapse()
    assert parallel.duplicate(Call("t", None), 7, 0, 10) is False
    assert parallel.duplicate(Call("t", b"k"), None, 0, 10) is False


def test_every_detector_moves_its_state_through_state_and_restore() -> None:
    from otel_repeat_guard.core.detectors import (
        Call,
        CycleDetector,
        NoProgressDetector,
        ParallelCollapse,
        RepeatDetector,
    )

    repeat = RepeatDetector()
    assert repeat.observe(Call("t", b"k")) is None
    found = repeat.observe(Call("t", b"k"))
    assert found is not None and (found.kind, found.run_length, found.fires) == ("repeat", 2, False)
    assert repeat.continues(Call("t", b"k")) and not repeat.continues(Call("t", None))
    copy = RepeatDetector()
    copy.restore(repeat.state())
    assert copy.state() == ["t", b"k", 2] and copy.count("t", b"k") == 3

    cycle, no_progress, parallel = CycleDetector((2,), 3), NoProgressDetector((2,)), ParallelCollapse()
    for key in (b"A", None, b"B", b"A"):
        cycle.observe(Call("t", key))
        no_progress.observe(Call("t", key, b"same"))
    parallel.duplicate(Call("t", b"A"), 7, 0, 10)
    for made, original in (
        (CycleDetector((2,), 3), cycle),
        (NoProgressDetector((2,)), no_progress),
        (ParallelCollapse(), parallel),
    ):
        made.restore(original.state())
        assert made.state() == original.state()
    assert CycleDetector((2,), 3).observe(Call("t", b"B")) is None
    restored = CycleDetector((2,), 3)
    restored.restore(cycle.state())
    assert restored.observe(Call("t", b"B")) == cycle.observe(Call("t", b"B"))  # the same past, the same answer
    empty = NoProgressDetector((2,))
    empty.restore(NoProgressDetector((2,)).state())
    assert empty.state() == [None, 0]


def test_a_state_that_does_not_fit_raises_and_leaves_the_detector_as_it_was() -> None:
    import pytest

    from otel_repeat_guard.core.detectors import Call, CycleDetector, RepeatDetector

    repeat = RepeatDetector("t", b"k", None, 2)
    for bad in (["t", b"k"], [1, b"k", 2], ["t", "k", 2], ["t", b"k", "2"]):
        with pytest.raises((TypeError, ValueError)):
            repeat.restore(bad)
    assert repeat.state() == ["t", b"k", 2]
    cycle = CycleDetector((2,), 3)
    cycle.observe(Call("t", b"A"))
    with pytest.raises(ValueError, match="periods"):
        cycle.restore(CycleDetector((2,), 5).state())  # another max_cycle_period
    assert cycle.state() == [[["t", b"A"]], [0, 0, 0, 0]]


def test_the_bounded_map_helpers() -> None:
    from collections import OrderedDict

    from otel_repeat_guard.core.rules import evict_oldest, put_bounded

    assert evict_oldest({}) is None
    mapping: OrderedDict[str, int] = OrderedDict(a=1, b=2)
    mapping.move_to_end("a")
    assert evict_oldest(mapping) == ("b", 2)
    assert put_bounded(mapping, "c", 3, 2) is None
    assert put_bounded(mapping, "d", 4, 2) == ("a", 1)
    assert list(mapping) == ["c", "d"]


def test_a_parallel_windows_first_call_makes_a_chain_within_max_agents() -> None:
    from otel_repeat_guard.core.detectors import Call

    chains, ended = make(max_agents=2)
    chains.observe("a", "t", b"k")
    chains.observe("a", "t", b"k")
    chains.reminded("a", "repeat", "gentle")
    chains.observe("b", "t", b"k")
    assert chains.parallel_duplicate("c", Call("t", b"k"), 1, 0, 10) is False  # evicts a, the least recent
    assert len(chains) == 2 and chains.run_length("a") == 0 and chains.run_length("c") == 0
    assert ended == [("t", 2)] and chains.pending == 0
    assert chains.parallel_duplicate("c", Call("t", b"k"), 1, 5, 15) is True
    assert chains.observe("c", "t", b"k") == 1
