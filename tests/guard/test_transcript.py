"""Golden transcript: five identical calls, the gentle reminder at 3 and the detailed one at 5."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import Harness

GOLDEN = Path(__file__).parent / "golden" / "five_identical_calls.txt"


def transcript(harness: Harness) -> str:
    lines: list[str] = []
    for i, span in enumerate(harness.tool_spans(), start=1):
        lines.append(f"call {i}: {span.name} {(span.attributes or {})['gen_ai.tool.call.arguments']}")
        for event in span.events:
            lines.append(f"  event {event.name}")
            lines.extend(f"    {key} = {value!r}" for key, value in (event.attributes or {}).items())
    for reminder in harness.reminders:
        lines.append(f"reminder to {reminder.agent_id} at {reminder.run_length} ({reminder.tier}):")
        lines.append(reminder.text)
    return "\n".join(lines) + "\n"


def test_five_identical_calls_match_the_golden_transcript(harness: Harness) -> None:
    with harness.agent_run("support-bot", agent_id="support-bot"):
        for _ in range(5):
            harness.call("read_file", '{"path": "src/app.py", "limit": 200}', agent_id="support-bot")
    actual = transcript(harness)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(actual, encoding="utf-8")
    assert actual == GOLDEN.read_text(encoding="utf-8")
    assert [(r.run_length, r.tier) for r in harness.reminders] == [(3, "gentle"), (5, "detailed")]
    texts = [
        e.attributes["repeat_tool_guard.reminder_text"]
        for s in harness.tool_spans()
        for e in s.events
        if e.name.endswith("reminder")
    ]  # type: ignore[index]
    assert texts == [r.text for r in harness.reminders]
