"""Reminder texts and the bounded arguments preview."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from otel_repeat_guard.core.reminders import (
    REMINDER_SOURCE,
    TOOL_NAME_CHARS,
    Reminder,
    arguments_preview,
    cycle_text,
    no_progress_text,
    reminder_text,
    stop_text,
    tier_for,
)


def test_first_threshold_is_gentle_later_ones_detailed() -> None:
    assert [tier_for(t, (3, 5, 8)) for t in (3, 5, 8)] == ["gentle", "detailed", "detailed"]
    assert tier_for(4, (4,)) == "gentle"


def test_gentle_text_uses_the_run_length() -> None:
    text = reminder_text("gentle", "grep", 4, "{}")
    assert "identical arguments 4 times in a row" in text
    assert "3 times" not in text
    assert "change your approach or conclude" in text


def test_detailed_text_names_tool_length_arguments_and_permits_finishing() -> None:
    text = reminder_text("detailed", "read_file", 5, '{"path":"a.py"}')
    assert "`read_file` 5 times in a row" in text
    assert '{"path":"a.py"}' in text
    assert "made no progress" in text
    assert "give your answer now" in text


def test_preview_is_untouched_within_the_limit() -> None:
    assert arguments_preview("abcdef", 6) == "abcdef"


def test_preview_marker_counts_the_omitted_characters() -> None:
    preview = arguments_preview("x" * 1734, 500)
    assert preview == "x" * 500 + "… [1234 more characters omitted]"


def test_reminder_is_frozen_and_hashable_with_its_source() -> None:
    reminder = Reminder("a", None, "grep", 3, 3, "gentle", "t", "{}", "0" * 32, "0" * 16)
    assert reminder.source == {"kind": "plugin", "plugin": "repeat-tool-guard"}
    assert reminder.source is REMINDER_SOURCE
    assert hash(reminder) == hash(dataclasses.replace(reminder))
    with pytest.raises(dataclasses.FrozenInstanceError):
        reminder.text = "x"  # type: ignore[misc]


def test_repeat_guard_stop_carries_its_reminder() -> None:
    from otel_repeat_guard import RepeatGuardStop
    from otel_repeat_guard.integrations._common import stop_if_due

    stop = Reminder(
        agent_id="a", agent_name=None, tool_name="grep", run_length=12, threshold=12, tier="stop",
        text="Stop calling tools now.", arguments_preview="{}", trace_id="0" * 32, span_id="0" * 16,
    )  # fmt: skip
    raised = RepeatGuardStop(stop)
    assert (raised.reminder, str(raised)) == (stop, "Stop calling tools now.")
    stop_if_due([])  # nothing due: nothing raised
    with pytest.raises(RepeatGuardStop) as caught:
        stop_if_due([stop])
    assert caught.value.reminder is stop


@pytest.mark.parametrize(
    "text",
    [
        lambda name: reminder_text("gentle", name, 3, "{}"),
        lambda name: reminder_text("detailed", name, 5, "{}"),
        lambda name: stop_text(name, 8),
        lambda name: cycle_text((name, "ls"), 3),
        lambda name: no_progress_text(name, 4, "[]"),
    ],
    ids=["gentle", "detailed", "stop", "cycle", "no-progress"],
)
def test_a_tool_name_of_a_megabyte_is_quoted_cut_and_a_name_of_the_limit_whole(text: Callable[[str], str]) -> None:
    """A tool's name is the model's own output: one of a megabyte is not sent back in every later request."""
    huge = "t" * 1_000_000
    assert f"`{'t' * TOOL_NAME_CHARS}… [{1_000_000 - TOOL_NAME_CHARS} more characters omitted]`" in text(huge)
    assert len(text(huge)) < 1_000
    assert f"`{'n' * TOOL_NAME_CHARS}`" in text("n" * TOOL_NAME_CHARS)
