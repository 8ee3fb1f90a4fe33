"""What the pending steps keep of tool spans' ends: enough for every model span that can read it, nothing more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_repeat_guard.conventions.base import RequestedCall
from otel_repeat_guard.spans.requested import PendingSteps, Step
from otel_repeat_guard.spans.run import Run


def _nothing(name: str, attributes: Mapping[str, Any], events: Sequence[Any]) -> list[RequestedCall]:
    return []


def _model_step() -> Step:
    return Step(_nothing, "chat", {}, (), None)


def test_a_model_span_that_ends_after_a_tool_span_of_its_run_is_answered_already() -> None:
    steps = PendingSteps(10, baggage_runs=False)
    run = Run("coder#00000000000000aa", "coder", 0xAA)  # found through its span, as every model span's run is
    steps.tool_ended(run, 2_000)
    started_before, started_after = _model_step(), _model_step()
    steps.add(run.key, started_before, 1_000)
    assert started_before.spanned is True
    steps.add(run.key, started_after, 3_000)
    assert started_after.spanned is False


def test_a_tool_end_keyed_by_a_bare_agent_id_with_a_hash_is_kept() -> None:
    steps = PendingSteps(10, baggage_runs=False)
    run = Run("coder#00000000000000aa", "coder", how="agent_id")  # could be a run span's key: kept
    steps.tool_ended(run, 2_000)
    step = _model_step()
    steps.add(run.key, step, 1_000)
    assert step.spanned is True


def test_with_remote_runs_followed_a_bare_agent_ids_tool_end_answers_a_model_span_of_that_key() -> None:
    steps = PendingSteps(10, baggage_runs=True)  # baggage may name a run by any string, the agent id too
    steps.tool_ended(Run("coder", "coder", how="agent_id"), 2_000)
    step = _model_step()
    steps.add("coder", step, 1_000)
    assert step.spanned is True


def test_a_thousand_bare_agent_ids_leave_no_tool_end_behind() -> None:
    steps = PendingSteps(100_000, baggage_runs=False)
    for i in range(1_000):
        steps.tool_ended(Run(f"agent-{i}", f"agent-{i}", how="agent_id"), 1_000 + i)
    assert steps.tool_ends == {}
    assert steps.idle()
