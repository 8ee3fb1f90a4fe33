"""ChainTracker: the pure chain logic, without OTel."""

from __future__ import annotations

from otel_repeat_guard.chains import ChainTracker


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
    from otel_repeat_guard.detectors import Call, CycleDetector

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
    from otel_repeat_guard.detectors import Call, CycleDetector, ParallelCollapse

    cycle = CycleDetector((2,), 4)
    assert cycle.continues(Call("t", b"A"), 2) is False  # no history yet
    cycle.observe(Call("t", b"A"))
    cycle.observe(Call("t", b"B"))
    assert cycle.continues(Call("t", None), 2) is False
    assert cycle.continues(Call("t", b"A"), 2) is True
    parallel = ParallelCollapse()
    assert parallel.duplicate(Call("t", None), 7, 0, 10) is False
    assert parallel.duplicate(Call("t", b"k"), None, 0, 10) is False
