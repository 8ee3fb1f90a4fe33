"""The wording the recorder and the Claude Code command hook's fast path share (core/reminders.py): which tier a
run length fires, the repeat's text at each tier, and the preview a reminder quotes."""

from __future__ import annotations

from otel_repeat_guard.core.reminders import reminder_text, repeat_text, shown_preview, stop_text, tiers_of


def test_the_first_threshold_is_gentle_the_later_ones_detailed_and_stop_at_stops() -> None:
    assert tiers_of((3, 5, 8)) == {3: "gentle", 5: "detailed", 8: "detailed"}
    assert tiers_of((3, 5, 8), 10) == {3: "gentle", 5: "detailed", 8: "detailed", 10: "stop"}
    assert tiers_of((3, 5), 5) == {3: "gentle", 5: "stop"}  # stop_at on a threshold: the stop wins
    assert tiers_of(()) == {}


def test_a_repeats_text_at_each_tier_is_the_recorders() -> None:
    assert repeat_text("gentle", "Bash", 3, "{}") == reminder_text("gentle", "Bash", 3, "{}")
    assert repeat_text("detailed", "Bash", 5, '{"a":1}') == reminder_text("detailed", "Bash", 5, '{"a":1}')
    assert repeat_text("stop", "Bash", 9, '{"a":1}') == stop_text("Bash", 9)


def test_the_preview_is_cut_and_a_lone_surrogate_shown_as_its_escape() -> None:
    assert shown_preview("abcdef", 3) == "abc… [3 more characters omitted]"
    assert shown_preview('{"p":"\ud83d"}', 100) == '{"p":"\\ud83d"}'
    assert shown_preview("é\U0001f600", 100) == "é\U0001f600"
