"""The Redis chain store moves each detector's state through the ``Stateful`` protocol alone: a new detector
needs no edit to the store, a state that does not fit starts that detector afresh, and the bytes are
those earlier versions wrote (workers of two versions share one Redis during an upgrade)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from otel_repeat_guard.core.detectors import Call, CycleDetector, Detection, NoProgressDetector, ParallelCollapse
from otel_repeat_guard.state.scripts import dump_state, load_state
from tests.distributed.servers import RedisServer


class SameTool:
    """A detector the store has never heard of: calls to one tool in a row."""

    kind = "same_tool"

    def __init__(self) -> None:
        self.tool, self.run = "", 0

    def observe(self, call: Call) -> Detection | None:
        self.run = self.run + 1 if call.tool == self.tool else 1
        self.tool = call.tool
        return Detection(self.kind, self.run, self.run, self.run == 3) if self.run > 1 else None

    def continues(self, call: Call, period: int) -> bool:
        return call.tool == self.tool

    def state(self) -> list[Any]:
        return [self.tool, self.run]

    def restore(self, state: list[Any]) -> None:
        self.tool, self.run = str(state[0]), int(state[1])


def test_a_new_detector_counts_across_processes_with_no_edit_to_the_store(tmp_path: Path) -> None:
    from otel_repeat_guard.state.redis import RedisChainStore

    server = RedisServer(tmp_path).start()
    try:
        workers = [RedisChainStore(server.url, 10, detectors=lambda: (SameTool(),), timeout_ms=2000) for _ in "ab"]
        found = []
        for i, key in enumerate((b"1", b"2", b"3")):  # each call on the other worker
            workers[i % 2].observe("run", "grep", key)
            found = workers[i % 2].detect("run", Call("grep", key))
        assert [(d.kind, d.run_length, d.fires) for d in found] == [("same_tool", 3, True)]
        assert not workers[0].health.down
    finally:
        server.kill()


def test_the_stored_bytes_are_the_earlier_format() -> None:
    cycle, no_progress, window = CycleDetector((3,), 2), NoProgressDetector((2,)), ParallelCollapse()
    cycle.observe(Call("t", b"A"))
    cycle.observe(Call("t", None))
    no_progress.observe(Call("t", b"A", b"out"))
    window.duplicate(Call("t", b"A"), 7, 1, 2)
    assert msgspec.msgpack.decode(dump_state((cycle, no_progress))) == [
        [["cycle", [["t", b"A"], ["t", None]], [0, 0, 0]], ["no_progress", ["t", b"A", b"out"], 1]],
        None,
    ]
    assert msgspec.msgpack.decode(dump_state(parallel=window)) == [[], [["t", b"A", 7, 1, 2]]]


def test_a_state_that_does_not_fit_starts_that_detector_afresh() -> None:
    cycle, no_progress = CycleDetector((3,), 2), NoProgressDetector((2,))
    cycle.observe(Call("t", b"A"))
    no_progress.observe(Call("t", b"A", b"out"))
    blob = dump_state((cycle, no_progress))

    other_period, fits = CycleDetector((3,), 4), NoProgressDetector((2,))
    load_state(blob, (other_period, fits))
    assert other_period.state() == [[], [0] * 5]  # another max_cycle_period: afresh
    assert fits.state() == no_progress.state()  # the other one is restored all the same

    swapped = NoProgressDetector((2,))
    load_state(blob, (swapped,))  # the first state is a cycle's: not this detector's
    assert swapped.state() == [None, 0]

    for unreadable in (b"\xc1", msgspec.msgpack.encode([[["cycle", "not a history"]], [[1]]])):
        fresh, window = CycleDetector((3,), 2), ParallelCollapse()
        load_state(unreadable, (fresh,), window)
        assert fresh.state() == [[], [0, 0, 0]] and window.state() == []
    load_state(None, (fresh,))
    assert fresh.state() == [[], [0, 0, 0]]
