"""redact=: argument text a reminder quotes can be rewritten; detection still sees the real arguments."""

from __future__ import annotations

import re

import pytest

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor

from .conftest import make_harness

SECRET = "sk-live-0123456789abcdef"


def _mask_keys(text: str) -> str:
    return re.sub(r"sk-live-[0-9a-f]+", "sk-live-***", text)


def test_redact_rewrites_previews_texts_and_events() -> None:
    h = make_harness(GuardConfig(thresholds=(2, 3)), redact=_mask_keys)
    with h.agent_run("a"):
        for _ in range(3):
            h.call("http_get", {"url": "https://api.example.com", "token": SECRET})
    assert [r.tier for r in h.reminders] == ["gentle", "detailed"]
    detailed = h.reminders[1]
    assert detailed.arguments_preview == '{"token":"sk-live-***","url":"https://api.example.com"}'
    assert "sk-live-***" in detailed.text
    for span in h.exporter.get_finished_spans():
        for event in span.events:
            assert all(SECRET not in str(value) for value in (event.attributes or {}).values())


def test_redaction_does_not_change_detection() -> None:
    h = make_harness(GuardConfig(thresholds=(2,)), redact=lambda text: "[redacted]")
    with h.agent_run("a"):
        h.call("login", {"password": "one"})
        h.call("login", {"password": "two"})  # redacted alike, but different calls
        h.call("login", {"password": "two"})
    assert h.run_lengths() == [1, 1, 2]
    (reminder,) = h.reminders
    assert reminder.arguments_preview == "[redacted]"


def test_a_raising_redact_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("redactor bug")

    h = make_harness(GuardConfig(thresholds=(2,)), redact=broken)
    with h.agent_run("a"):
        h.call("login", {"password": "p"})
        h.call("login", {"password": "p"})  # the preview is lost, never the detection or the span
    assert [r.run_length for r in h.reminders] == [2]
    assert len(h.tool_spans()) == 2
    assert "redactor bug" in caplog.text


def test_redact_must_be_callable() -> None:
    with pytest.raises(ValueError, match="redact must be callable"):
        RepeatGuardSpanProcessor(redact="***")  # type: ignore[arg-type]


@pytest.mark.parametrize("redact", [lambda text: 1 / 0, lambda text: None], ids=["raises", "returns-none"])
def test_a_failing_redactor_loses_only_the_preview(redact: object, caplog: pytest.LogCaptureFixture) -> None:
    """The detection, the run lengths and the reminder stay; the quoted arguments become a fixed marker."""
    from otel_repeat_guard.processor import REDACTION_FAILED

    h = make_harness(GuardConfig(thresholds=(2, 3)), redact=redact)  # type: ignore[arg-type]
    with h.agent_run("a"):
        for _ in range(3):
            h.call("http_get", {"token": SECRET})
    assert h.run_lengths() == [1, 2, 3]
    assert [(r.tier, r.arguments_preview) for r in h.reminders] == [
        ("gentle", REDACTION_FAILED),
        ("detailed", REDACTION_FAILED),
    ]
    assert REDACTION_FAILED in h.reminders[1].text
    for span in h.exporter.get_finished_spans():
        for event in span.events:
            assert all(SECRET not in str(value) for value in (event.attributes or {}).values())
    assert any("redact= callable failed" in r.getMessage() for r in caplog.records)
